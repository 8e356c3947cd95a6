"""Figures on a page: a run's figures one under another, and a chart fitted to its column."""

from __future__ import annotations

import streamlit as st

from stacklab import figures
from ui.markdown import plain


def chart(container, figure, key: str, columns: int = 1) -> None:
    """``figure`` as an interactive chart, its title fitted to one of ``columns`` columns."""
    container.plotly_chart(figures.fit_title(figure, figures.column_width(columns)), key=key)


def show_figures(drawn, key: str) -> None:
    """Figures of a run (`RunFigure`s) one under another: title, score, caption, chart."""
    for index, drawn_figure in enumerate(drawn):
        st.subheader(plain(drawn_figure.title, 200))
        if drawn_figure.score:
            st.markdown(f"**{plain(drawn_figure.score, 300)}**")
        st.caption(plain(drawn_figure.caption, 1000))
        chart(st, drawn_figure.figure, f"{key}_{index}")
