"""Controls made from data: a widget for each training setting from its row of the settings
table, a widget for an op's argument, each kept in step with the experiment and the URL."""

from __future__ import annotations

import functools

import streamlit as st

from ui import glossary, scripts, session, urls
from ui.library import SETTINGS
from ui.markdown import plain


def hidden(field: str) -> bool:
    """Whether the link hides the control for ``field`` (``hide=`` in the URL)."""
    return field in session.experiment().hide


def unpinned(fields) -> list[str]:
    """Those of ``fields`` whose controls the link shows (not hidden by ``hide=``)."""
    hide = session.experiment().hide
    return [field for field in fields if field not in hide]


def bound(widget, field: str, label: str, page: str, **kwargs):
    """A widget showing experiment ``field``; editing it updates the experiment and URL
    (and whatever follows it, `Experiment.changes_for`). Returns the field's value (also
    when the link hides the control).
    """
    if hidden(field):
        return getattr(session.experiment(), field)
    key = f"{page}_{field}"
    value = getattr(session.experiment(), field)
    if st.session_state.get(key) != value:
        st.session_state[key] = value

    def changed():
        before = session.experiment()
        urls.update(**before.changes_for(field, st.session_state[key]))
        scripts.note_automatic_changes(before, field)

    widget(label, key=key, on_change=changed, **kwargs)
    return getattr(session.experiment(), field)


def value_widget(container, type_: type, help: str, *, options=None, low=None, high=None,
                 step=None, placeholder: str = ""):
    """The widget for a value of ``type_`` and its keyword arguments (all but label, key and
    value): a select box of ``options``, a checkbox, a number box from ``low`` to ``high``
    (None: open) or a text box. A setting's row (`setting_control`) and an op's argument
    (the Build page's layer forms) both become widgets here.
    """
    if options is not None:
        return container.selectbox, {"options": list(options), "help": help}
    if type_ is bool:
        return container.checkbox, {"help": help}
    extra = {"placeholder": placeholder} if placeholder else {}
    if type_ not in (int, float):
        return container.text_input, {"help": help, **extra}
    number = {"min_value": None if low is None else type_(low),
              "max_value": None if high is None else type_(high),
              "step": None if step is None else type_(step), "help": help, **extra}
    if type_ is float:
        number["format"] = "%g"  # 0.001, not 0.00
    return container.number_input, number


def setting_widget(container, row):
    """The widget of a setting's control and its keyword arguments, from its row of the
    settings table: its options, its list hint, or its classroom range and step. Its help
    is the row's, with the glossary's terms that the setting uses."""
    help = glossary.control_help(row.help, row.name)
    if row.choices:
        return value_widget(container, str, help, options=row.options())
    if row.items:
        return value_widget(container, str, help, placeholder=row.empty_hint)
    low, high = row.classroom
    return value_widget(container, row.type, help, low=low, high=high, step=row.step,
                        placeholder=row.empty_hint)


def setting_control(container, name: str, page: str):
    """The control of training setting ``name``, made from its row of the settings table."""
    row = SETTINGS[name]
    widget, kwargs = setting_widget(container, row)
    return bound(widget, name, row.label, page, **kwargs)


def show_pinned(fields) -> None:
    """Show the values a classroom link pins (hides), so students still see them; a value
    that is empty (no lengths to evaluate) says nothing and is left out, and an optional
    setting that is off reads "none", as in the link."""
    note = pinned_note(session.experiment(), tuple(fields))
    if note:
        st.caption(note)


@functools.lru_cache(maxsize=64)
def pinned_note(experiment, fields: tuple[str, ...]) -> str:
    """`show_pinned`'s caption for ``experiment`` ("" when it pins none of ``fields``): the
    same for every student on one link, so made once for them all."""
    values = ", ".join(f"{f} = {'none' if value is None else value}"
                       for f in fields if f in experiment.hide
                       and (value := getattr(experiment, f)) != "")
    return f":material/lock: Set by the link: {plain(values)}" if values else ""
