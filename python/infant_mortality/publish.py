"""Build the warehouse aside, test it, and publish it atomically (`make warehouse`, `make docs`).

DuckDB allows one writer, and any other process holding the file open (even read-only, even an
idle BI connection pool) makes `dbt build` fail with "Could not set lock on file". So the
published file is never built in place:

1. `dbt build` (models, seeds, unit and data tests) runs as a subprocess, from the repository
   root, into a fresh file `<published folder>/.build/<published name>`. Fresh each time: the
   profile's `storage_compatibility_version` (readable by DuckDB 1.4+) only applies to new
   files. The same basename keeps the catalog name (`infant_mortality`) stable for consumers.
2. Only if the whole build and every test passed, the build file is made self-contained: the
   `staging` schema is dropped (its views read the raw CSV files by paths relative to the
   repository root, so they break for any reader started elsewhere; the tables built from them
   are kept). Every remaining view is then checked to bind from an unrelated directory.
3. Every table of schema `marts` is exported to Parquet in a temporary folder.
4. The connection is closed (DuckDB checkpoints, no `.wal` is left) and the build file is
   `os.replace()`d onto the published path, then each Parquet file onto `<folder>/parquet/`.
   Both are atomic renames on one filesystem. Readers that have the old file open keep reading
   the old data (on Linux the old inode stays valid); new connections see the new build.

A failed build prints dbt's failure lines, exits non-zero and leaves the published file and the
Parquet files untouched (the failed build file stays under `.build/` for inspection).

`--docs-only` builds models and seeds (no tests) into a scratch file under `.build/docs/`, runs
`dbt docs generate --static` against it and prints the path of the self-contained HTML page. It
never opens the published file.

Paths: the published file is `$IMR_DUCKDB_PATH` if set, else `warehouse/infant_mortality.duckdb`;
relative paths resolve against the repository root (as in `profiles/profiles.yml`). dbt's
artifacts go to `target/` (or `$DBT_TARGET_PATH`).
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import duckdb
import yaml

DEFAULT_PUBLISHED = "warehouse/infant_mortality.duckdb"
MARTS_SCHEMA = "marts"
# Views here read the raw files by relative path; they are not part of the published file.
BUILD_ONLY_SCHEMAS = ("staging",)

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_TIMESTAMP = re.compile(r"^\d\d:\d\d:\d\d  ")


class PublishError(RuntimeError):
    """A problem that stops the publish; the message is shown to the user as is."""


@dataclass(frozen=True)
class Paths:
    project_dir: Path
    published: Path
    build_dir: Path
    build_file: Path
    parquet_dir: Path
    target_dir: Path

    @classmethod
    def resolve(cls, project_dir: Path) -> "Paths":
        published = Path(os.environ.get("IMR_DUCKDB_PATH") or DEFAULT_PUBLISHED)
        if not published.is_absolute():
            published = project_dir / published
        target = Path(os.environ.get("DBT_TARGET_PATH") or _project_target_path(project_dir))
        if not target.is_absolute():
            target = project_dir / target
        build_dir = published.parent / ".build"
        return cls(
            project_dir=project_dir,
            published=published,
            build_dir=build_dir,
            build_file=build_dir / published.name,
            parquet_dir=published.parent / "parquet",
            target_dir=target,
        )


def _project_target_path(project_dir: Path) -> str:
    config = yaml.safe_load((project_dir / "dbt_project.yml").read_text()) or {}
    return config.get("target-path", "target")


def _default_project_dir() -> Path:
    cwd = Path.cwd()
    if (cwd / "dbt_project.yml").exists():
        return cwd
    return Path(__file__).resolve().parents[2]  # python/infant_mortality/publish.py -> repo root


def _dbt_executable() -> str:
    beside = Path(sys.executable).with_name("dbt")
    if beside.exists():
        return str(beside)
    found = shutil.which("dbt")
    if not found:
        raise PublishError("dbt executable not found (expected next to the Python interpreter or on PATH)")
    return found


def _log(message: str = "", err: bool = False) -> None:
    print(message, file=sys.stderr if err else sys.stdout, flush=True)


# --------------------------------------------------------------------------------------------
# Locks


@contextmanager
def _exclusive_publish(build_dir: Path):
    """Only one publish (or docs build) at a time per published folder."""
    build_dir.mkdir(parents=True, exist_ok=True)
    with open(build_dir / ".publish.lock", "w") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            raise PublishError(f"another publish is already running for {build_dir.parent}") from None
        yield


def held_by_writer(path: Path) -> bool:
    """True when another process has `path` open read-write in DuckDB.

    DuckDB takes a POSIX write lock on the whole file for a read-write connection and a read
    lock for a read-only one, so a shared lock attempt fails only against a writer. Replacing
    the file under a writer would be wrong: it keeps writing to the old file and to
    `<path>.wal`, which the next opener would replay onto the new file.
    """
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return False
    try:
        fcntl.lockf(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)  # also releases our probe lock
    return False


def _refuse_if_writer(published: Path) -> None:
    if held_by_writer(published):
        raise PublishError(
            f"{published} is open READ-WRITE in another process; close it (readers must use "
            "read_only=True / ATTACH ... (READ_ONLY)) and run again. The published file was not touched."
        )


# --------------------------------------------------------------------------------------------
# dbt


def _run_dbt(args: list[str], paths: Paths, database: Path, quiet: bool) -> tuple[int, list[str]]:
    """Run the dbt CLI from the project root against `database`; stream and return its output."""
    command = [_dbt_executable(), *args, "--profiles-dir", "profiles"]
    env = {**os.environ, "IMR_DUCKDB_PATH": str(database)}
    if not sys.stdout.isatty():
        env.setdefault("DBT_USE_COLORS", "false")
    lines: list[str] = []
    with subprocess.Popen(
        command,
        cwd=paths.project_dir,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        bufsize=1,
    ) as process:
        assert process.stdout is not None
        for line in process.stdout:
            lines.append(line.rstrip("\n"))
            if not quiet:
                print(line, end="", flush=True)
    return process.returncode, lines


def failure_lines(output: list[str], limit: int = 60) -> list[str]:
    """dbt's own account of what failed: its closing summary, else the error lines."""
    clean = [_TIMESTAMP.sub("", _ANSI.sub("", line)).rstrip() for line in output]
    for i in range(len(clean) - 1, -1, -1):
        if clean[i].startswith("Completed with"):
            tail = [line for line in clean[i:] if line.strip()]
            return tail[:limit]
    errors = [i for i, line in enumerate(clean) if re.search(r"error|fail", line, re.IGNORECASE)]
    if errors:
        start = max(errors[0] - 1, 0)
        return [line for line in clean[start:] if line.strip()][:limit]
    return [line for line in clean if line.strip()][-20:]


