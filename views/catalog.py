"""Catalog: every op's reference page, the same text as docs/, examples resolved live."""

import streamlit as st

import app_state
from stacklab import catalog
from stacklab.core.docs import op_page

app_state.start()
st.title("Catalog")
app_state.show_url_problems()
ops = catalog()
choice = st.selectbox("Op", list(ops), key="catalog_op",
                      format_func=lambda n: f"{ops[n].signature} — {ops[n].summary}")
st.markdown(op_page(ops[choice]).split("\n", 2)[2])  # the page without its generator marker
