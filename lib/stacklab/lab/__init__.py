"""The lab layer: the settings table, toy tasks, the trainer and its recorders, analysis,
figures, checkpoints and the HTML report. It builds on `stacklab.core` and the ops; it
knows nothing of the app.
"""
