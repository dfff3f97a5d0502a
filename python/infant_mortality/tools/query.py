"""Run SQL on the published warehouse and print the results (or write one as CSV).

    .venv/bin/python -m infant_mortality.query "select * from marts.fct_trends where trend <> 'stationary'"
    .venv/bin/python -m infant_mortality.query --csv out.csv "select * from marts.fct_commune_vs_region"
    .venv/bin/python -m infant_mortality.query --csv out.csv --excel "select * from marts.dim_commune"

Read-only for real: the file is opened read-only with DuckDB's file system access switched off
and the configuration locked, so no statement can write a file (`COPY ... TO`, `EXPORT
DATABASE`), attach or read another one, or install an extension. The connection is closed at
once, so a rebuild (`make warehouse`) is never blocked by it.

Works from any folder: the warehouse is this project's `warehouse/infant_mortality.duckdb` (or
`$IMR_DUCKDB_PATH`, relative to the project), not a path relative to where you are.

Every statement given is run and each result printed, with its row count. Printing stops after
`--limit` rows (200) with a note saying that more exist; only those rows (and one more) are read
from DuckDB's stream, so a huge result costs what is printed. `--all` prints everything. Lists,
structs and maps print as [1, 2] and {'key': value}. A missing value prints as NULL, one spelling
for every type (integers such as `deaths`, decimals, text, dates, flags) and at any depth: never
pandas' `<NA>`, `NaN` or `None` (--help says so too).

CSV (`--csv FILE`, one statement): UTF-8, comma-separated, header row, `.` as decimal mark,
empty field for a missing value, `true`/`false` for flags, written to a temporary file and
renamed, with the permissions of the user's umask. `--readers` also writes FILE's `.do` (Stata)
and `.R` next to it: they read the CSV with every text column (codes with their leading zeros)
as text and every flag as 1/0 (Stata) or logical (R); a CSV named like one of them (out.R) is
refused, never replaced by the script. `--excel` starts the CSV
with a UTF-8 byte-order mark, which Excel needs to show Ñuñoa and Peñalolén correctly; without
it the file is plain UTF-8, which Stata's `import delimited`, R and pandas read as is. A target
inside any warehouse folder or release, or over a database, Parquet or GeoPackage file, is
refused (links resolved first).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import duckdb
import numpy as np

from infant_mortality.tools.csv_readers import column_kinds, r_script, stata_do
from infant_mortality.tools.publish import DEFAULT_PUBLISHED, _default_project_dir

DEFAULT_LIMIT = 200
UTF8_BOM = "\ufeff"
# The published file only; no other file can be read, written, attached or installed.
LOCKED_CONFIG = {
    "enable_external_access": False,
    "autoinstall_known_extensions": False,
    "autoload_known_extensions": False,
    "lock_configuration": True,
}


class QueryError(Exception):
    """One sentence for the user."""


def default_warehouse() -> Path:
    path = Path(os.environ.get("IMR_DUCKDB_PATH") or DEFAULT_PUBLISHED)
    return path if path.is_absolute() else _default_project_dir() / path


def connect(warehouse: Path) -> duckdb.DuckDBPyConnection:
    if not warehouse.exists():
        raise QueryError(f"{warehouse} does not exist; run `make warehouse` first")
    try:
        return duckdb.connect(str(warehouse), read_only=True, config=LOCKED_CONFIG)
    except duckdb.IOException as error:
        if "lock" in str(error).lower():
            raise QueryError(
                f"{warehouse} is open for writing in another process (a `dbt build` or a tool "
                "that opened it read-write); try again when it has finished"
            ) from None
        raise QueryError(f"cannot open {warehouse}: {str(error).splitlines()[0]}") from None


@dataclass
class Result:
    """One statement's result: its columns, their DuckDB types, and the rows fetched."""
    columns: list[str]
    types: list[str]
    rows: list[tuple] = field(default_factory=list)
    more: bool = False  # rows exist beyond those fetched (never counted: that would read them all)
    frame: object = None  # the whole result as a DataFrame (--csv)


