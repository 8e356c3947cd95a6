"""The serving layer: app policy kept out of the library's core. An experiment as a link
(the URL schema, presets and their rules: `links`), the limits of a classroom server
(`limits`), the worker pool that many browser sessions share (`workers`), and the classes
a teacher presents with their votes (`classroom`). Streamlit-free: the app's pages and
their parts wire these to widgets.
"""
