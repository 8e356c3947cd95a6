"""Present mode (``view=present``), for any page: the page chrome, the sidebar and
the settings out of sight, one figure at a time at full width with its text readable from
the back of a room, and the buttons that step through the figures or leave.

A page in present mode calls `begin` first (the chrome goes), draws `slide_bar` with the
names of its figures (it returns the one to show) and then only that figure, with
`figure_at_full_width`. Train and Compare use it; Explore and Learn can do the same.
"""

from __future__ import annotations

from html import escape
from typing import Sequence

import streamlit as st

from stacklab import figures
from ui import session, urls
from ui.lab import present_figure
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


# The class's votes on the projector: each choice a thick bar with its count, in type that
# the back row reads; the choice the run supports marked once the teacher revealed.
VOTES_CSS = """<style>
.votes { font-family: sans-serif; }
.votes h3 { font-size: 34px; margin: 0 0 12px 0; }
.votes .choice { font-size: 32px; margin: 14px 0 4px 0; }
.votes .track { background: #e8eaf0; border-radius: 8px; height: 56px; }
.votes .bar { background: #4a6fd1; height: 56px; border-radius: 8px; min-width: 6px; }
.votes .supported .bar { background: #1f9d55; }
.votes .supported .choice { font-weight: 700; }
.votes .count { font-size: 30px; margin-top: 4px; }
.votes .run { font-size: 32px; margin-top: 18px; font-weight: 700; }
.votes .voted { font-size: 40px; font-weight: 700; }
.votes .question { font-size: 34px; font-weight: 700; line-height: 1.3; margin: 8px 0 4px 0; }
.votes .measure { font-size: 28px; margin-bottom: 8px; }
</style>"""


def vote_bars(container, counted, title: str) -> None:
    """One round of votes (`stacklab.serve.votes.Round`) as bars at projector size: each
    choice's count and share, and once the run is in, its choice marked and its sentence
    ("5 of 8 predicted ...; the run: 0.93")."""
    rows = []
    for choice, count in zip(counted.choices, counted.counts):
        share = counted.share(choice)
        mark = counted.revealed and choice == counted.supported
        rows.append(
            f"<div class='{'supported' if mark else 'other'}' data-choice='{escape(choice)}'>"
            f"<div class='choice'>{escape(choice)}{' ✓ the run' if mark else ''}</div>"
            f"<div class='track'><div class='bar' style='width:{share:.0%}'></div></div>"
            f"<div class='count'>{count} vote{'s' * (count != 1)}</div></div>")
    sentence = counted.sentence()
    container.html(VOTES_CSS + f"<div class='votes' data-round='{counted.round}'>"
                   f"<h3>{escape(title)}</h3>{''.join(rows)}"
                   + (f"<div class='run'>{escape(sentence)}</div>" if sentence else "")
                   + "</div>")


def voted_line(container, voted: int, following: int) -> None:
    """``12 voted of 30 following``, at the size of the projector's headline."""
    container.html(VOTES_CSS + f"<div class='votes'><div class='voted'>{voted} voted of "
                   f"{following} following</div></div>")


def question_line(container, question: str, measure: str) -> None:
    """The step's question at the projector's size, above the room's votes, and what the
    choices are of (``measure``: "accuracy will be")."""
    container.html(VOTES_CSS + f"<div class='votes' data-question><div class='question'>"
                   f"{escape(' '.join(question.split())[:400])}</div><div class='measure'>"
                   f"{escape(' '.join(measure.split())[:200])}:</div></div>")
