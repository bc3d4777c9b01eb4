"""An experiment's headline tables as the page shows them (`st.table`: static, one row per
configuration), every text made markdown-inert. What they say comes from
`engine.experiments.headline`, the same tables `experiment show` prints."""
from __future__ import annotations

from typing import Any

import pandas as pd

from pages._shared import md


def headline(table: pd.DataFrame, few: pd.Series | None = None) -> Any:
    """A table of `ex.headline` (text cells, headers in words) for `st.table`: every cell
    made inert (`md`: a label is anyone's, and st.table renders markdown), the interval on
    one line, and the rows over fewer than 5 scored runs (`few`, the summary's, in the same
    order) in grey."""
    grey = [bool(v) for v in few.tolist()] if few is not None else [False] * len(table)
    shown = table.reset_index(drop=True)
    styler = shown.style.apply(lambda row: ["color: #9e9e9e" if grey[int(row.name)] else ""]
                               * len(row), axis=1)
    return styler.format({column: (lambda text: one_line(md(text))) if "[" in column else md
                          for column in shown.columns})


def one_line(text: Any) -> str:
    """`text` with no place to break a line: no-break spaces, and word joiners around dashes."""
    return str(text).replace(" ", "\u00a0").replace("\u2013", "\u2060\u2013\u2060")
