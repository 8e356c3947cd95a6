"""Browser liveness: which session of the pool's runs still has a browser tab open, so the
runs of a closed or reloaded tab are detached soon, not after the session TTL."""

from __future__ import annotations

import streamlit as st

from ui import private_api

_BROWSER_SESSIONS: dict[str, str] = {}  # owner -> its Streamlit session (served pages only)


def register(owner: str) -> None:
    """Remember the Streamlit session of ``owner`` when the script runs in a real browser
    session (not in AppTest): the pool may then ask whether it is still there."""
    session = private_api.session_id()
    if session is not None:
        _BROWSER_SESSIONS[owner] = session


def connected(owner: str) -> bool:
    """Whether the browser session of ``owner`` is still connected (a closed or reloaded tab
    is not): its runs are then detached soon, not after the session TTL."""
    session = _BROWSER_SESSIONS.get(owner)
    if session is None:
        return True
    alive = private_api.session_active(session)
    if not alive and len(_BROWSER_SESSIONS) > 10_000:
        _BROWSER_SESSIONS.pop(owner, None)  # bounded: a gone session's entry can go
    return alive


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
