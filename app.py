"""stacklab: the app. `make run` starts it; the pages live in pages/."""

import streamlit as st

import app_state

st.set_page_config(page_title="stacklab", page_icon=":material/layers:", layout="wide")

navigation = st.navigation([
    st.Page("pages/build.py", title="Build", icon=":material/layers:", default=True),
    st.Page("pages/train.py", title="Train", icon=":material/model_training:", url_path="train"),
    st.Page("pages/explore.py", title="Explore", icon=":material/insights:", url_path="explore"),
    st.Page("pages/compare.py", title="Compare", icon=":material/compare:", url_path="compare"),
    st.Page("pages/catalog.py", title="Catalog", icon=":material/menu_book:", url_path="catalog"),
])
app_state.pool()  # the first visit to any page starts the pool and its warmed fork server
navigation.run()
