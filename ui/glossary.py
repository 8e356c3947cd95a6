"""The glossary on the app's pages (`stacklab.lab.glossary`, declared once): the help of a
control whose setting uses a term, the terms under a figure's caption, and the whole table
as a section of the Learn page."""

from __future__ import annotations

import functools

import streamlit as st

from ui.library import GLOSSARY, terms_in, terms_used_in
from ui.markdown import plain


def definitions(terms) -> str:
    """``terms`` as a Markdown list: each term in bold, then its one-line definition."""
    return "\n".join(f"- **{plain(term.term, 80)}**: {plain(term.definition, 600)}"
                     for term in terms)


def control_help(text: str, name: str) -> str:
    """A setting's help (``text``) and, after it, the terms its setting ``name`` uses."""
    terms = terms_used_in(f"setting:{name}")
    return f"{text}\n\n{definitions(terms)}" if terms else text


def figure_terms(key: str, caption: str) -> list:
    """The terms a figure uses: those the glossary lists for ``figure:KEY`` and those its
    caption names, in glossary order."""
    found = {term.term for term in terms_used_in(f"figure:{key}") + terms_in(caption)}
    return [term for name, term in GLOSSARY.items() if name in found]


def show_terms(container, key: str, caption: str) -> None:
    """A folded "Terms: …" line under a figure's caption; opened, each term's definition."""
    terms = figure_terms(key, caption)
    if terms:
        names = ", ".join(term.term for term in terms)
        container.expander(f"Terms: {names}", icon=":material/menu_book:").markdown(
            definitions(terms))


@functools.cache
def _whole_glossary() -> str:
    return definitions(GLOSSARY.values())


def show_glossary(container=st) -> None:
    """Every term of the glossary with its definition (written once per server: a class
    following a lesson asks for it at every poll)."""
    container.markdown(_whole_glossary())


def step_words(step) -> str:
    """What a step says before its run: its title, text, question and the number its
    choices are about."""
    return " ".join((step.title, step.text, step.question, step.expect.label))


def new_terms(lesson, number: int) -> list:
    """The glossary terms step ``number`` (from 1) of ``lesson`` uses that no earlier step
    used: where the step links each to its entry."""
    seen = set()
    for earlier in lesson.steps[:number - 1]:
        seen |= {term.term for term in terms_in(step_words(earlier))}
    return [term for term in terms_in(step_words(lesson.steps[number - 1]))
            if term.term not in seen]


def show_new_terms(container, lesson, number: int) -> None:
    """Under a step's text, the words it uses for the first time in the lesson, each with
    its plain-words glossary entry (folded: "New words: …")."""
    terms = new_terms(lesson, number)
    if terms:
        names = ", ".join(term.term for term in terms)
        container.expander(f"New words: {names}", icon=":material/menu_book:").markdown(
            definitions(terms))
