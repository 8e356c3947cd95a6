"""A run followed live without rerunning the page's script: the Train page's status panel
while its run is queued or trains.

The design. A run's live view (its status line and progress, its training curves, its
pattern figure) is what every watcher of the run sees alike, so the server makes it once
and the browser draws it:

- the run's frame (`stacklab.serve.workers.job_frame`: made once per evaluation, at most
  one every half second, for laptops and phones apart) holds still pictures of the curves
  (SVG lines with axes and a legend, `stacklab.lab.figures.curves_picture`) and of the
  pattern figure (an SVG holding a PNG), each with its text alternative (its title and
  numbers). `pictures` writes them into markup once per frame and kind, every text
  escaped, and keeps the JSON of it, so N watchers cost N small answers, not N renders;
- the run's watch endpoint (``GET /_stacklab/watch/run/KEY?kind=laptop|phone``, `answer`,
  mounted by `ui.endpoints`) answers ``{"v", "every", "live", "text", "head", "frame"}``
  in a few hundred bytes: ``text`` is the status line (and the load note) as the page
  writes it (what an agent reads; the component's data has it too, for AppTest), ``head`` the same as markup with the progress bar, ``frame`` the number of the
  newest pictures. Only a page whose pictures are older asks for them
  (``GET .../run/KEY/pictures?kind=...``, `pictures_of`): markup compressed once per
  frame (about 4 KB for both pictures), the same bytes for every watcher;
- the component `show` draws (``stacklab.live_run``) puts the markup it was drawn with in
  the page, asks the endpoint every ``every`` s, replaces the status and, for a new frame,
  the pictures; and reruns its fragment once the run is no longer live (it ended, stopped,
  failed, or this server no longer holds it): the page then draws the finished run's
  interactive figures as before.

Between two evaluations a watching page thus runs no script at all; the server's answer
costs well under a millisecond of CPU (bench/request_costs.py). Where no endpoint answers
(``streamlit run app.py``, AppTest), the component reruns its fragment at the interval,
as ``run_every`` did, and the fragment draws the same view from the same frame.

Who wants values under the pointer switches on the interactive charts (`INTERACTIVE`):
the panel then reruns at the interval and shows the charts, as it did before this watch.
"""

from __future__ import annotations

import gzip
import itertools
import json
import threading
from html import escape

from stacklab import Status, figures
from ui import polls, session
from ui.follow import component, follow
from ui.lab import load_note
from ui.markdown import plain
from ui.watch import endpoint, watch

INTERACTIVE = "Interactive charts (values under the pointer)"
_KEPT = 64  # live runs' newest pictures kept (a run and kind each; an ended run's go at
# its first answer, the oldest first beyond this)

_CSS = """
.live-run { font-size: 16px; line-height: 1.45; }
.live-run .live-run-status { margin: 0 0 0.5rem 0; padding: 0.75rem 1rem; border-radius: 0.5rem;
  background: rgba(28, 131, 225, 0.1); color: rgb(0, 66, 128); }
.live-run .live-run-bar { height: 0.5rem; border-radius: 0.25rem; background: rgb(222, 224, 230); }
.live-run .live-run-bar > div { height: 100%; border-radius: 0.25rem; background: rgb(255, 75, 75); }
.live-run .live-run-steps, .live-run .live-run-note { margin: 0.25rem 0 0.75rem 0; font-size: 14px;
  color: rgb(49, 51, 63); }
.live-run .live-run-figures { display: flex; flex-wrap: wrap; gap: 1rem; }
.live-run figure { flex: 1 1 300px; min-width: 0; margin: 0; }
.live-run figcaption { font-size: 14px; margin-top: 0.25rem; color: rgb(49, 51, 63); }
"""

# each answer of the run's endpoint: the status at once, the pictures of a new frame, and a
# rerun of the fragment once the run is no longer live (the page then draws it in full)
_LIVE_JS = """(data, parentElement, rerun) => {
  const root = parentElement.querySelector(".live-run");
  let have = data.frame;
  root.innerHTML = data.html;  // what the fragment drew: shown at once
  return { answered: async (answer) => {
    if (!answer.live) { rerun(answer.v); return false; }  // ended: the page draws it in full
    root.querySelector(".live-run-head").innerHTML = answer.head;
    if (answer.frame !== have) {  // a new frame: its pictures, made once for everyone
      try {
        const response = await fetch(data.pictures, { cache: "no-store" });
        if (response.ok) {
          root.querySelector(".live-run-figures").innerHTML = await response.text();
          have = Number(response.headers.get("X-Stacklab-Frame"));
        }
      } catch (error) { /* asked again at the next answer */ }
    }
    return true;
  } };
}"""

