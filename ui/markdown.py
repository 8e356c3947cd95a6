"""Safe Markdown: text from a user (a stack, a link, an error that quotes them) shown as
exactly those characters, and a `StackError` on the page.

>>> plain("seq_len='[L](https://e.com)' is not a whole number")
"` seq_len='[L](https://e.com)' ` is not a whole number"
"""

from __future__ import annotations

import re

import streamlit as st

# A word of user text that Markdown, GitHub's autolinks and Streamlit's extras (:color[...],
# :icon:, :material/...:, $math$) leave as it is: letters, digits, quotes, brackets and
# sentence punctuation, an underscore only inside a word (seq_len), a colon only at its
# end, and no "www." (an autolink even with its dot escaped). Any other word is shown in
# a code span, where nothing is interpreted.
_INERT_WORD = re.compile(r"""(?:[A-Za-z0-9'"(),;=/?!+.%-]|[^\x00-\x7f]"""
                         r"|(?<=[A-Za-z0-9])_(?=[A-Za-z0-9]))+:?")
_LINE_START = re.compile(r"""[A-Za-z0-9'"(]|[^\x00-\x7f]""")  # not a list, quote or heading
_LIST_NUMBER = re.compile(r"\d+[.)]")


def _inert(word: str, first: bool) -> bool:
    return bool(_INERT_WORD.fullmatch(word)) and "www." not in word.lower() and not (
        first and (not _LINE_START.match(word) or _LIST_NUMBER.fullmatch(word)))


def _code_span(text: str) -> str:
    """``text`` as a Markdown code span: a fence longer than any run of backticks in it.
    Streamlit rewrites every ``:material/`` of a page's Markdown, code spans too, before it
    parses it; that colon is written as ``&#58;`` between two spans, so it stays as typed."""
    fence = "`" * (max(map(len, re.findall("`+", text)), default=0) + 1)
    first, *rest = text.split(":material/")
    return "&#58;".join(f"{fence} {part} {fence}" if part else ""
                        for part in [first, *("material/" + part for part in rest)])


def plain(text: object, limit: int = 400) -> str:
    """``text`` from a user (a stack, a link, an error that quotes them) as Markdown that
    shows exactly those characters: one line, at most ``limit`` characters, no link, image,
    heading, list, formatting, colour, icon, emoji or formula. Plain words stay as they are;
    runs of words Markdown could read go into code spans, which Markdown never interprets.

    >>> plain("task='[L](https://e.com/l)' is not one of reverse, shift")
    "` task='[L](https://e.com/l)' ` is not one of reverse, shift"
    >>> plain("x`` $x$ :smile: www.e.com seq_len\\n# H :material/home:")
    '``` x`` $x$ :smile: www.e.com ``` seq_len ` # ` H &#58;` material/home: `'
    """
    text = " ".join(str(text).split())  # one line: newlines and runs of spaces folded
    if len(text) > limit:
        text = text[:limit] + "…"
    shown, held = [], []  # held: the words of the code span being gathered
    for index, word in enumerate(text.split(" ") if text else []):
        if _inert(word, first=index == 0):
            shown += [_code_span(" ".join(held))] if held else []
            shown.append(word)
            held = []
        else:
            held.append(word)
    return " ".join(shown + ([_code_span(" ".join(held))] if held else []))


def show_error(err, prefix: str = "") -> None:
    """A `StackError` on the page: code, place, message and fix, user text escaped."""
    st.error(f"{prefix}**{err.code}** at {plain(err.place)}: {plain(err.message)}\n\n"
             f"**Fix:** {plain(err.hint)}")
