"""A page that waits for something on the server (its teacher's next step, the room's
votes, a run that trains) without rerunning its script to find out.

`watch` puts a small component in a fragment. In the browser it asks one of the server's
watch endpoints (`ui.endpoints`: a few hundred bytes of JSON, answered in well under a
millisecond from what the server holds) every few seconds, and reruns its fragment only
when the answer's version differs from the one the fragment was drawn at. A hall of 300
students following a teacher costs the server 300 tiny answers a second and, when the
teacher moves, one rerun each, where a fragment with ``run_every`` reran 300 scripts a
second to find nothing new.

The endpoint also says how often to ask (``every``: wider when the server is loaded,
`ui.polls`), so the page follows the server's backpressure without a rerun.

Where no endpoint answers (the app run as ``streamlit run app.py`` rather than through
server.py, or a proxy that does not pass the path on), the component reruns its fragment
at the interval instead, as ``run_every`` would: slower for the server, the same for the
page. A browserless client (Streamlit's agent API) sees the component's ``data``, the
endpoint's path among it, and can ask the endpoint itself; AppTest runs the fragment once
per run, as it runs ``run_every`` fragments.
"""

from __future__ import annotations

import itertools

import streamlit as st

PREFIX = "/_stacklab/watch"  # the watch endpoints' paths (ui.endpoints), under the base URL path
VOTER_HEADER = "X-Stacklab-Voter"  # a follower's vote token: counted as following, never in a URL
VOTER_COOKIE = "stacklab_voter_"  # + the class id: the browser keeps its voter identity there
VOTER_COOKIE_SECONDS = 12 * 3600  # a school day: a reload or a rescan is the same voter

_JS = """
export default function (component) {
  const { data, setTriggerValue } = component;
  let stopped = false, timer = null;
  if (data.voter && data.cookie) {  // this device's voter identity, kept for a reload
    document.cookie = `${data.cookie}=${data.voter}; path=/; max-age=%(keep)d; SameSite=Strict`;
  }
  const next = (seconds) => { if (!stopped) timer = setTimeout(ask, seconds * 1000); };
  const changed = (version) => { stopped = true; setTriggerValue("changed", version); };
  async function ask() {
    if (stopped) return;
    let answer = null;
    try {
      const headers = data.voter ? { "%(header)s": data.voter } : {};
      const response = await fetch(data.url, { headers, cache: "no-store" });
      if (response.ok) answer = await response.json();
    } catch (error) { answer = null; }
    if (stopped) return;
    if (answer === null) { changed(`asked ${Date.now()}`); return; }  // no endpoint here:
    // rerun the fragment at the interval, as run_every would
    if (answer.v !== data.version) { changed(answer.v); return; }
    next(typeof answer.every === "number" && answer.every > 0 ? answer.every : data.every);
  }
  next(data.every);
  return () => { stopped = true; clearTimeout(timer); };
}
""" % {"header": VOTER_HEADER, "keep": VOTER_COOKIE_SECONDS}

_drawn = itertools.count()  # a number for each fragment run that draws a watch
_component = st.components.v2.component("stacklab.watch", html="<span hidden></span>",
                                        js=_JS)


def endpoint(*parts: str) -> str:
    """The path of a watch endpoint (``endpoint("class", ID)``), under the server's base
    URL path when it has one."""
    base = (st.get_option("server.baseUrlPath") or "").strip("/")
    path = "/".join([PREFIX.strip("/"), *(str(part).strip("/") for part in parts)])
    return f"/{base}/{path}" if base else f"/{path}"


def watch(url: str, version: str, every: float, key: str, voter: str | None = None,
          cookie: str | None = None) -> None:
    """In the running fragment: ask ``url`` every ``every`` s and rerun this fragment when
    its version is no longer ``version`` (the fragment then decides what changed). A
    ``voter`` identity goes with each ask (`VOTER_HEADER`) and, with ``cookie``, is kept
    in the browser under that name (its page reads it back after a reload)."""
    # ``drawn`` differs at each run of the fragment: a component given the data it had is
    # not started again, and this one stops asking once it has rerun its fragment
    data = {"url": url, "version": str(version), "every": float(every),
            "drawn": next(_drawn)}
    if voter:
        data["voter"] = voter
        if cookie:
            data["cookie"] = cookie
    _component(data=data, key=key, on_changed_change=lambda: None)
