"""What app.py sets up on every script run of every page, made once per server where it is
the same for every session: the pages ``st.navigation`` is given, and the page icon.

A lecture hall opens one link hundreds of times at once, and each opening runs app.py:
eight ``st.Page`` each resolve their file (a system call per folder of its path), check
it is there and validate their icon, and ``st.set_page_config`` reads, decodes and
registers the icon file, on every run. Here the pages are made once and copied for each
run (``st.navigation`` marks the copy this run may call, so no two sessions share one),
and the icon is a ``data:`` address, which the browser reads as it is: it fetches nothing,
and the server neither reads the file nor keeps a copy for each session.
"""

from __future__ import annotations

import base64
import copy
from collections.abc import Callable
from pathlib import Path

import streamlit as st

from ui import private_api
from ui.hub import Hub

ICON_FILE = Path(__file__).parent.parent / "assets" / "icon.png"  # the app's own picture
ICON = "data:image/png;base64," + base64.b64encode(ICON_FILE.read_bytes()).decode("ascii")


def pages(declare: Callable[[], list[st.Page]]) -> list[st.Page]:
    """The pages ``declare()`` makes, made once per server (kept by the hub, per version of
    its code and per folder of the app's main script, which their paths are relative to)
    and copied for this run."""
    folder = private_api.main_script_folder()
    if folder is None:  # no script run (bare Python: st.Page makes an empty page anyway), or
        return declare()  # Streamlit's script run not readable (ui.private_api)
    made = Hub.current().pages.get((declare.__code__, folder), declare)  # kept: ui.hub.Made
    return [copy.copy(page) for page in made]
