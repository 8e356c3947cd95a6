"""The one door to Streamlit's private names, which the app uses for speed only.

- `plotly_chart_json` puts a chart of plotly JSON made once for many sessions in a page as
  ``st.plotly_chart`` would, building its element from the JSON directly (Streamlit's
  ``DeltaGenerator``, ``_enqueue``, ``st._main``, the element's proto, its id and layout,
  and the agent API's reading of the chart);
- `session_id` and `session_active` read which browser session runs this script, and
  whether it is still connected (``Runtime``, ``get_script_run_ctx``);
- `main_script_folder` is the folder of the app's main script, which the pages' paths
  are relative to (the script run's ``pages_manager``).

Each has a public fallback, chosen here at import time when Streamlit lacks a name, or for
all of them when ``STACKLAB_PUBLIC_API_ONLY=1`` (tests/test_public_api.py runs the app's
journeys so): the chart goes through ``st.plotly_chart`` (its JSON read again per
session), no session is known (a closed tab's runs are let go after the session TTL, not
within seconds) and the pages are declared on every script run. A Streamlit release without
the private names costs speed, never a page. Plotly's private names have their own door in
the library (`stacklab.lab.figures.plotly_private`); `tests/test_architecture.py` checks that
no other module names either's.
"""

from __future__ import annotations

import functools
import json
import os

import streamlit as st

PUBLIC_ONLY = os.environ.get("STACKLAB_PUBLIC_API_ONLY") == "1"

try:
    if PUBLIC_ONLY:
        raise ImportError("STACKLAB_PUBLIC_API_ONLY=1: the public fallbacks")
    from streamlit.delta_generator import DeltaGenerator
    from streamlit.elements.lib import agent_spec
    from streamlit.elements.lib.form_utils import current_form_id
    from streamlit.elements.lib.layout_utils import LayoutConfig
    from streamlit.elements.lib.utils import compute_and_register_element_id
    from streamlit.elements.plotly_chart import _plotly_data
    from streamlit.proto.PlotlyChart_pb2 import PlotlyChart as PlotlyChartProto

    BUILDS_CHARTS = hasattr(st, "_main") and hasattr(DeltaGenerator, "_enqueue")
except ImportError:
    BUILDS_CHARTS = False

try:
    if PUBLIC_ONLY:
        raise ImportError("STACKLAB_PUBLIC_API_ONLY=1: the public fallbacks")
    from streamlit.runtime import Runtime
    from streamlit.runtime.scriptrunner import get_script_run_ctx

    READS_SESSIONS = True
except ImportError:
    READS_SESSIONS = False


def plotly_chart_json(container, spec: str, *, key: str, alt: str | None,
                      height: int | None, config: dict | None = None) -> None:
    """A chart of ``spec`` (a plotly figure's JSON) in ``container`` (``st`` itself or a
    container), as ``st.plotly_chart`` shows that figure, without its per-session work:
    plotly's ``to_dict`` and ``to_json``, and the agent API's reading of that JSON."""
    if not BUILDS_CHARTS:  # the public way: the JSON read again, then serialised again
        container.plotly_chart(json.loads(spec), key=key, alt=alt or None,
                               height=height or "content", config=config or {})
        return
    container = container if isinstance(container, DeltaGenerator) else st._main  # st itself
    proto = PlotlyChartProto()
    proto.theme = "streamlit"
    proto.form_id = current_form_id(container)
    proto.spec, proto.config = spec, json.dumps(config or {})
    if alt:
        proto.alt = alt  # its text alternative, as ``st.plotly_chart(alt=...)`` sets it
    proto.id = compute_and_register_element_id(
        "plotly_chart", user_key=key, key_as_main_identity=False, dg=container,
        plotly_spec=proto.spec, plotly_config=proto.config, selection_mode=("points", "box", "lasso"),
        is_selection_activated=False, theme="streamlit", width="stretch", height="content",
        alt=alt or None)
    described = _described(spec, key) if agent_spec.is_recording() else None
    container._enqueue("plotly_chart", proto, agent_props=described,
                       layout_config=LayoutConfig(width="stretch", height=height or 450))


@functools.lru_cache(maxsize=16)
def _described(spec: str, key: str) -> str | None:
    """What the agent API says of a chart of ``spec``: made once per figure, not per
    session (its figure's values, decoded from the JSON)."""
    return agent_spec.element("plotly_chart", key=key, data_builder=lambda: _plotly_data(spec))


def session_id() -> str | None:
    """The Streamlit session of this script run when a real browser session runs it (not
    AppTest, not a bare script); None there, and in the public fallback."""
    if not READS_SESSIONS:
        return None
    ctx = get_script_run_ctx()
    if ctx is not None and Runtime.exists() and Runtime.instance().is_active_session(
            ctx.session_id):
        return ctx.session_id
    return None


def session_active(session: str) -> bool:
    """Whether the browser session ``session`` is still connected (True when no server
    runtime can say)."""
    if not READS_SESSIONS or not Runtime.exists():
        return True
    return Runtime.instance().is_active_session(session)


def main_script_folder() -> str | None:
    """The folder of the app's main script in this script run; None without a script run
    (bare Python) and in the public fallback."""
    if not READS_SESSIONS:
        return None
    ctx = get_script_run_ctx()
    return None if ctx is None else str(ctx.pages_manager.main_script_parent)