def _fresh(database: Path) -> None:
    database.parent.mkdir(parents=True, exist_ok=True)
    for stale in (database, database.with_name(database.name + ".wal")):
        stale.unlink(missing_ok=True)


def _dbt_vars_args(dbt_vars: str | None) -> list[str]:
    if not dbt_vars:
        return []
    try:
        parsed = yaml.safe_load(dbt_vars)
    except yaml.YAMLError as error:
        raise PublishError(f"--vars is not valid YAML/JSON: {error}") from None
    if not isinstance(parsed, dict):
        raise PublishError("--vars must be a mapping, e.g. '{unreliable_below_deaths: 10}'")
    return ["--vars", dbt_vars]


# --------------------------------------------------------------------------------------------
# Making the build file publishable


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


_VIEW_CHECK = """
import json, sys, duckdb
con = duckdb.connect(sys.argv[1], read_only=True)
broken = []
for schema, view in con.execute(
    "select schema_name, view_name from duckdb_views() "
    "where not internal and database_name = current_database()"
).fetchall():
    try:
        con.execute('select * from "%s"."%s" limit 0' % (schema.replace('"', '""'), view.replace('"', '""')))
    except duckdb.Error as error:
        broken.append("%s.%s: %s" % (schema, view, str(error).splitlines()[0]))
con.close()
print(json.dumps(broken))
"""


def _check_views_bind_anywhere(database: Path) -> None:
    """Every view left in the file must work for a reader started in another directory."""
    with tempfile.TemporaryDirectory(prefix="imr-viewcheck-") as elsewhere:
        result = subprocess.run(
            [sys.executable, "-c", _VIEW_CHECK, str(database)],
            cwd=elsewhere, capture_output=True, text=True,
        )
    if result.returncode != 0:
        raise PublishError(f"could not check the views of the build file:\n{result.stderr[-2000:]}")
    broken = json.loads(result.stdout.strip().splitlines()[-1])
    if broken:
        raise PublishError(
            "views in the build would break for readers outside the repository root "
            "(they read files by relative path); materialize them as tables or move them to "
            "the staging schema:\n  " + "\n  ".join(broken)
        )


