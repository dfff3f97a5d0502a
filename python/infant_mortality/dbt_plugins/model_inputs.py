"""How the dbt Python models read their inputs.

DuckDB returns a table's rows in no fixed order (its scans are parallel), and a sum of floats
depends on the order of its terms: read as they come, the same inputs gave statistics differing
in the 11th significant digit from one build to the next. Every Python model reads its inputs
through `ordered_frame`, sorted on all columns, so two builds of the same data publish
identical marts (checked row for row with EXCEPT ALL).

The frame is the one DuckDB's `.df()` gives (same dtypes and values, tested), built from Arrow:
`.df()` makes a Python object of every text value while it holds the interpreter lock, which
stalled the other Python models of a national build for seconds (6.3 s of the lock at scale 1,
measured with py-spy); Arrow's conversion is about three times faster and mostly outside it.
"""

from __future__ import annotations

import pandas as pd
import pyarrow as pa

# Column types read through Arrow; any other type (dates, decimals, lists) through `.df()`.
_ARROW_TYPES = {"VARCHAR", "DOUBLE", "FLOAT", "BIGINT", "INTEGER", "SMALLINT", "TINYINT", "BOOLEAN", "HUGEINT"}

# `.df()` gives a nullable pandas dtype to an integer or boolean column that holds a NULL.
_NULLABLE = {pa.int8(): pd.Int8Dtype(), pa.int16(): pd.Int16Dtype(), pa.int32(): pd.Int32Dtype(),
             pa.int64(): pd.Int64Dtype(), pa.bool_(): pd.BooleanDtype()}


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def ordered_frame(relation) -> pd.DataFrame:
    """The rows of a DuckDB relation (what `dbt.ref()` returns) as a DataFrame in one fixed
    order: sorted on every column, left to right, NULLs last."""
    ordered = relation.order(", ".join(_quoted(name) + " nulls last" for name in relation.columns))
    types = [str(t) for t in relation.types]
    if not set(types) <= _ARROW_TYPES:
        return ordered.df()
    # `.df()` turns HUGEINT (DuckDB's sum of integers) into a double: the same cast, in DuckDB.
    selected = ordered.project(", ".join(
        f"cast({_quoted(name)} as double) as {_quoted(name)}" if kind == "HUGEINT" else _quoted(name)
        for name, kind in zip(relation.columns, types)))
    table = selected.to_arrow_table()
    columns = {}
    for name, column in zip(table.column_names, table.columns):
        nullable = _NULLABLE.get(column.type) if column.null_count else None
        columns[name] = column.to_pandas(types_mapper={column.type: nullable}.get if nullable else None)
    return pd.DataFrame(columns, index=pd.RangeIndex(table.num_rows))