_component = component(
    "stacklab.live_run", _LIVE_JS, "<div class='live-run'></div>", css=_CSS,
    isolate_styles=False)  # the page's own fonts and sizes; its checks (axe, phones) see it
_figures: dict[tuple[str, bool], tuple] = {}  # (key, phone) -> frame, number, markup, its JSON
_lock = threading.Lock()
_numbers = itertools.count(1)  # each frame's markup a number, for ``have``


def last_step(view) -> int:
    """The step of the run's newest evaluation (0 before its first)."""
    return view.history[-1]["step"] if view.history else 0


def step_caption(pattern, step: int, *, caption: bool = False, html: bool = False) -> str:
    """The one caption of a run's pattern figure as it forms: "**title** at step N — score"
    (and ``: caption`` with ``caption``), as Markdown with the texts made plain, or with
    ``html`` as markup with the texts escaped."""
    if html:
        score = f" — {escape(pattern.score)}" if pattern.score else ""
        words = f": {escape(pattern.caption)}" if caption else ""
        return f"<strong>{escape(pattern.title)}</strong> at step {step}{score}{words}"
    score = f" — {plain(pattern.score, 300)}" if pattern.score else ""
    words = f": {plain(pattern.caption, 1000)}" if caption else ""
    return f"**{plain(pattern.title, 200)}** at step {step}{score}{words}"


def status_text(view, running: int) -> str:
    """The live run's status line as the page writes it (Markdown; an agent reads it)."""
    others = view.watchers - 1
    shared = f" — shared with {others} other session{'s' * (others != 1)}" if others > 0 else ""
    if view.status == Status.QUEUED:
        return (f"Status: **queued** — position {view.position} in the queue "
                f"({running} runs in progress){shared}")
    return f"Status: **running** — step {view.step} of {view.steps}{shared}"


def words(view, running: int, note: str | None) -> str:
    """What the live view says, as Markdown (what an agent or AppTest reads of it): the
    status line, and the load note when the server widened the interval."""
    return status_text(view, running) + (f"\n\n{note}" if note else "")


def head_html(view, running: int, note: str | None) -> str:
    """The status line, the progress bar and the load note, as markup (texts escaped)."""
    line = escape(status_text(view, running)).replace("**", "<strong>", 1).replace(
        "**", "</strong>", 1)
    percent = round(100 * view.progress)
    return (f"<p class='live-run-status'>{line}</p><div class='live-run-bar' role='progressbar' "
            f"aria-label='Training progress' aria-valuemin='0' aria-valuemax='100' "
            f"aria-valuenow='{percent}'><div style='width: {percent}%'></div></div>"
            f"<p class='live-run-steps'>{view.step} / {view.steps} steps</p>"
            + (f"<p class='live-run-note'>{escape(note)}</p>" if note else ""))


def figures_html(frame, view) -> str:
    """The frame's pictures as markup: the curves, and the pattern figure with its words."""
    parts = []
    if frame.curves_still and frame.curves is not None:
        parts.append(f"<figure class='live-run-curves'>"
                     f"{figures.svg_img(frame.curves_still, frame.curves.alt or '')}</figure>")
    prepared, pattern = frame.pattern_figure, frame.pattern
    if prepared is not None and prepared.still and pattern is not None:
        parts.append(f"<figure class='live-run-pattern'>{figures.svg_img(prepared.still, prepared.alt or '')}"
                     f"<figcaption>{step_caption(pattern, last_step(view), caption=True, html=True)}"
                     "</figcaption></figure>")
    return "".join(parts)


def frame_of(job, view, phone: bool):
    """The run's frame for a phone or a laptop's two columns (`Job.frame`), or None."""
    if not view.history:
        return None
    return job.frame(view, figures.PHONE_WIDTH if phone else figures.column_width(2), phone=phone)


