"""The serving layer: app policy kept out of the library's core. An experiment as a link
(the URL schema, presets and their rules), the limits of a classroom server, and the
worker pool that many browser sessions share. Streamlit-free: the pages in ``views/``
wire these to widgets.
"""
