"""The app's own package: what the pages (views/) and their parts (parts/) stand on, split
by job.

- `ui.hub`: the server's state in one object (`Hub`: the training pool, the classes, the
  polls' load, the live runs' pictures, the browser sessions, the made pages, the
  presented uploads, the static files' gzip), made by server.py at start-up or by the first page; no Streamlit in it;
- `ui.session`: the session's state and its keys, the hub's pool and classes as a page
  reads them, `PageState` (each page's own values, declared at its top);
- `ui.urls`: the page's address kept in step with the session (the link table);
- `ui.browsers`: which sessions still have a browser tab open;
- `ui.controls`: controls made from setting rows and op arguments;
- `ui.markdown`: user text as safe Markdown, errors on the page;
- `ui.figures`: figures and charts on a page;
- `ui.glossary`: the glossary's definitions in control help and under captions;
- `ui.lessons`: Learn's lessons: the package's, a folder's and a teacher's upload, checked;
- `ui.tables`: Explore's real models and uploaded tables, analysed by the pool's table jobs;
- `ui.present`: present mode, a figure at a time for a projector;
- `ui.style`: the app's stylesheet (contrast, focus, a phone's sizes);
- `ui.scripts`: notices shown once and the injected JavaScript;
- `ui.navigation`: app.py's pages and page icon, made once per server, not per run;
- `ui.follow`: the one polling loop and `follow`, how a page follows something on the
  server; `ui.watch` (a version to watch, the endpoints' paths) and `ui.live_run` (a live
  run drawn in the browser, its status and caption) build on it;
- `ui.polls`: a page's polls counted and timed, its interval and its load note;
- `ui.endpoints`: the watch endpoints server.py mounts beside the pages, answering from
  the hub; they and all they import never import streamlit (tests/test_architecture.py):
  - `ui.pace`: `every`, the one place that decides a following page's interval (the
    server's backpressure), and the endpoints' polls counted;
  - `ui.live_answers`: a live run's answers (its status, its pictures, the share panel's
    count), which `ui.live_run` draws on a page;
  - `ui.pictures`: a live run's newest pictures as markup, written once per frame and
    kind and kept by the hub;
  - `ui.wire`: what pages and endpoints agree on (the paths, the voter header and cookie);
- `ui.compression`: server.py's gzip of Streamlit's static files, made once each;
- `ui.encoding`: a request's Accept-Encoding read as HTTP defines it (q-values, ``*``);
- `ui.private_api`: the one importer of Streamlit's private names, each with a public
  fallback (``STACKLAB_PUBLIC_API_ONLY=1`` forces them all);
- `ui.library`: the one module that imports from stacklab's internals, and exactly what the
  pages use of them.

The pages read and write session state only through `ui`, and call the library through
`stacklab`'s public names or `ui.library` (tests/test_app.py checks both).
"""
