"""Compare: up to four runs side by side, their settings and scores in one table and the
same figures aligned (the session's runs, or stored runs by key; compare=K1,K2 in a link)."""

import streamlit as st

import app_state
from stacklab.lab.reports.compare import (MAX_COMPARED, TABLE_NOTE, aligned_rows, column_help, compared,
                                  encoding, replaced, table_rows)
from stacklab.lab.figures import column_width, fit_title

app_state.start()
st.title("Compare")
app_state.show_url_problems()
pool = app_state.pool()
owner = app_state.owner()

mine = {job.key: job.run for job in pool.jobs_of(owner) if job.run is not None}
kept = app_state.latest_run()
if kept is not None and kept.run is not None:
    mine.setdefault(kept.key, kept.run)


def label(key: str, run) -> str:
    return (f"{run.task.name} · {encoding(run.network)} · seed {run.config.seed} · "
            f"T {run.config.seq_len} · {key[:8]}")


chosen = list(st.session_state.get(app_state.COMPARE, []))
options = list(dict.fromkeys([*mine, *chosen]))
stored = {key: mine.get(key) or pool.store.open(key) for key in options}
if st.session_state.get("compare_pick") != chosen:
    st.session_state["compare_pick"] = chosen  # the list shows what is compared, however added


def picked():
    st.session_state[app_state.COMPARE] = list(st.session_state["compare_pick"])


def added():
    """Keys typed in (whole, or a unique start of at least 8 characters) join the compared."""
    raw = st.session_state["compare_keys"]
    parts = [part.strip() for part in raw.split(",") if part.strip()]
    found = [pool.store.find(part) or part for part in parts]
    keys, problem = app_state.compare_keys(",".join(found))
    if problem:
        st.session_state["compare_problem"] = problem
    current = st.session_state.get(app_state.COMPARE, [])
    st.session_state[app_state.COMPARE] = list(dict.fromkeys([*current, *keys]))[:MAX_COMPARED]
    st.session_state["compare_keys"] = ""


st.multiselect(
    f"Runs to compare (at most {MAX_COMPARED}): this session's, or any stored run by key",
    options, key="compare_pick", max_selections=MAX_COMPARED, on_change=picked,
    format_func=lambda key: label(key, stored[key]) if stored.get(key) is not None
    else f"{key[:8]} (not stored on this server)")
st.text_input("Add runs by key (comma-separated; a run=KEY of a link, a key from "
              "`stacklab sweep`'s results.csv, or its first 8 or more characters)",
              key="compare_keys", on_change=added)
if "compare_problem" in st.session_state:
    st.warning(app_state.plain(st.session_state.pop("compare_problem"), 300))
app_state.sync_url()

entries = []
for key in st.session_state.get(app_state.COMPARE, []):
    run = stored.get(key) or pool.store.open(key)
    if run is None:
        st.warning(f"Run {app_state.plain(key, 40)} is not stored on this server (never "
                   "trained here, still training, or evicted from its store).")
    else:
        entries.append((label(key, run), run))
if not entries:
    st.info("Pick runs above: train a few on the Train page (say the same task with "
            "pos_embed, and with attention(..., position=\"rope\") or \"alibi\"), then "
            "compare them here. A link with compare=KEY1,KEY2 opens a comparison.")
    st.stop()

rows = table_rows(entries)  # the run, then what differs between the runs, then the rest
st.dataframe(rows, hide_index=True, column_config={
    name: st.column_config.TextColumn(name, help=meaning or None, pinned=name == "run")
    for name, meaning in column_help(rows).items()})
st.caption(TABLE_NOTE)
for run_label, run in entries:  # drawn once opened, as on Train (the syntax highlighter's cost)
    stack_panel = st.expander(f"{app_state.plain(run_label, 120)}: the stack",
                              key=f"compare_stack_{run.key}", on_change="rerun")
    if stack_panel.open:
        stack_panel.code(run.network.source, language=None)

cache = st.session_state.get("compare_drawn")
wanted = tuple(run.key for _, run in entries)
if cache is None or cache[0] != wanted:
    # figures as their workers drew them, and all runs' at once from their metrics: no tensor read
    cache = (wanted, compared(entries), aligned_rows(entries))
    st.session_state["compare_drawn"] = cache
_, together, rows_of_figures = cache
for index, figure in enumerate(together):
    st.subheader(app_state.plain(figure.title, 200))
    st.caption(app_state.plain(figure.caption, 1000))
    if not figure.skipped:
        st.plotly_chart(fit_title(figure.figure, column_width(1)), key=f"compare_all_{index}")
width = column_width(len(entries))
for row in rows_of_figures:
    if row.key in replaced(together):
        continue  # shown above, every run on one plot
    st.subheader(app_state.plain(row.title, 200))
    for index, (column, (run_label, _), version, reason) in enumerate(
            zip(st.columns(len(entries)), entries, row.versions, row.reasons)):
        column.markdown(f"**{app_state.plain(run_label, 120)}**")
        if version is None or version.skipped:
            why = reason or version.caption.removeprefix("Skipped: ")
            column.caption(f"Not drawn for this run: {app_state.plain(why, 300)}")
            continue
        if version.score:
            column.markdown(app_state.plain(version.score, 300))
        column.plotly_chart(fit_title(version.figure, width), key=f"compare_{row.key}_{index}")