@dataclass(frozen=True)
class Mart:
    name: str
    rows: int
    parquet_name: str


def finalize_build(database: Path, parquet_tmp: Path) -> tuple[list[Mart], str]:
    """Drop build-only schemas, export the marts to Parquet; return the marts and storage version."""
    if parquet_tmp.exists():
        shutil.rmtree(parquet_tmp)
    parquet_tmp.mkdir(parents=True)
    con = duckdb.connect(str(database))
    try:
        for schema in BUILD_ONLY_SCHEMAS:
            con.execute(f"drop schema if exists {_ident(schema)} cascade")
        names = [
            row[0]
            for row in con.execute(
                "select table_name from duckdb_tables() "
                "where database_name = current_database() and schema_name = ? order by table_name",
                [MARTS_SCHEMA],
            ).fetchall()
        ]
        if not names:
            raise PublishError(f"the build has no tables in schema {MARTS_SCHEMA!r}; nothing to publish")
        marts = []
        for name in names:
            relation = f"{_ident(MARTS_SCHEMA)}.{_ident(name)}"
            (rows,) = con.execute(f"select count(*) from {relation}").fetchone()
            target = parquet_tmp / f"{name}.parquet"
            con.execute(f"copy {relation} to {_literal(str(target))} (format parquet, compression zstd)")
            marts.append(Mart(name, rows, target.name))
        tags = con.execute(
            "select tags from duckdb_databases() where database_name = current_database()"
        ).fetchone()[0]
        storage = (tags or {}).get("storage_version", "unknown")
        con.execute("checkpoint")
    finally:
        con.close()
    wal = database.with_name(database.name + ".wal")
    if wal.exists():
        raise PublishError(f"{wal} remained after closing the build; refusing to publish a partial file")
    _check_views_bind_anywhere(database)
    return marts, storage


def _swap_in(paths: Paths, parquet_tmp: Path, marts: list[Mart]) -> None:
    """Atomic renames: the database file, then each Parquet file; stale Parquet files go."""
    paths.published.parent.mkdir(parents=True, exist_ok=True)
    _refuse_if_writer(paths.published)
    # A .wal beside the published file belongs to the old file (a crashed writer); replayed onto
    # the new file it would corrupt it.
    stale_wal = paths.published.with_name(paths.published.name + ".wal")
    if stale_wal.exists():
        _log(f"Removing stale {stale_wal} (left by a writer of the previous file)")
        stale_wal.unlink()
    os.replace(paths.build_file, paths.published)

    paths.parquet_dir.mkdir(parents=True, exist_ok=True)
    keep = set()
    for mart in marts:
        os.replace(parquet_tmp / mart.parquet_name, paths.parquet_dir / mart.parquet_name)
        keep.add(mart.parquet_name)
    for old in paths.parquet_dir.glob("*.parquet"):
        if old.name not in keep:
            old.unlink()
    shutil.rmtree(parquet_tmp, ignore_errors=True)


def _display(path: Path, project_dir: Path) -> str:
    try:
        return str(path.relative_to(project_dir))
    except ValueError:
        return str(path)


# --------------------------------------------------------------------------------------------
# Commands


