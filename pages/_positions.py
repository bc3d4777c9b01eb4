"""The Experiments page's position effects (DESIGN 2.10): the outcome by the position a seat
held, and a debate judge's position consistency over swapped pairs, each as a table (data
grids show text as text) and the first as a plotly chart, with n."""
from __future__ import annotations

import streamlit as st

from engine import Store
from engine import experiments as ex
from engine.reports import positions as pos
from pages import _shared

md = _shared.md
PERCENT = st.column_config.NumberColumn(format="percent")


@st.cache_data(max_entries=16, show_spinner=False)
def read(_store: Store, _result: ex.Report, stamp: tuple, experiment_id: str,
         kind: str) -> pos.Positions:
    """`positions.positions` over the report's runs, built again only when `stamp` changed."""
    return pos.positions(_store, experiment_id, _result.runs, _result.experiment["spec"])


def show(result: ex.Report, stamp: tuple) -> None:
    """The position effects of the report's experiment."""
    found = read(_shared.store(), result, stamp, str(result.experiment["id"]), result.kind)
    st.subheader("Outcome by position")
    st.caption("How often the seat in each position carried the run's outcome (a debate's "
               "verdict, the winning answer of a vote): by the order seats were presented in "
               "(`order: shuffled` draws one per question and repeat) and, for a debate, by the "
               "side argued. Without a position effect a debate's judge rules for the seat "
               "presented first, and for the side in favour, about half the time. Rates over the "
               "counted runs, with their 95% Wilson interval and n.")
    if found.positions_note:
        st.info(found.positions_note)
    else:
        st.plotly_chart(pos.position_figure(found.by_position), key="exp-positions")
        st.dataframe(found.by_position, hide_index=True, key="exp-positions-table",
                     column_config={"rate": PERCENT, "low": PERCENT, "high": PERCENT})
    st.subheader("Judge position consistency")
    st.caption("Over swapped pairs (one question and repeat judged with the sides as "
               "configured and swapped, `sides: both`): the share whose verdict follows the "
               "same seat, so the same model, both ways. A judge that rules by side credits a "
               "different seat each way.")
    if found.consistency_note:
        st.info(found.consistency_note)
    else:
        st.plotly_chart(pos.consistency_figure(found.consistency), key="exp-consistency-chart")
        st.dataframe(found.consistency, hide_index=True, key="exp-consistency",
                     column_config={"share": PERCENT, "low": PERCENT, "high": PERCENT})
