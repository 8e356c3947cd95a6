"""Figures on a page: a run's figures one under another, and a chart fitted to its column."""

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


def show_figures(drawn, key: str) -> None:
    """Figures of a run (`RunFigure`s) one under another (`show_figure`)."""
    for index, drawn_figure in enumerate(drawn):
        show_figure(st, drawn_figure, f"{key}_{index}")