def run_statements(con: duckdb.DuckDBPyConnection, sql: str, keep: int | None = None,
                   frames: bool = False) -> list[tuple[str, Result]]:
    """Every statement of `sql`, in order: (its text, its result). `frames`: the whole result as
    a DataFrame (for --csv); else the first `keep` rows (None: all), fetched from DuckDB's stream
    so that a huge result costs what is printed, not what it holds."""
    try:
        statements = con.extract_statements(sql)
    except duckdb.Error as error:
        raise QueryError(str(error).splitlines()[0]) from None
    if not statements:
        raise QueryError("no SQL statement given")
    results = []
    for number, statement in enumerate(statements, 1):
        text = statement.query.strip().rstrip(";").strip()
        try:
            cursor = con.execute(text)
            description = cursor.description or []
            result = Result([str(column[0]) for column in description], [str(column[1]) for column in description])
            if frames:
                result.frame = cursor.df()
                result.frame.attrs["sql_types"] = dict(zip(result.frame.columns, result.types))  # the CSV readers
            elif keep is None:
                result.rows = cursor.fetchall()
            else:
                fetched = cursor.fetchmany(keep + 1)  # one more than shown: whether there are more
                result.rows, result.more = fetched[:keep], len(fetched) > keep
        except duckdb.Error as error:
            where = f"statement {number} of {len(statements)}: " if len(statements) > 1 else ""
            raise QueryError(where + _explain(error)) from None
        results.append((text, result))
    return results


def _explain(error: duckdb.Error) -> str:
    message = str(error).splitlines()[0]
    if isinstance(error, duckdb.PermissionException) or "file system operations are disabled" in message:
        return f"{message} (the query command only reads the warehouse; use --csv FILE to save a result)"
    if "read-only" in message:
        return f"{message} (the query command only reads the warehouse)"
    return message


# What a CSV must never replace: a database, a Parquet mart, a GeoPackage (by name or by bytes).
PROTECTED_SUFFIXES = (".duckdb", ".db", ".wal", ".parquet", ".gpkg")
PROTECTED_MAGIC = ((8, b"DUCK"), (0, b"PAR1"), (0, b"SQLite format 3\x00"))
RELEASE_MANIFEST = "RELEASE.json"


def _is_warehouse_folder(folder: Path) -> bool:
    """A published warehouse folder (a `current` link and `releases/`) or a release (RELEASE.json)."""
    return (folder / RELEASE_MANIFEST).exists() or (
        (folder / "current").is_symlink() and (folder / "releases").is_dir())


def _looks_protected(path: Path) -> bool:
    if path.name.lower().endswith(PROTECTED_SUFFIXES):
        return True
    if not path.is_file():
        return False
    with open(path, "rb") as handle:
        head = handle.read(32)
    return any(head[offset:offset + len(magic)] == magic for offset, magic in PROTECTED_MAGIC)


def refuse_target_inside(target: Path, warehouse: Path) -> None:
    """The CSV lands only where it may: never inside the given warehouse's folder, nor inside any
    published warehouse folder or release, nor over a database, Parquet file or GeoPackage. Links
    are resolved before comparing, so a link to a protected file protects nothing."""
    real_target = Path(os.path.realpath(target))
    folder = Path(os.path.realpath(warehouse.parent))
    for root in (folder, Path(os.path.realpath(warehouse)).parent):
        if real_target == root or root in real_target.parents:
            raise QueryError(f"refusing to write {target}: it is inside the warehouse folder {warehouse.parent}; "
                             "choose a file elsewhere")
    for ancestor in real_target.parents:
        if _is_warehouse_folder(ancestor):
            raise QueryError(f"refusing to write {target}: it is inside the published warehouse or release "
                             f"{ancestor}; choose a file elsewhere")
    if _looks_protected(Path(target)) or _looks_protected(real_target):
        raise QueryError(f"refusing to write {target}: it is (or would replace) a database, Parquet or "
                         "GeoPackage file; give the CSV a .csv name outside any warehouse")
    if real_target.exists() and not real_target.is_file():
        raise QueryError(f"refusing to write {target}: it exists and is not a regular file")


