"""Following something on the server (a class, its votes, a run) from a page, with one
polling loop: `follow` puts a small component in the running fragment, which asks one of
the server's watch endpoints (`ui.endpoints`) every ``every`` s and reruns the fragment
only when the answer says so. The endpoint's answer also says how often to ask (``every``:
the server's backpressure, decided in one place, `ui.pace.every`), so the page follows
the server's load without a rerun.

There are two kinds of component, both made from the one loop (`loop_js`):

- ``stacklab.watch`` (`ui.watch.watch`): rerun the fragment once the answer's version
  ``v`` is no longer the one it was drawn at;
- ``stacklab.live_run`` (`ui.live_run.show`): draw the run's status and pictures from
  each answer in the browser, and rerun the fragment once the run is no longer live.

Where no endpoint answers (the app run as ``streamlit run app.py`` rather than through
server.py, or a proxy that does not pass the path on), either reruns its fragment at the
interval instead, as ``run_every`` would: slower for the server, the same for the page.
"""

from __future__ import annotations

import itertools

import streamlit as st

from ui.wire import VOTER_COOKIE, VOTER_HEADER

__all__ = ["VOTER_COOKIE", "VOTER_HEADER", "component", "follow", "loop_js"]

VOTER_COOKIE_SECONDS = 12 * 3600  # a school day: a reload or a rescan is the same voter

# The one polling loop. ``%(kind)s`` is a function ``(data, root, rerun) -> {headers,
# answered}``: ``answered(answer)`` handles one answer of the endpoint and says whether to
# ask again (false once it has rerun the fragment).
_LOOP = """
export default function (component) {
  const { data, parentElement, setTriggerValue } = component;
  let stopped = false, timer = null;
  const next = (seconds) => { if (!stopped) timer = setTimeout(ask, seconds * 1000); };
  const rerun = (why) => { stopped = true; setTriggerValue("changed", why); };
  const kind = (%(kind)s)(data, parentElement, rerun);
  async function ask() {
    if (stopped) return;
    let answer = null;
    try {
      const response = await fetch(data.url, { headers: kind.headers || {}, cache: "no-store" });
      if (response.ok) answer = await response.json();
    } catch (error) { answer = null; }
    if (stopped) return;
    if (answer === null) { rerun(`asked ${Date.now()}`); return; }  // no endpoint here:
    // rerun the fragment at the interval, as run_every would
    if (!(await kind.answered(answer))) return;
    next(typeof answer.every === "number" && answer.every > 0 ? answer.every : data.every);
  }
  next(data.every);
  return () => { stopped = true; clearTimeout(timer); };
}
"""

# rerun once the version differs from the one the fragment was drawn at
# (with ``data.cookie``, the device's voter identity is first kept in the browser for a reload)
VERSION_JS = """(data, root, rerun) => {
  if (data.voter && data.cookie) {
    document.cookie = `${data.cookie}=${data.voter}; path=/; max-age=%(keep)d; SameSite=Strict`;
  }
  return {
    headers: data.voter ? { "%(header)s": data.voter } : {},
    answered: (answer) => {
      if (answer.v !== data.version) { rerun(answer.v); return false; }
      return true;
    },
  };
}""" % {"header": VOTER_HEADER, "keep": VOTER_COOKIE_SECONDS}


def loop_js(kind: str) -> str:
    """The component's JavaScript: the one polling loop, handling each answer with ``kind``."""
    return _LOOP % {"kind": kind}


def component(name: str, kind: str, html: str, **options):
    """A following component named ``name``: the polling loop with ``kind`` (JavaScript, see
    `_LOOP`), in ``html``."""
    return st.components.v2.component(name, html=html, js=loop_js(kind), **options)


_drawn = itertools.count()  # a number for each fragment run that draws a follower
_version = component("stacklab.watch", VERSION_JS, "<span hidden></span>")


def follow(url: str, every: float, key: str, *, version: str | None = None,
           voter: str | None = None, cookie: str | None = None, drawing=None,
           **data) -> None:
    """In the running fragment: ask ``url`` every ``every`` s (or as its answers say), and
    rerun this fragment when its version is no longer ``version`` (the fragment then decides
    what changed), or, with ``drawing`` (a component made by `component`, given ``data``
    and ``version`` when given), as that component decides."""
    # ``drawn`` differs at each run of the fragment: a component given the data it had is
    # not started again, and this one stops asking once it has rerun its fragment
    data = {"url": url, "every": float(every), "drawn": next(_drawn), **data}
    if drawing is None or version is not None:
        data["version"] = str(version)
    if drawing is None:
        if voter:
            data["voter"] = voter
            if cookie:
                data["cookie"] = cookie
    (drawing or _version)(data=data, key=key, on_changed_change=lambda: None)
