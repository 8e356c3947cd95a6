"""stacklab: the app. `make run` starts it; the pages live in views/.

Not in pages/: with that folder present, Streamlit uses its older folder navigation for a
session whose first visit goes straight to a page (/train?...), and this script (the page
setup, the navigation) would not run for it."""

import streamlit as st

import app_state

st.set_page_config(page_title="stacklab", page_icon=":material/layers:", layout="wide")

navigation = st.navigation([
    st.Page("views/build.py", title="Build", icon=":material/layers:", default=True),
    st.Page("views/train.py", title="Train", icon=":material/model_training:", url_path="train"),
    st.Page("views/explore.py", title="Explore", icon=":material/insights:", url_path="explore"),
    st.Page("views/compare.py", title="Compare", icon=":material/compare:", url_path="compare"),
    st.Page("views/catalog.py", title="Catalog", icon=":material/menu_book:", url_path="catalog"),
])
app_state.pool()  # the first visit to any page starts the pool and its warmed fork server
navigation.run()
