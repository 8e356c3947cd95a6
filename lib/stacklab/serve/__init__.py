"""The serving layer: app policy kept out of the library's core. An experiment as a link
(the URL schema and classroom limits) and the worker pool that many browser sessions
share. Streamlit-free: the pages in ``pages/`` wire these to widgets.
"""