def pictures(job, view, phone: bool) -> tuple[int, str, bytes]:
    """The number of the newest frame's markup, that markup, and its gzip: written and
    compressed once per frame and kind, whoever asks."""
    frame = frame_of(job, view, phone)
    if frame is None:
        return 0, "", b""
    with _lock:
        kept = _figures.get((job.key, phone))
        if kept is not None and kept[0] is frame:
            return kept[1:]
    markup = figures_html(frame, view)
    made = (frame, next(_numbers), markup, gzip.compress(markup.encode(), compresslevel=6))
    with _lock:
        _figures[job.key, phone] = made
        while len(_figures) > _KEPT:
            _figures.pop(next(iter(_figures)))
    return made[1:]


def run_version(view) -> str:
    """What changes when a run moves on (its status, a step reported, an evaluation, its
    place in the queue): the version its watch endpoint answers with."""
    version = f"{view.status.value}:{view.step}:{len(view.history)}"
    return f"{version}:{view.position}" if view.status == Status.QUEUED else version


def follow_run(job, key: str) -> None:
    """In a fragment that shows ``job`` while it is live: rerun the fragment when the run
    moves on (its endpoint's version is no longer the one drawn now), asked at the run's
    interval (`ui.polls.every`); nothing once the run has ended."""
    view = job.view()  # as the endpoint sees it (an owner's view may say stopped)
    every = polls.every("run", view)
    if every is not None:
        watch(endpoint("run", job.key), run_version(view), every, key=key)


def sessions_on(key: str, view=None) -> int:
    """How many sessions are on the run ``key`` now (``view``: the run as seen, or None when
    this server does not hold it): those watching it train, or once it has ended, those of
    this app server whose current run it is."""
    return view.watchers if view is not None and view.active else session.pool().viewers(key)


def sessions_answer(key: str) -> bytes:
    """The share panel's endpoint's answer: the number of sessions on run ``key`` as its
    version, asked at the share panel's pace (`ui.polls.every`)."""
    job = session.pool().watched(key)
    count = sessions_on(key, job.view() if job is not None else None)
    return json.dumps({"v": str(count), "every": polls.every("share")}).encode()


def answer(key: str, phone: bool) -> bytes:
    """The run endpoint's answer about run ``key`` (see the module docstring), JSON."""
    pool = session.pool()
    job = pool.watched(key)
    if job is None:
        return json.dumps({"v": "unknown", "every": polls.RUN_SECONDS, "live": False}).encode()
    view = job.view()
    version = run_version(view)
    base = polls.base_seconds("run", view)
    if base is None:
        with _lock:  # its pictures are no longer asked for
            _figures.pop((key, False), None), _figures.pop((key, True), None)
        return json.dumps({"v": version, "every": polls.RUN_SECONDS, "live": False}).encode()
    every = polls.every("run", view)
    running = pool.stats()["running"] if view.status == Status.QUEUED else 0
    note = load_note(base, every, polls.load().followers())
    number = pictures(job, view, phone)[0]
    return json.dumps({"v": version, "every": every, "live": True,
                       "text": words(view, running, note),
                       "head": head_html(view, running, note), "frame": number}).encode()


def pictures_of(key: str, phone: bool) -> tuple[int, str, bytes] | None:
    """The newest pictures of the live run ``key`` (`pictures`), or None."""
    job = session.pool().watched(key)
    if job is None:
        return None
    view = job.view()
    return pictures(job, view, phone) if view.active else None


def show(job, view, phone: bool, every: float) -> None:
    """In the status panel's fragment: the live view of ``job`` (``view``: as this page
    sees it now), kept up to date in the browser from the run's watch endpoint; the
    fragment reruns when the run is no longer live (or, with no endpoint, at ``every``)."""
    pool = session.pool()
    running = pool.stats()["running"] if view.status == Status.QUEUED else 0
    base = polls.base_seconds("run", view) or every
    note = load_note(base, every, polls.load().followers())
    number, markup, _ = pictures(job, view, phone)
    html = (f"<div class='live-run-head'>{head_html(view, running, note)}</div>"
            f"<div class='live-run-figures'>{markup}</div>")
    kind = f"?kind={'phone' if phone else 'laptop'}"
    follow(endpoint("run", job.key) + kind, every, "train_live", drawing=_component,
           pictures=endpoint("run", job.key, "pictures") + kind, frame=number, html=html,
           text=words(view, running, note))