def csv_values(frame):
    """Flags as `true`/`false` (pandas writes Python's `True`/`False`), missing ones empty."""
    flags = [name for name, kind in column_kinds(frame.attrs.get("sql_types", {})).items() if kind == "flag"]
    if not flags:
        return frame
    spelled = frame.copy()
    for name in flags:
        spelled[name] = frame[name].map({True: "true", False: "false"})
    return spelled


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_text_atomically(target: Path, write) -> None:
    """Temporary file in the target's folder, then one rename: never a half-written file. It
    gets the mode any new file of the user gets (mkstemp's is 0600, private to the owner)."""
    folder = target.parent if str(target.parent) else Path(".")
    if not folder.is_dir():
        raise QueryError(f"cannot write {target}: folder {folder} does not exist")
    handle, temporary = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=folder)
    try:
        os.fchmod(handle, 0o666 & ~_umask())
        with os.fdopen(handle, "w", encoding="utf-8", newline="") as out:
            write(out)
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def write_csv(frame, target: Path, excel: bool) -> None:
    def write(out):
        if excel:
            out.write(UTF8_BOM)
        csv_values(frame).to_csv(out, index=False, lineterminator="\n")

    write_text_atomically(target, write)


MISSING = "NULL"  # as DuckDB's own shell prints a missing value, in a column of any type, nested too
MISSING_HELP = (
    f"Missing values: printed as {MISSING} in every column, whatever its type (integers such as deaths, "
    f"decimals, text, dates, flags), and inside lists and structs ([1, {MISSING}]; the text 'NULL' "
    "there prints quoted); a floating-point NaN, which is a value and not a missing one, prints as nan. "
    "In --csv a missing value is an empty field, which R and Stata read as missing."
)


def _blob(value: bytes) -> str:
    return "".join(chr(b) if 32 <= b < 127 and b != 92 else f"\\x{b:02X}" for b in value)


def shown_value(value, sql_type: str = "", nested: bool = False) -> str:
    """A value as printed: NULL for a missing one at any depth, flags true/false, lists as
    [1, 2], structs and maps as {'key': value}, text inside them quoted (so the text 'NULL'
    and a missing value differ), FLOAT at its own precision."""
    if value is None:
        return MISSING
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and sql_type == "FLOAT":
        return str(np.float32(value))
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(shown_value(item, nested=True) for item in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{shown_value(key, nested=True)}: {shown_value(item, nested=True)}"
                               for key, item in value.items()) + "}"
    if isinstance(value, (bytes, bytearray, memoryview)):
        value = _blob(bytes(value))
    elif not isinstance(value, str):
        return str(value)
    return "'" + value.replace("'", "''") + "'" if nested else value


def as_table(columns: list[str], types: list[str], rows: list[tuple]) -> str:
    """Columns aligned, numbers to the right and everything else to the left (a long
    description then pads nothing after it), every missing value printed the same way."""
    kinds = [column_kinds({"column": sql_type})["column"] for sql_type in types]
    cells = [[shown_value(value, sql_type) for value, sql_type in zip(row, types)] for row in rows]
    widths = [max([len(name), *(len(row[i]) for row in cells)]) for i, name in enumerate(columns)]

    def line(values):
        return "  ".join(value.rjust(width) if kind == "number" else value.ljust(width)
                         for value, width, kind in zip(values, widths, kinds)).rstrip()

    return "\n".join([line(columns), *(line(row) for row in cells)])


def print_result(text: str, result: Result, header: bool) -> None:
    if header:
        first = " ".join(text.split())
        print(f"-- {first[:100]}{'...' if len(first) > 100 else ''}")
    if result.columns:
        print(as_table(result.columns, result.types, result.rows))
    shown = len(result.rows)
    if result.more:
        print(f"more than {shown} rows (showing the first {shown}; --all prints every row, --csv FILE saves them)")
    else:
        print(f"{shown} row{'s' if shown != 1 else ''}")


