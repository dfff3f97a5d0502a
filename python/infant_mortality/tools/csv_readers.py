"""Stata and R code that reads a CSV export of the query command with every column's type.

A reader that guesses types from the values turns the code `01101` into the number 1101 and
reads the flags `true`/`false` as text. The scripts written here say what each column is, from
the types DuckDB gave the result: text columns (every code, name and label) as text, flags as
0/1 (Stata) or logical (R), numbers as double precision numbers.
"""

from __future__ import annotations

import re

NUMERIC_TYPE = re.compile(r"(U?(TINYINT|SMALLINT|INTEGER|BIGINT|HUGEINT)|FLOAT|DOUBLE|DECIMAL(\(\d+,\s*\d+\))?)")
# A temporary Stata variable name no column of a mart has (Stata names are at most 32 characters).
STATA_SCRATCH = "_imr_flag_tmp"


def column_kinds(sql_types: dict[str, str]) -> dict[str, str]:
    """Each column as `text`, `flag` or `number`."""
    kinds = {}
    for name, sql_type in sql_types.items():
        if sql_type == "BOOLEAN":
            kinds[name] = "flag"
        elif NUMERIC_TYPE.fullmatch(sql_type):
            kinds[name] = "number"
        else:  # VARCHAR, and anything else the CSV writes as text (dates, lists)
            kinds[name] = "text"
    return kinds


def _check_file_name(csv_name: str) -> None:
    if '"' in csv_name or "\n" in csv_name:
        raise ValueError(f"{csv_name!r}: a CSV name with a quote or a line break cannot be quoted in Stata")


def stata_do(csv_name: str, sql_types: dict[str, str]) -> str:
    """A `.do` file: `import delimited` with every text and flag column as a string
    (`stringcols`), numbers in double precision (`asdouble`), then each flag turned into a byte
    1/0 (missing stays missing) in its original place."""
    _check_file_name(csv_name)
    kinds = column_kinds(sql_types)
    names = list(kinds)
    as_strings = " ".join(str(position) for position, name in enumerate(names, 1) if kinds[name] != "number")
    lines = [
        f"* Reads {csv_name} (python -m infant_mortality.query --csv) with every column's type:",
        "* text columns (codes keep their leading zeros) as strings, flags as 1/0, numbers as doubles.",
        "* Run it from the folder that holds the CSV.",
        f'import delimited using "{csv_name}", varnames(1) encoding("utf-8") delimiters(",") '
        + (f"stringcols({as_strings}) " if as_strings else "") + "asdouble clear",
    ]
    flags = [name for name in names if kinds[name] == "flag"]
    if flags:
        lines += [
            f"foreach flag in {' '.join(flags)} {{",
            f'    generate byte {STATA_SCRATCH} = cond(`flag\' == "true", 1, cond(`flag\' == "false", 0, .))',
            "    drop `flag'",
            f"    rename {STATA_SCRATCH} `flag'",
            "}",
            f"order {' '.join(names)}",
        ]
    return "\n".join(lines) + "\n"


def _r_name(csv_name: str) -> str:
    stem = re.sub(r"\.csv$", "", csv_name, flags=re.IGNORECASE)
    name = re.sub(r"[^A-Za-z0-9_]", "_", stem)
    return name if re.match(r"[A-Za-z]", name) else f"d_{name}"


def r_script(csv_name: str, sql_types: dict[str, str]) -> str:
    """Base R (no package): `read.csv` with `colClasses` for every text column (character)
    and flag (logical; R reads `true`/`false`); an empty field is NA in every column."""
    _check_file_name(csv_name)
    kinds = column_kinds(sql_types)
    classes = {"text": "character", "flag": "logical", "number": "numeric"}
    pairs = ",\n".join(f'    {name} = "{classes[kind]}"' for name, kind in kinds.items())
    quoted = csv_name.replace("\\", "\\\\")
    return (
        f"# Reads {csv_name} (python -m infant_mortality.query --csv) with every column's type:\n"
        "# text columns (codes keep their leading zeros) as character, flags as logical.\n"
        "# Run it from the folder that holds the CSV (or give read.csv the full path).\n"
        f'{_r_name(csv_name)} <- read.csv("{quoted}", encoding = "UTF-8", na.strings = "",\n'
        f"  colClasses = c(\n{pairs}\n  ))\n"
    )
