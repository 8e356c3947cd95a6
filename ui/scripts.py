"""What the page says or does on its own, once: the link's refused values, what an edit
changed besides itself, a run that no longer matches the experiment, and the injected
JavaScript that scrolls a finished run's heatmap into view."""

from __future__ import annotations

import json

import streamlit as st

from ui import session
from ui.library import (announcement, available_devices, changed_since, preset_announcement,
                    stale_note)
from ui.markdown import plain

SCROLL_TO = "scroll_to"  # a CSS selector the next full run of the page scrolls into view
AUTOMATIC_CHANGES = "automatic_changes"  # what the last edit changed besides itself

_SCROLL_SCRIPT = """<script>
(() => {
  // once the figure is drawn (a busy browser draws it late), and only if below the fold
  const until = Date.now() + 10000;
  const scroll = () => {
    const target = document.querySelector(%s);
    const drawn = target && target.querySelector(".js-plotly-plot .main-svg, img");
    if (!(drawn && (drawn.tagName !== "IMG" || drawn.complete))) {
      if (Date.now() < until) setTimeout(scroll, 150);
      return;
    }
    const shown = drawn.tagName === "IMG" ? drawn : target;  // a picture in markdown overhangs
    if (shown.getBoundingClientRect().bottom > window.innerHeight) {
      shown.scrollIntoView({behavior: "smooth", block: "end"});
    }
  };
  setTimeout(scroll, 150);
})();
</script>"""


_HEADING_SCRIPT = """<script>
(() => {
  // after the page's rerun has laid it out: a heading out of view comes to the top
  const until = Date.now() + 4000;
  const scroll = () => {
    const target = document.querySelector(%s);
    if (!target) { if (Date.now() < until) setTimeout(scroll, 150); return; }
    const top = target.getBoundingClientRect().top;
    if (top < 0 || top > window.innerHeight / 2) target.scrollIntoView({block: "start"});
  };
  setTimeout(scroll, 300);
})();
</script>"""


def heading_into_view(selector: str) -> None:
    """Bring the heading at ``selector`` (the page's own, never user text) to the top of
    the screen when it is out of view, once (a follower's page that moved with its teacher:
    a phone scrolled down the last step would stay there)."""
    st.html(_HEADING_SCRIPT % json.dumps(selector), unsafe_allow_javascript=True)


def scroll_later(selector: str) -> None:
    """Ask the page's next full run to scroll the element at ``selector`` into view (a run
    that just finished: its heatmap, when it lies below the fold)."""
    st.session_state[SCROLL_TO] = selector


def scroll_if_asked() -> None:
    """Scroll as `scroll_later` asked, once; the selector is the page's own, never user text."""
    selector = st.session_state.pop(SCROLL_TO, None)
    if selector and not session.presenting():  # the projector view has its figure at the top
        st.html(_SCROLL_SCRIPT % json.dumps(selector), unsafe_allow_javascript=True)


def show_url_problems() -> None:
    """Say which values of the link were refused (once per session)."""
    problems = session.url_problems()
    if problems:
        st.warning("Some values in the link could not be used:\n\n"
                   + "\n".join(f"- {plain(p)}" for p in problems[:20]), icon="⚠️")
        session.set_url_problems([])
    show_automatic_changes()


def note_automatic_changes(before, edited: str) -> None:
    """Keep what editing ``edited`` changed besides itself (the preset following T, an
    input of ``B,T``), for the page to announce on its next run."""
    note = announcement(before, session.experiment(), edited)
    if note:
        st.session_state[AUTOMATIC_CHANGES] = note
    else:
        st.session_state.pop(AUTOMATIC_CHANGES, None)


def note_preset_changes(before, label: str) -> None:
    """Keep what choosing the preset ``label`` set besides the stack (its steps, lr, …),
    for the page to announce on its next run."""
    note = preset_announcement(label, before, session.experiment())
    if note:
        st.session_state[AUTOMATIC_CHANGES] = note


def show_automatic_changes() -> None:
    """Announce, once, what the last edit changed on its own, before and after."""
    note = st.session_state.pop(AUTOMATIC_CHANGES, None)
    if note:
        st.info(plain(note, 1200), icon=":material/sync_alt:")


def show_changed_since(job) -> bool:
    """Say above a run when it no longer matches the experiment (what changed, old → new);
    True when it does not."""
    source = job.run.network.source if job.run is not None else job.plan.source
    changes = changed_since(session.experiment(), source, job.config, available_devices())
    if changes:
        st.warning(plain(stale_note(job.key, changes), 1200), icon=":material/history:")
    return bool(changes)
