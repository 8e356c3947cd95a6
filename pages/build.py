"""Build: type a stack and see every shape resolved (the full page comes with the app issue)."""

import streamlit as st

import stacklab

DEFAULT_STACK = "embedding(500, 16)\npos_embed(32)\nlinear(4)"

st.title("Build")
source = st.text_area("Stack", value=st.query_params.get("stack", DEFAULT_STACK), height=160,
                      key="build_source")
input_text = st.text_input("Input shape", value=st.query_params.get("input", "B,12"),
                           key="build_input")
input_dtype = st.selectbox("Input dtype", ["int64", "int32", "float32", "float64", "float16",
                                           "bfloat16"], key="build_input_dtype")
try:
    network = stacklab.resolve(source, input_text, input_dtype=input_dtype)
except stacklab.StackError as err:
    st.error(f"**{err.code}** at {err.place}: {err.message}")
    st.code(str(err), language="text")
else:
    st.code(network.table(), language="text")
    st.metric("Parameters", f"{network.param_count:,}")
