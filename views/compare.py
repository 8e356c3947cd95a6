"""Compare: up to four runs side by side, their settings and scores in one table and the
same figures aligned (the session's runs, or stored runs by key; compare=K1,K2 in a link)."""

import streamlit as st

from ui import figures, present, scripts, session, urls
from ui.library import (MAX_COMPARED, TABLE_NOTE, aligned_rows, column_help, compared, encoding,
                    parse_compare, replaced, table_rows)
from ui.markdown import plain

state = session.PageState("compare", "pick", "keys", "problem", "drawn")
urls.start()
presenting = session.presenting()  # view=present: the runs side by side, one figure at a time
if presenting:
    present.begin("compare")
else:
    st.title("Compare")
scripts.show_url_problems()
owner = session.owner()

mine = {job.key: job.run for job in session.pool().jobs_of(owner) if job.run is not None}
kept = session.latest_run()
if kept is not None and kept.run is not None:
    mine.setdefault(kept.key, kept.run)


def label(key: str, run) -> str:
    return (f"{run.task.name} · {encoding(run.network)} · seed {run.config.seed} · "
            f"T {run.config.seq_len} · {key[:8]}")


chosen = session.compared()
options = list(dict.fromkeys([*mine, *chosen]))
stored = {key: mine.get(key) or session.stored_run(key) for key in options}
if state.get("pick") != chosen:
    state["pick"] = chosen  # the list shows what is compared, however added


def picked():
    session.set_compared(state["pick"])


def added():
    """Keys typed in (whole, or a unique start of at least 8 characters) join the compared."""
    keys, problem = parse_compare(state["keys"])  # as a compare= link reads them
    problems = [problem] if problem else []
    keys = urls.compared_keys(keys, problems)  # each start of a key resolved to its run
    if problems:
        state["problem"] = "; ".join(problems)
    session.set_compared(list(dict.fromkeys([*session.compared(), *keys]))[:MAX_COMPARED])
    state["keys"] = ""


def choosers() -> None:
    """The runs to compare: picked from the session's, or added by key."""
    st.multiselect(
        f"Runs to compare (at most {MAX_COMPARED}): this session's, or any stored run by key",
        options, key=state.key("pick"), max_selections=MAX_COMPARED, on_change=picked,
        format_func=lambda key: label(key, stored[key]) if stored.get(key) is not None
        else f"{key[:8]} (not stored on this server)")
    st.text_input("Add runs by key (comma-separated; a run=KEY of a link, a key from "
                  "`stacklab sweep`'s results.csv, or its first 8 or more characters)",
                  key=state.key("keys"), on_change=added)


if not presenting:
    choosers()
if "problem" in state:
    st.warning(plain(state.pop("problem"), 300))
urls.sync_url()

entries = []
for key in session.compared():
    run = stored.get(key) or session.stored_run(key)
    if run is None:
        st.warning(f"Run {plain(key, 40)} is not stored on this server (never "
                   "trained here, still training, or evicted from its store).")
    else:
        entries.append((label(key, run), run))
if not entries:
    st.info("Pick runs above: train a few on the Train page (say the same task with "
            "pos_embed, and with attention(..., position=\"rope\") or \"alibi\"), then "
            "compare them here. A link with compare=KEY1,KEY2 opens a comparison.")
    st.stop()

# figures as their workers drew them, and all runs' at once from their metrics: no tensor read
together, rows_of_figures = state.cached(
    "drawn", tuple(run.key for _, run in entries),
    lambda: (compared(entries), aligned_rows(entries)))


def present_runs() -> None:
    """Present mode: one figure at a time, every run's version side by side, full width."""
    slides = [("together", figure) for figure in together if not figure.skipped] + [
        ("row", row) for row in rows_of_figures if row.key not in replaced(together)]
    index = present.slide_bar([item.title for _, item in slides])
    if not slides:
        st.info("These runs have no figures in common.")
        return
    kind, item = slides[index]
    with st.container(key="present"):
        if kind == "together":
            st.markdown(plain(item.caption, 600))
            present.figure_at_full_width(st, item.figure, f"present_all_{index}", columns=2)
            return
        for column, (run_label, _), version, reason in zip(
                st.columns(len(entries)), entries, item.versions, item.reasons):
            column.markdown(f"**{plain(run_label, 120)}**")
            if version is None or version.skipped:
                column.caption(f"Not drawn for this run: "
                               f"{plain(reason or version.caption, 300)}")
                continue
            if version.score:
                column.markdown(f"## {plain(version.score, 200)}")
            present.figure_at_full_width(column, version.figure,
                                         f"present_{item.key}_{column_key(run_label)}",
                                         columns=max(len(entries), 2), score=version.score)


def column_key(run_label: str) -> str:
    return run_label.rsplit("· ", 1)[-1]


if presenting:
    present_runs()
    st.stop()

rows = table_rows(entries)  # the run, then what differs between the runs, then the rest
st.dataframe(rows, hide_index=True, column_config={
    name: st.column_config.TextColumn(name, help=meaning or None, pinned=name == "run")
    for name, meaning in column_help(rows).items()})
st.caption(TABLE_NOTE)
for run_label, run in entries:  # drawn once opened, as on Train (the syntax highlighter's cost)
    stack_panel = st.expander(f"{plain(run_label, 120)}: the stack",
                              key=f"compare_stack_{run.key}", on_change="rerun")
    if stack_panel.open:
        stack_panel.code(run.network.source, language=None)

for index, figure in enumerate(together):
    st.subheader(plain(figure.title, 200))
    st.caption(plain(figure.caption, 1000))
    if not figure.skipped:
        figures.chart(st, figure.figure, f"compare_all_{index}")
for row in rows_of_figures:
    if row.key in replaced(together):
        continue  # shown above, every run on one plot
    st.subheader(plain(row.title, 200))
    for index, (column, (run_label, _), version, reason) in enumerate(
            zip(st.columns(len(entries)), entries, row.versions, row.reasons)):
        column.markdown(f"**{plain(run_label, 120)}**")
        if version is None or version.skipped:
            why = reason or version.caption.removeprefix("Skipped: ")
            column.caption(f"Not drawn for this run: {plain(why, 300)}")
            continue
        if version.score:
            column.markdown(plain(version.score, 300))
        figures.chart(column, version.figure, f"compare_{row.key}_{index}", len(entries),
                      version.score)
