"""An experiment's summary as the page shows it: static tables (`st.table`), one row per
configuration, numbers formatted and every text made markdown-inert."""
from __future__ import annotations

from typing import Any

import pandas as pd

from engine.text import words
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


# Columns the page leaves to the CSV and the CLI: the interval column says them in one cell.
PAGE_HIDDEN = ("accuracy", "accuracy_low", "accuracy_high", "few")


def shown_columns(columns: list[str], seen: set[str]) -> list[str]:
    """The columns of one summary group the page shows: none in `PAGE_HIDDEN`, none a group
    before it showed (`seen`, updated), so no column is repeated."""
    out = [c for c in columns if c not in PAGE_HIDDEN and c not in seen]
    seen.update(out)
    return out


def styled(shown: pd.DataFrame) -> Any:
    """`shown` (a slice of the summary) styled for the page: its columns in words
    (`engine.text.words`), numbers in `FORMATS`, other counts as whole numbers (a count with
    a missing value is stored as a float), a missing value as "n/a", the interval's text on
    one line (`one_line`), every text made inert (`md`: a label is anyone's, and st.table
    renders markdown), and the rows over fewer than 5 scored runs in grey (its `few`, a
    column the page does not show)."""
    few = shown["few"].astype(bool) if "few" in shown.columns else None
    frame = shown.drop(columns=["few"], errors="ignore")
    named = {column: words(column) for column in frame.columns}
    table = frame.rename(columns=named).style
    if few is not None:
        table = table.apply(lambda row: ["color: #9e9e9e" if bool(few.loc[row.name]) else ""]
                            * len(row), axis=1)
    formats: dict[str, Any] = {}
    for column in frame.columns:
        values = frame[column]
        if column in FORMATS:
            formats[named[column]] = FORMATS[column]
        elif pd.api.types.is_float_dtype(values):
            whole = values.dropna().map(float.is_integer).all()
            formats[named[column]] = "{:,.0f}" if whole else "{:.3f}"
        elif "[" in str(column):  # "accuracy [95% CI] n": one line (no breaking spaces)
            formats[named[column]] = lambda text: one_line(md(text))
        elif not pd.api.types.is_numeric_dtype(values):  # st.table renders markdown: inert
            formats[named[column]] = md
    table = table.format(formats, na_rep="n/a")
    if "cost_per_run" in frame.columns:  # an unpriced model's cost is unknown, never 0
        table = table.format(MONEY, subset=[named["cost_per_run"]], na_rep="unknown")
    return table


def one_line(text: Any) -> str:
    """`text` with no place to break a line: no-break spaces, and word joiners around dashes."""
    return str(text).replace(" ", "\u00a0").replace("\u2013", "\u2060\u2013\u2060")