def refuse_same_file(csv_path: Path, scripts: list[Path]) -> None:
    """`--readers` writes its scripts beside the CSV: never one over the CSV it reports writing
    (`--csv out.R` was replaced by the R script). Compared after resolving links and ignoring
    case, as a case-insensitive file system (macOS, Windows) would."""
    def key(path: Path) -> str:
        return os.path.realpath(path).lower()

    for script in scripts:
        if key(script) == key(csv_path):
            raise QueryError(
                f"--readers writes the Stata and R scripts {csv_path.with_suffix('.do')} and "
                f"{csv_path.with_suffix('.R')} beside the CSV, and {script} would replace the CSV "
                f"{csv_path}; give the CSV another name, e.g. {csv_path.with_suffix('.csv')}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m infant_mortality.query", description=__doc__.split("\n")[0],
                                     epilog=MISSING_HELP)
    parser.add_argument("sql", help="one or more statements, e.g. \"select * from marts.fct_area_year_rates limit 5\"")
    parser.add_argument("--warehouse", type=Path, default=None,
                        help=f"the DuckDB file (default: $IMR_DUCKDB_PATH or this project's {DEFAULT_PUBLISHED})")
    parser.add_argument("--csv", type=Path, help="write the result to this CSV file instead of printing it")
    parser.add_argument("--excel", action="store_true",
                        help="with --csv: start the file with a UTF-8 byte-order mark so Excel shows accents and ñ")
    parser.add_argument("--readers", action="store_true",
                        help="with --csv FILE: also write FILE's .do (Stata) and .R, which read it with every column's type")
    shown = parser.add_mutually_exclusive_group()
    shown.add_argument("--limit", type=int, default=DEFAULT_LIMIT, help=f"rows printed per result (default {DEFAULT_LIMIT})")
    shown.add_argument("--all", action="store_true", help="print every row")
    args = parser.parse_args(argv)

    warehouse = (args.warehouse or default_warehouse()).absolute()
    try:
        if args.excel and not args.csv:
            raise QueryError("--excel applies to --csv FILE")
        if args.readers and (not args.csv or args.excel):
            raise QueryError("--readers applies to --csv FILE without --excel (Stata and R read the plain UTF-8 file)")
        readers = [(args.csv.with_suffix(".do"), stata_do), (args.csv.with_suffix(".R"), r_script)] if args.readers else []
        if readers:
            refuse_same_file(args.csv, [path for path, _ in readers])
        for target in [args.csv, *(path for path, _ in readers)] if args.csv else []:
            refuse_target_inside(target, warehouse)
        limit = None if args.all else max(args.limit, 0)
        con = connect(warehouse)
        try:
            results = run_statements(con, args.sql, keep=limit, frames=bool(args.csv))
        finally:
            con.close()
        if args.csv:
            if len(results) != 1:
                raise QueryError(f"--csv writes one result, and {len(results)} statements were given")
            frame = results[0][1].frame
            write_csv(frame, args.csv, args.excel)
            print(f"{len(frame)} rows written to {args.csv}"
                  + (" (UTF-8 with byte-order mark, for Excel)" if args.excel else " (UTF-8; --excel for Excel)"))
            for path, script in readers:
                try:
                    code = script(args.csv.name, frame.attrs["sql_types"])
                except ValueError as error:
                    raise QueryError(str(error)) from None
                write_text_atomically(path, lambda out: out.write(code))
                print(f"{path} reads it with every column's type")
            return 0
        for number, (text, result) in enumerate(results):
            if number:
                print()
            print_result(text, result, header=len(results) > 1)
        return 0
    except QueryError as error:
        print(f"query: {error}", file=sys.stderr)
        return 1
    except OSError as error:
        print(f"query: {error.strerror or error} ({error.filename or ''})", file=sys.stderr)
        return 1


if __name__ == "__main__":
    raise SystemExit(main())
