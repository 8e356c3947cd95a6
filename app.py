"""The stacklab app: wires the pages with st.navigation (run with `make run`)."""

import streamlit as st

st.set_page_config(page_title="stacklab", layout="wide")
navigation = st.navigation([st.Page("pages/build.py", title="Build", default=True)])
navigation.run()
