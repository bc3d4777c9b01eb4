"""An experiment's summary as the page shows it: static tables (`st.table`), one row per
configuration, numbers formatted and every text made markdown-inert."""
from __future__ import annotations

from typing import Any

import pandas as pd

from engine.views import aggregate
from pages._shared import md

# The summary's number formats. Its tables are static (st.table: one row per configuration,
# nothing to scroll or sort): as four data grids they were 0.4 s of the browser's time on the
# first visit to an experiment (Playwright, 8 visits each way: median 1.86 s against 1.45 s).
FORMATS = {**dict.fromkeys(("accuracy", "accuracy_low", "accuracy_high", "mind_change_rate"),
                           "{:.1%}"),
           **dict.fromkeys(("consensus_ece", "consensus_brier", "judge_ece", "judge_brier"),
                           "{:.3f}"),
           "tokens_per_run": "{:,.0f}", "cost_per_run": "${:,.4f}", "seconds_per_run": "{:.2f}",
           "calls_per_run": "{:.1f}"}
MONEY = "${:,.4f}"


def styled(shown: pd.DataFrame) -> Any:
    """`shown` (a slice of the summary) styled for the page: numbers in `FORMATS`, other
    counts as whole numbers (a count with a missing value is stored as a float), a missing
    value as "n/a", the interval's text on one line (`one_line`), every text made inert
    (`md`: a label is anyone's, and st.table renders markdown), and the rows over fewer than
    5 scored runs in grey (`aggregate.grey_few`)."""
    table = aggregate.grey_few(shown) if "few" in shown.columns else shown.style
    formats: dict[str, Any] = {}
    for column in shown.columns:
        values = shown[column]
        if column in FORMATS:
            formats[column] = FORMATS[column]
        elif pd.api.types.is_float_dtype(values):
            whole = values.dropna().map(float.is_integer).all()
            formats[column] = "{:,.0f}" if whole else "{:.3f}"
        elif "[" in str(column):  # "accuracy [95% CI] n": one line (no breaking spaces)
            formats[column] = lambda text: one_line(md(text))
        elif not pd.api.types.is_numeric_dtype(values):  # st.table renders markdown: inert
            formats[column] = md
    table = table.format(formats, na_rep="n/a")
    if "cost_per_run" in shown.columns:  # an unpriced model's cost is unknown, never 0
        table = table.format(MONEY, subset=["cost_per_run"], na_rep="unknown")
    return table


def one_line(text: Any) -> str:
    """`text` with no place to break a line: no-break spaces, and word joiners around dashes."""
    return str(text).replace(" ", "\u00a0").replace("\u2013", "\u2060\u2013\u2060")
