"""How the dbt Python models read their inputs.

DuckDB returns a table's rows in no fixed order (its scans are parallel), and a sum of floats
depends on the order of its terms: read as they come, the same inputs gave statistics differing
in the 11th significant digit from one build to the next. Every Python model reads its inputs
through `ordered_frame`, sorted on all columns, so two builds of the same data publish
identical marts (checked row for row with EXCEPT ALL).
"""

from __future__ import annotations

import pandas as pd


def ordered_frame(relation) -> pd.DataFrame:
    """The rows of a DuckDB relation (what `dbt.ref()` returns) as a DataFrame in one fixed
    order: sorted on every column, left to right, NULLs last."""
    columns = ", ".join('"' + name.replace('"', '""') + '" nulls last' for name in relation.columns)
    return relation.order(columns).df()