def publish(paths: Paths, dbt_vars: str | None, quiet: bool) -> int:
    started = time.monotonic()
    vars_args = _dbt_vars_args(dbt_vars)
    with _exclusive_publish(paths.build_dir):
        _refuse_if_writer(paths.published)  # fail fast, before spending a build
        _fresh(paths.build_file)
        _log(f"Building into {_display(paths.build_file, paths.project_dir)} (dbt build: models, seeds, tests)")
        code, output = _run_dbt(["build", *vars_args], paths, paths.build_file, quiet)
        built = time.monotonic()
        if code != 0:
            _log("", err=True)
            _log(f"dbt build FAILED (exit code {code}); nothing was published.", err=True)
            _log(f"Published file left untouched: {paths.published}", err=True)
            _log(f"Failed build kept for inspection: {paths.build_file}", err=True)
            _log("Why (dbt):", err=True)
            for line in failure_lines(output):
                _log(f"  {line}", err=True)
            return 1
        parquet_tmp = paths.build_dir / "parquet.tmp"
        marts, storage = finalize_build(paths.build_file, parquet_tmp)
        # --- Maps (issue 14): the GeoPackage is written from the tested build file and renamed
        # into warehouse/gis/ right after the database and Parquet swap.
        from infant_mortality.gis import write_geopackage
        gpkg_tmp = write_geopackage(paths.build_file, paths.build_dir / "infant_mortality.gpkg")
        _swap_in(paths, parquet_tmp, marts)
        (paths.published.parent / "gis").mkdir(exist_ok=True)
        os.replace(gpkg_tmp, paths.published.parent / "gis" / gpkg_tmp.name)
        # --- end Maps (issue 14)
    finished = time.monotonic()

    size_mb = paths.published.stat().st_size / 1e6
    _log("")
    _log(f"Published {paths.published} ({size_mb:.1f} MB, storage {storage}, staging views dropped)")
    _log(f"Parquet   {paths.parquet_dir}/")
    width = max(len(m.name) for m in marts)
    for mart in marts:
        _log(f"  {MARTS_SCHEMA}.{mart.name:<{width}}  {mart.rows:>10,} rows")
    _log(
        f"Wall time {finished - started:.1f} s (dbt build {built - started:.1f} s, "
        f"publish {finished - built:.1f} s). Readers: open read-only; reconnect to see this build."
    )
    return 0


def docs_only(paths: Paths, dbt_vars: str | None, quiet: bool) -> int:
    started = time.monotonic()
    vars_args = _dbt_vars_args(dbt_vars)
    scratch = paths.build_dir / "docs" / paths.published.name  # same basename: same catalog name
    with _exclusive_publish(paths.build_dir):
        _fresh(scratch)
        try:
            _log(f"Building models and seeds into scratch {_display(scratch, paths.project_dir)} for the catalog")
            code, output = _run_dbt(
                ["build", "--exclude-resource-type", "test", "--exclude-resource-type", "unit_test", *vars_args],
                paths, scratch, quiet,
            )
            if code == 0:
                code, output = _run_dbt(["docs", "generate", "--static", *vars_args], paths, scratch, quiet)
        finally:
            shutil.rmtree(scratch.parent, ignore_errors=True)
    if code != 0:
        _log("", err=True)
        _log(f"dbt docs FAILED (exit code {code}). Why (dbt):", err=True)
        for line in failure_lines(output):
            _log(f"  {line}", err=True)
        return 1
    page = paths.target_dir / "static_index.html"
    if not page.exists():
        _log(f"dbt docs generate succeeded but {page} is missing", err=True)
        return 1
    _log("")
    _log(f"Docs ({time.monotonic() - started:.1f} s): {page}")
    _log("  (one self-contained HTML file, no network needed; open it in a browser)")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m infant_mortality.publish",
        description="Build the warehouse with dbt into a side file, test it, and atomically publish "
        "it (plus one Parquet file per mart) so that open readers are never blocked.",
    )
    parser.add_argument("--docs-only", action="store_true",
                        help="only generate the static dbt docs site under target/ (never opens the published file)")
    parser.add_argument("--vars", metavar="YAML", help="passed to dbt as --vars, e.g. '{unreliable_below_deaths: 10}'")
    parser.add_argument("--project-dir", type=Path, default=None,
                        help="the dbt project (default: the working directory if it has dbt_project.yml, "
                        "else this repository)")
    parser.add_argument("--quiet", action="store_true", help="do not echo dbt's progress (failures are still shown)")
    args = parser.parse_args(argv)

    project_dir = (args.project_dir or _default_project_dir()).resolve()
    if not (project_dir / "dbt_project.yml").exists():
        print(f"error: no dbt_project.yml in {project_dir}", file=sys.stderr)
        return 2
    paths = Paths.resolve(project_dir)
    try:
        if args.docs_only:
            return docs_only(paths, args.vars, args.quiet)
        return publish(paths, args.vars, args.quiet)
    except PublishError as error:
        print(f"\npublish FAILED: {error}", file=sys.stderr, flush=True)
        return 1


if __name__ == "__main__":
    sys.exit(main())
