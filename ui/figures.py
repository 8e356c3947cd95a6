"""Figures on a page: a run's figures led by its pattern figure and grouped in tabs, a
list of figures one under another, a chart fitted to its column (a phone's narrow one on a
phone), and a chart prepared once for many sessions (`prepared_chart`); each named for
screen readers by a text alternative that carries its numbers."""

from __future__ import annotations

import functools
from pathlib import Path

import streamlit as st

from stacklab import figures
from ui import browsers, glossary, private_api
from ui.markdown import plain

ASSETS = Path(__file__).parent.parent / "assets"  # the app's own pictures


def asset(name: str) -> str:
    """The path of the app's picture ``name`` (under assets/), for ``st.image``."""
    return str(ASSETS / name)


def fitted(figure, columns: int = 1):
    """``figure`` fitted to one of ``columns`` columns of the page: its title wrapped to
    the column (in place), or on a phone a copy laid out for the phone's one column."""
    if browsers.on_phone():
        return figures.phone_figure(figure)
    return figures.fit_title(figure, figures.column_width(columns))


# On a phone a chart is looked at, not handled: a still chart (no drag to zoom or pan, no
# zoom by scrolling, no toolbar), so a swipe on it scrolls the page as a swipe anywhere
# does; its numbers are in its caption and its text alternative. Elsewhere plotly's own.
PHONE_CONFIG = {"displayModeBar": False, "scrollZoom": False, "doubleClick": False,
                "staticPlot": True, "responsive": True}


def config() -> dict:
    """The plotly config of this session's charts: `PHONE_CONFIG` on a phone, else none."""
    return dict(PHONE_CONFIG) if browsers.on_phone() else {}


def chart(container, figure, key: str, columns: int = 1, score: str | None = None) -> None:
    """``figure`` as an interactive chart fitted to one of ``columns`` columns (`fitted`),
    with its text alternative (its title, ``score`` and its numbers) as its accessible name;
    on a phone a still one that a swipe scrolls past (`PHONE_CONFIG`)."""
    container.plotly_chart(fitted(figure, columns), key=key, config=config(),
                           alt=figures.describe(figure, score))


def prepared_chart(container, prepared, key: str) -> None:
    """A chart of ``prepared`` (a `PreparedFigure`: plotly JSON made once for every session
    following a run) as ``st.plotly_chart`` would show that figure, element for element
    (tests/test_app.py compares the two), without its per-session work: plotly's
    ``to_dict`` and ``to_json`` of the figure, and the agent API's reading of that JSON.

    ``st.plotly_chart`` takes only a figure or a dict, and serialises it on every call, so
    this builds its element from the JSON directly where Streamlit allows
    (`ui.private_api.plotly_chart_json`)."""
    private_api.plotly_chart_json(container, prepared.spec, key=key, alt=prepared.alt,
                                  height=prepared.height, config=config())


@functools.lru_cache(maxsize=16)
def still_html(svg: str, alt: str) -> str:
    """The ``<img>`` of a still picture (`stacklab.figures.svg_img`), made once per picture
    for every session that shows it."""
    return figures.svg_img(svg, alt)


def show_figure(container, drawn_figure, key: str, columns: int = 1) -> None:
    """One figure of a run (a `RunFigure`): title, score, caption in the page's own text
    (readable, not a small grey caption), the glossary's terms it uses, chart."""
    container.subheader(plain(drawn_figure.title, 200))
    if drawn_figure.score:
        container.markdown(f"**{plain(drawn_figure.score, 300)}**")
    container.markdown(plain(drawn_figure.caption, 1000))
    glossary.show_terms(container, drawn_figure.key, drawn_figure.caption)
    chart(container, drawn_figure.figure, key, columns, drawn_figure.score)


def show_lead(drawn_figure, key: str) -> None:
    """The figure a page leads with: its title, then the chart beside its number and
    caption, so that the chart starts high on the first screen."""
    st.subheader(plain(drawn_figure.title, 200))
    picture, words = st.columns([3, 2], gap="medium")
    chart(picture, drawn_figure.figure, key, columns=2, score=drawn_figure.score)
    if drawn_figure.score:
        words.markdown("#### " + plain(drawn_figure.score, 300))
    words.markdown(plain(drawn_figure.caption, 1000))
    glossary.show_terms(words, drawn_figure.key, drawn_figure.caption)


def show_figures(drawn, key: str) -> None:
    """Figures of a run (`RunFigure`s) one under another (`show_figure`)."""
    for index, drawn_figure in enumerate(drawn):
        show_figure(st, drawn_figure, f"{key}_{index}")


def show_arranged(drawn, pattern_key: str, key: str) -> None:
    """A run's figures as Explore leads with them (`stacklab.figures.arrange`): the task's
    pattern figure and its number first, the others in one tab per group, and the figures
    the stack could not give listed once, each with its reason."""
    arranged = figures.arrange(drawn, pattern_key)
    if arranged.lead is not None:
        show_lead(arranged.lead, f"{key}_lead")
    if arranged.groups:
        st.markdown("**More figures, by what they show:**")
        tabs = st.tabs([f"{name} ({len(found)})" for name, found in arranged.groups.items()])
        for tab, (name, found) in zip(tabs, arranged.groups.items()):
            with tab:
                for index, drawn_figure in enumerate(found):
                    show_figure(st, drawn_figure, f"{key}_{name}_{index}")
    if arranged.not_drawn:
        st.markdown("**Not drawn for this run:**\n" + "\n".join(
            f"- {plain(title, 200)}: {plain(reason, 400)}" for title, reason in arranged.not_drawn))
