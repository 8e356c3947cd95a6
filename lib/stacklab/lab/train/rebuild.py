"""A run's model as it was built, before any step: for the scores at init that were not
recorded while it trained (`stacklab.lab.train.analysis`)."""

from __future__ import annotations

from ...core.build import StackModule


def model_as_built(run) -> StackModule:
    """The model of ``run`` (a `stacklab.Run`) with the parameters it started from, on its
    device: its network built again with the run's seed, or, for a model built beforehand,
    with the parameters it was handed over with (``run.start_state``)."""
    model = run.network.build(seed=run.config.seed, device=run.device)
    if run.start_state is not None:
        model.load_state_dict(run.start_state)
    return model
