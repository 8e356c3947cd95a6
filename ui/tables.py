"""The app's side of a table analysed in the worker pool (Explore's real-model section):
the models a page may offer (the server's Hugging Face cache and the one folder an operator
allows, ``STACKLAB_MODELS_DIR``; nothing else on the server's disk), the request for the
one picked, the progress while a worker analyses it (followed through its watch endpoint,
`ui.follow`: the page reruns when the worker reaches a stage, not on a timer), and the
downloads of its result and of a run."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import streamlit as st

from stacklab import StackError
from ui import polls, session
from ui.follow import component, follow
from ui.library import (MODELS_DIR_ENV, TableView, cached_models, file_name, model_request,
                    model_under, models_under, table_report_html)
from ui.markdown import plain, show_error
from ui.watch import endpoint

CACHE, FOLDER = "Hugging Face cache", "models folder"  # where a server's model is

# the seconds an analysis has taken, counted up in the browser (one timer a page, kept on
# its element); the fragment reruns once the job's version (its status, the worker's stage)
# is no longer the one it was drawn at
_WAITING_JS = """(data, root, rerun) => {
  const shown = root.querySelector(".table-seconds");
  const started = Date.now() - data.seconds * 1000;
  const tick = () => { shown.textContent = `${Math.round((Date.now() - started) / 1000)} s so far`; };
  clearInterval(root.__tick);
  tick();
  root.__tick = setInterval(() => (root.isConnected ? tick() : clearInterval(root.__tick)), 1000);
  return { answered: (answer) => {
    if (answer.v !== data.version) { clearInterval(root.__tick); rerun(answer.v); return false; }
    return true;
  } };
}"""
_waiting = component("stacklab.table_wait", _WAITING_JS, "<p class='table-seconds'></p>",
                     css=".table-seconds { margin: 0; font-size: 14px; color: rgb(49, 51, 63); }",
                     isolate_styles=False)


def models_dir() -> Path | None:
    """The folder of models the operator allows pages to read, or None."""
    folder = os.environ.get(MODELS_DIR_ENV)
    return Path(folder) if folder else None


@st.cache_data(ttl=60, show_spinner=False)
def server_models(folder: str | None) -> list[tuple[str, str]]:
    """``(where, name)`` of every model a page may pick: the Hugging Face cache's (offline)
    and those under ``folder``; read again after a minute (a model copied in shows up)."""
    return ([(CACHE, name) for name in cached_models()]
            + [(FOLDER, name) for name in (models_under(folder) if folder else [])])


def request_of(where: str, name: str, key: str | None):
    """The analysis request for model ``name`` of ``where``: refused (`StackError`) unless it
    is one the page lists; a folder's name is checked to lie in the folder (`model_under`)."""
    folder = models_dir()
    if where == FOLDER and folder is not None:
        return model_request(model_under(folder, name), key)
    if where == CACHE and name in cached_models():
        return model_request(name, key, cached=True)
    raise StackError("E_VALUE", f"{name[:120]} is not a model this server offers",
                     hint="pick one of the models the page lists")


def hide_root(text: str | None) -> str:
    """``text`` with the models folder's path on the server shown as its variable's name."""
    folder = models_dir()
    text = text or ""
    return text.replace(str(folder), f"${MODELS_DIR_ENV}") if folder else text


def wait_for(job) -> TableView:
    """The job's view; while a worker analyses it, a progress bar with its stage and the
    seconds so far, redrawn when the worker reaches a stage (its watch endpoint's version)
    until it ends (then the whole page runs again)."""
    view = job.view()
    if not view.active:
        return view

    @st.fragment
    def progress():
        now = job.view()
        if not now.active:
            st.rerun()
        words = "waiting for a free worker" if now.stage.startswith("waiting") else now.stage
        st.progress(now.done, text=f"{plain(words, 200)}…")
        follow(endpoint("table", job.id), polls.every("table"), "table_follow",
               version=now.version, drawing=_waiting, seconds=round(now.seconds, 1))

    progress()
    return view


def file_stem(name: str) -> str:
    """``name`` as the start of a file name: letters, digits, ``.``, ``-``, ``_`` only."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._")[:80] or "table"


def table_downloads(result, key: str) -> None:
    """The result's ``NAME-scores.json`` and ``NAME-report.html``, named after the table."""
    stem = file_stem(result.name)
    scores = {"table": result.name, **({"read": hide_root(result.read)} if result.read else {}),
              **result.scores}
    left, right = st.columns(2)
    left.download_button(f"{stem}-scores.json", json.dumps(scores, indent=2) + "\n",
                         file_name=f"{stem}-scores.json", mime="application/json",
                         key=f"{key}_scores", icon=":material/download:")
    right.download_button(
        f"{stem}-report.html", lambda: table_report_html(result.name, scores, result.figures,
                                                          plotly_stills=False),
        file_name=f"{stem}-report.html", mime="text/html", key=f"{key}_report",
        icon=":material/download:")


def run_downloads(run, report, name: str) -> None:
    """A stored run's files, named after the run (``name``: `run_name`; ``report()`` makes
    its report.html when clicked), or, for a damaged run, why it is damaged in place of
    buttons that would do nothing."""
    damage = run.damage() if hasattr(run, "damage") else None
    if damage is not None:
        show_error(damage, "This run's files cannot be offered: ")
        return
    st.markdown(f"**Download run** `{name}`:")
    download = st.columns(3)
    # Each file is made only when its button is clicked (deferred data).
    download[0].download_button("model.safetensors", run.checkpoint_bytes,
                                file_name=file_name(name, "model.safetensors"),
                                key="explore_model", icon=":material/download:")
    download[1].download_button("metrics.json", run.metrics_text,
                                file_name=file_name(name, "metrics.json"),
                                mime="application/json",
                                key="explore_metrics", icon=":material/download:")
    download[2].download_button("figures (report.html)", report,
                                file_name=file_name(name, "report.html"),
                                mime="text/html", key="explore_report",
                                icon=":material/download:")


def nothing_below(shown: bool) -> None:
    """After a table's results (or its progress): stop the page when it has no run to show
    under them (the "No finished run yet" of a session that never trained would read as
    about the table)."""
    if shown and session.latest_run() is None and not any(
            job.view(session.owner()).active for job in session.pool().jobs_of(session.owner())):
        st.stop()
