"""Run page: configure a protocol, start it, and see the result."""
from __future__ import annotations

import streamlit as st

from engine import Store, get_protocol
from engine.protocols import REGISTRY, arun_config, run_sync

st.title("Run")
protocol = st.selectbox("Protocol", list(REGISTRY), format_func=lambda n: REGISTRY[n].title)
spec = get_protocol(protocol)
question = st.text_area(spec.question_name.capitalize())
if st.button("Start", type="primary", disabled=not question.strip()):
    result = run_sync(arun_config({"protocol": protocol}, question, store=Store()))
    st.success(f"Run {result.run_id} finished")
    st.text(spec.summary(result))
