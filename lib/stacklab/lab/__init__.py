"""The lab layer: the settings table, toy tasks, the trainer and its recorders, analysis,
figures, checkpoints and the HTML report. It builds on `stacklab.core` and the ops and
never imports the app; the settings table carries the app's hints for each setting
(label, classroom range, page) as plain data, so that a setting is declared once.
"""
