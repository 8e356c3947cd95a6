"""A page that waits for something on the server (its teacher's next step, the room's
votes, a run that trains) without rerunning its script to find out.

`watch` puts a small component in a fragment (`ui.follow`, the one polling loop every
following page uses). In the browser it asks one of the server's
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

import streamlit as st

from ui.follow import follow
from ui.wire import PREFIX, VOTER_COOKIE, VOTER_HEADER  # shared with the endpoints (ui.wire)

__all__ = ["PREFIX", "VOTER_COOKIE", "VOTER_HEADER", "endpoint", "watch"]


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
    follow(url, every, key, version=version, voter=voter, cookie=cookie)
