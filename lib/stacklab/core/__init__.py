"""The core layer: the stack language, op specs and the catalog, resolving, the resolved
network and its report, building it into torch, exporting it, and editing stack text.

Nothing here knows about training, tasks, figures or the app; the layers above
(`stacklab.ops`, `stacklab.lab`, `stacklab.serve`) import from here, never the other way.
"""

__version__ = "0.1.0"  # also in pyproject.toml; part of every run key
