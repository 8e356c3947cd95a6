"""The app's own package: what the pages (views/) stand on, split by job.

- `ui.session`: the session's state and its keys, the server's training pool, `PageState`
  (each page's own values, declared at its top);
- `ui.urls`: the page's address kept in step with the session (the link table);
- `ui.browsers`: which sessions still have a browser tab open;
- `ui.controls`: controls made from setting rows and op arguments;
- `ui.markdown`: user text as safe Markdown, errors on the page;
- `ui.figures`: figures and charts on a page;
- `ui.scripts`: notices shown once and the injected JavaScript;
- `ui.navigation`: app.py's pages and page icon, made once per server, not per run;
- `ui.lab`: the one module that imports from stacklab's internals, and exactly what the
  pages use of them.

The pages read and write session state only through `ui`, and call the library through
`stacklab`'s public names or `ui.lab` (tests/test_app.py checks both).
"""
