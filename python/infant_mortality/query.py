"""Run one SQL query on the published warehouse and print the result (or write it as CSV).

    .venv/bin/python -m infant_mortality.query "select * from marts.fct_trends where trend <> 'stationary'"
    .venv/bin/python -m infant_mortality.query --csv out.csv "select * from marts.fct_commune_vs_region"

The file is opened read-only and closed at once, so a rebuild (`make warehouse`) is never
blocked by it. CSV output is UTF-8 with a header, for spreadsheets, Stata (`import delimited`)
or R.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import duckdb

DEFAULT_WAREHOUSE = "warehouse/infant_mortality.duckdb"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m infant_mortality.query", description=__doc__.split("\n")[0])
    parser.add_argument("sql", help="the query, e.g. \"select * from marts.fct_rates_commune_year limit 5\"")
    parser.add_argument("--warehouse", type=Path,
                        default=Path(os.environ.get("IMR_DUCKDB_PATH", DEFAULT_WAREHOUSE)))
    parser.add_argument("--csv", type=Path, help="write the result to this CSV file instead of printing it")
    args = parser.parse_args(argv)
    if not args.warehouse.exists():
        print(f"query: {args.warehouse} does not exist; run `make warehouse` first", file=sys.stderr)
        return 1
    with duckdb.connect(str(args.warehouse), read_only=True) as con:
        try:
            result = con.execute(args.sql).df()
        except duckdb.Error as error:
            print(f"query: {error}", file=sys.stderr)
            return 1
    if args.csv:
        result.to_csv(args.csv, index=False)
        print(f"{len(result)} rows written to {args.csv}")
    else:
        print(result.to_string(index=False, max_rows=200))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
