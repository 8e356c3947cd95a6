"""A run followed live without rerunning the page's script: the Train page's status panel
while its run is queued or trains.

The design. A run's live view (its status line and progress, its training curves, its
pattern figure) is what every watcher of the run sees alike, so the server makes it once
and the browser draws it:

- the run's frame (`stacklab.serve.workers.job_frame`: made once per evaluation, at most
  one every half second, for laptops and phones apart) holds still pictures of the curves
  (SVG lines with axes and a legend, `stacklab.lab.figures.curves_picture`) and of the
  pattern figure (an SVG holding a PNG), each with its text alternative (its title and
  numbers). The hub's `ui.pictures.Pictures` writes them into markup once per frame
  and kind, every text escaped, and keeps it and its gzip, so N watchers cost N small
  answers, not N renders;
- the run's watch endpoint (``GET /_stacklab/watch/run/KEY?kind=laptop|phone``,
  `ui.live_answers.answer`, mounted by `ui.endpoints`) answers ``{"v", "every", "live", "text", "head", "frame"}``
  in a few hundred bytes: ``text`` is the status line (and the load note) as the page
  writes it (what an agent reads; the component's data has it too, for AppTest), ``head`` the same as markup with the progress bar, ``frame`` the number of the
  newest pictures. Only a page whose pictures are older asks for them
  (``GET .../run/KEY/pictures?kind=...``, `ui.live_answers.pictures_of`): markup compressed once per
  frame (about 4 KB for both pictures), the same bytes for every watcher;
- the component `show` draws (``stacklab.live_run``) puts the markup it was drawn with in
  the page, asks the endpoint every ``every`` s, replaces the status and, for a new frame,
  the pictures; and reruns its fragment once the run is no longer live (it ended, stopped,
  failed, or this server no longer holds it): the page then draws the finished run's
  interactive figures as before.

The server's side of it (the answers, the pictures, the markup) is `ui.live_answers`, with
no Streamlit in it; this module is the page's side: the component and its caption.

Between two evaluations a watching page thus runs no script at all; the server's answer
costs well under a millisecond of CPU (bench/request_costs.py). Where no endpoint answers
(``streamlit run app.py``, AppTest), the component reruns its fragment at the interval,
as ``run_every`` did, and the fragment draws the same view from the same frame.

Who wants values under the pointer switches on the interactive charts (`INTERACTIVE`):
the panel then reruns at the interval and shows the charts, as it did before this watch.
"""

from __future__ import annotations

from ui import live_answers, polls
from ui.follow import component, follow
from ui.hub import Hub
from ui.live_answers import head_html, run_version, status_text, words
from ui.pictures import caption_html, last_step
from ui.markdown import plain
from ui.watch import endpoint, watch

__all__ = ["INTERACTIVE", "follow_run", "last_step", "sessions_on", "show", "status_text",
           "step_caption", "words"]

INTERACTIVE = "Interactive charts (values under the pointer)"

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


def step_caption(pattern, step: int, *, caption: bool = False, html: bool = False) -> str:
    """The one caption of a run's pattern figure as it forms: "**title** at step N — score"
    (and ``: caption`` with ``caption``), as Markdown with the texts made plain, or with
    ``html`` as markup with the texts escaped."""
    if html:
        return caption_html(pattern, step, caption=caption)
    score = f" — {plain(pattern.score, 300)}" if pattern.score else ""
    said = f": {plain(pattern.caption, 1000)}" if caption else ""
    return f"**{plain(pattern.title, 200)}** at step {step}{score}{said}"


def follow_run(job, key: str) -> None:
    """In a fragment that shows ``job`` while it is live: rerun the fragment when the run
    moves on (its endpoint's version is no longer the one drawn now), asked at the run's
    interval (`ui.polls.every`); nothing once the run has ended."""
    view = job.view()  # as the endpoint sees it (an owner's view may say stopped)
    every = polls.every("run", view)
    if every is not None:
        watch(endpoint("run", job.key), run_version(view), every, key=key)


def sessions_on(key: str, view=None) -> int:
    """How many sessions are on the run ``key`` now (`ui.live_answers.sessions_on`)."""
    return live_answers.sessions_on(Hub.current(), key, view)


def show(job, view, phone: bool, every: float) -> None:
    """In the status panel's fragment: the live view of ``job`` (``view``: as this page
    sees it now), kept up to date in the browser from the run's watch endpoint; the
    fragment reruns when the run is no longer live (or, with no endpoint, at ``every``)."""
    hub = Hub.current()
    running = live_answers.running_now(hub, view)
    base = polls.base_seconds("run", view) or every
    note = live_answers.note_of(hub, base, every)
    number, markup, _ = hub.pictures.of(job, view, phone)
    html = (f"<div class='live-run-head'>{head_html(view, running, note)}</div>"
            f"<div class='live-run-figures'>{markup}</div>")
    kind = f"?kind={'phone' if phone else 'laptop'}"
    follow(endpoint("run", job.key) + kind, every, "train_live", drawing=_component,
           pictures=endpoint("run", job.key, "pictures") + kind, frame=number, html=html,
           text=words(view, running, note))
