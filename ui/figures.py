"""Figures on a page: a run's figures led by its pattern figure and grouped in tabs, a
list of figures one under another, and a chart fitted to its column."""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from stacklab import figures
from ui import glossary
from ui.markdown import plain

ASSETS = Path(__file__).parent.parent / "assets"  # the app's own pictures


def asset(name: str) -> str:
    """The path of the app's picture ``name`` (under assets/), for ``st.image``."""
    return str(ASSETS / name)


def chart(container, figure, key: str, columns: int = 1) -> None:
    """``figure`` as an interactive chart, its title fitted to one of ``columns`` columns."""
    container.plotly_chart(figures.fit_title(figure, figures.column_width(columns)), key=key)


def show_figure(container, drawn_figure, key: str, columns: int = 1) -> None:
    """One figure of a run (a `RunFigure`): title, score, caption in the page's own text
    (readable, not a small grey caption), the glossary's terms it uses, chart."""
    container.subheader(plain(drawn_figure.title, 200))
    if drawn_figure.score:
        container.markdown(f"**{plain(drawn_figure.score, 300)}**")
    container.markdown(plain(drawn_figure.caption, 1000))
    glossary.show_terms(container, drawn_figure.key, drawn_figure.caption)
    chart(container, drawn_figure.figure, key, columns)


def show_lead(drawn_figure, key: str) -> None:
    """The figure a page leads with: its title, then the chart beside its number and
    caption, so that the chart starts high on the first screen."""
    st.subheader(plain(drawn_figure.title, 200))
    picture, words = st.columns([3, 2], gap="medium")
    chart(picture, drawn_figure.figure, key, columns=2)
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
