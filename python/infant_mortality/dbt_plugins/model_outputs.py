"""How the dbt Python models hand their results back.

dbt-duckdb stores a returned DataFrame with `create table as select * from frame`, and DuckDB
types an object column that holds no value (an empty result, or a note that is NULL on every
row) as NULL, which the marts' enforced contracts refuse ("NULL" is not VARCHAR). A build on a
small or odd input (one commune, no available area-year) stopped there. Every Python model
returns through `typed_frame`, which makes such columns text.
"""

from __future__ import annotations

import pandas as pd


def _is_text(column: pd.Series) -> bool:
    values = column.dropna()
    return all(isinstance(value, str) for value in values)


def typed_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """The frame with every object column that holds only text or nothing as a string column
    (DuckDB: VARCHAR); other columns as they are."""
    text = [name for name, dtype in frame.dtypes.items() if dtype == object and _is_text(frame[name])]
    return frame.astype({name: "str" for name in text}) if text else frame
