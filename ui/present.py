"""Present mode (``view=present``), for any page: the page chrome, the sidebar and
the settings out of sight, one figure at a time at full width with its text readable from
the back of a room, and the buttons that step through the figures or leave.

A page in present mode calls `begin` first (the chrome goes), draws `slide_bar` with the
names of its figures (it returns the one to show) and then only that figure, with
`figure_at_full_width`. Train and Compare use it; Explore and Learn can do the same.
"""

from __future__ import annotations

from typing import Sequence

import streamlit as st

from stacklab import figures
from ui import session, urls
from ui.library import present_figure
from ui.markdown import plain

state = session.PageState("present", "slide", "page")

# Everything a projector does not need: the sidebar and its button, the page header and
# toolbar, Streamlit's decoration; the page uses the whole width, with little margin.
CHROME_CSS = """<style>
[data-testid="stSidebar"], [data-testid="stSidebarCollapsedControl"],
[data-testid="stHeader"], [data-testid="stToolbar"], [data-testid="stDecoration"],
[data-testid="stSidebarNav"], [data-testid="stExpandSidebarButton"] { display: none !important; }
.block-container, [data-testid="stMainBlockContainer"] {
  max-width: 100% !important; padding: 1rem 2rem 2rem 2rem !important; }
[data-testid="stMainBlockContainer"] p { font-size: 20px; }
[data-testid="stMainBlockContainer"] .st-key-present p,
[data-testid="stMainBlockContainer"] .st-key-present li { font-size: 24px; line-height: 1.4; }
.st-key-present h2 { font-size: 44px; }
.st-key-present_bar p { font-size: 22px; }
</style>"""


def hide_chrome() -> None:
    """The sidebar, the header and the toolbar out of sight; the figure's words large."""
    st.html(CHROME_CSS)


def begin(page: str) -> None:
    """The chrome out of sight; the slide starts again at the first on another page."""
    hide_chrome()
    if state.get("page") != page:
        state["page"], state["slide"] = page, 0


def slide_bar(names: Sequence[str]) -> int:
    """Previous, the figure's name and place, next, and leaving present mode; the index of
    the figure to show (kept per session, clamped when the figures change)."""
    index = min(max(int(state.get("slide") or 0), 0), max(len(names) - 1, 0))
    state["slide"] = index

    def move(by: int) -> None:
        state["slide"] = min(max(index + by, 0), max(len(names) - 1, 0))

    with st.container(key="present_bar"):
        back, where, forward, leave = st.columns([1, 4, 1, 1.4], vertical_alignment="center")
        back.button("← Previous", key="present_previous", disabled=index == 0,
                    on_click=move, args=(-1,), width="stretch")
        if names:
            where.markdown(f"**{index + 1} / {len(names)}** · {plain(names[index], 160)}")
        forward.button("Next →", key="present_next", disabled=index >= len(names) - 1,
                       on_click=move, args=(1,), width="stretch")
        leave.button("Leave present mode", key="present_leave",
                     on_click=lambda: urls.set_presenting(False), width="stretch")
    return index


def figure_at_full_width(container, figure, key: str, columns: int = 1,
                         score: str | None = None, height: int | None = None) -> None:
    """``figure`` made for a projector (`present_figure`: text 20 px or more, the title on
    at most two lines) in ``container``, at the width of its column (``height`` px tall,
    when given), with its text alternative (`stacklab.figures.describe`, with ``score``)
    as its accessible name."""
    shown = present_figure(figure, columns=columns)
    if height is not None:
        shown.update_layout(height=height)
    container.plotly_chart(shown, key=key, width="stretch" if columns > 1 else "content",
                           alt=figures.describe(figure, score))
