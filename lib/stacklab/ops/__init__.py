"""The op catalog: one file per op, each holding its torch module and its `OpSpec`.

`stacklab.core.spec.catalog()` imports every module here; adding an op touches one file.
"""
