"""Browser liveness: which session of the pool's runs still has a browser tab open, so the
runs of a closed or reloaded tab are detached soon, not after the session TTL (the map is
the hub's, `ui.hub.BrowserSessions`; Streamlit's answer is handed in from here), and
whether this session's browser is a phone's."""

from __future__ import annotations

import streamlit as st

from ui import private_api
from ui.hub import Hub


def register(owner: str) -> None:
    """Remember the Streamlit session of ``owner`` in the hub (`ui.hub.BrowserSessions`)
    when the script runs in a real browser session (not in AppTest): the pool may then ask
    whether it is still there (`private_api.session_active`)."""
    session = private_api.session_id()
    if session is not None:
        Hub.current().browsers.register(owner, session, private_api.session_active)


def on_phone() -> bool:
    """Whether this session's browser is a phone's: its User-Agent has "Mobi", the token that
    phones' browsers send (tablets' do not). Figures are then laid out for a narrow column
    (`stacklab.figures.phone_figure`); the page's own layout follows the screen's width in
    CSS (ui/style.py), whatever the browser."""
    try:
        agent = st.context.headers.get("User-Agent") or ""
    except Exception:  # noqa: BLE001 - no request behind this run (AppTest, a bare script)
        return False
    return "Mobi" in agent
