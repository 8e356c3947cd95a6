"""Catalog: every op's reference page, the same text as docs/, examples resolved live."""

import streamlit as st

from stacklab import TASKS, catalog
from ui import scripts, urls
from ui.library import op_page

urls.start()
st.title("Catalog")
scripts.show_url_problems()
ops = catalog()
choice = st.selectbox("Op", list(ops), key="catalog_op",
                      format_func=lambda n: f"{ops[n].signature} — {ops[n].summary}")
st.markdown(op_page(ops[choice]).split("\n", 2)[2])  # the page without its generator marker

st.subheader("Tasks")
st.caption("Each toy task, what the position encoding should learn for it, its pattern "
           "score and its preset stack (Build's presets; Train's task control).")
st.dataframe([{"task": task.name, "rule": task.description, "what to look for": task.pattern,
               "pattern score": task.pattern_score, "T": task.default_seq_len,
               "preset": task.preset()}
              for task in TASKS.values()], hide_index=True, key="catalog_tasks")
