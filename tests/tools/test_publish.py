"""`python -m infant_mortality.publish` (`make warehouse`, `make docs`) with real processes.

Every publish here goes to a temporary published path through IMR_DUCKDB_PATH (with its own
dbt target and log folders), never to warehouse/. One publish is shared by the module; the
tests that need their own publish start from a copy of it.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace

import duckdb
import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.pool import NullPool

from conftest import DBT, REPO_ROOT, query
from infant_mortality.tools.publish import failure_lines

NAME = "infant_mortality.duckdb"
# A virtual environment with DuckDB 1.4.x (the oldest reader we promise), cached across runs
# under the repository (git-ignored); delete the folder to rebuild it.
DUCKDB14_VENV = REPO_ROOT / ".venv-duckdb14"


def run_publish(published: Path, *args: str, env_extra: dict | None = None) -> subprocess.CompletedProcess:
    """The real CLI, from the repository root, publishing to `published`."""
    work = published.parent.parent
    env = {
        **os.environ,
        "IMR_DUCKDB_PATH": str(published),
        "DBT_TARGET_PATH": str(work / "dbt_target"),
        "DBT_LOG_PATH": str(work / "dbt_logs"),
        **(env_extra or {}),
    }
    return subprocess.run(
        [sys.executable, "-m", "infant_mortality.publish", "--quiet", *args],
        cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=300,
    )


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def copy_published(source: Path, destination_root: Path) -> Path:
    """A copy of a published warehouse folder, links and releases as they are."""
    folder = destination_root / "warehouse"
    shutil.copytree(source.parent, folder, symlinks=True, ignore=shutil.ignore_patterns(".build"),
                    dirs_exist_ok=True)
    return folder / NAME


def release_state(folder: Path) -> dict:
    """Independent of publish.check_release: where every reader path leads, and whether the
    database and the Parquet files there hold the same marts, row for row counted."""
    current = folder / "current"
    release = current.resolve()
    db = (folder / NAME).resolve()
    parquet = (folder / "parquet").resolve()
    assert db == release / NAME and parquet == release / "parquet", (db, parquet, release)
    with duckdb.connect(str(db), read_only=True) as con:
        marts = dict(con.execute("select table_name, estimated_size from duckdb_tables() "
                                 "where schema_name = 'marts'").fetchall())
        for mart in marts:
            (rows,), = con.execute(f"select count(*) from marts.{mart}").fetchall()
            (in_parquet,), = con.execute(f"select count(*) from read_parquet('{parquet / (mart + '.parquet')}')").fetchall()
            assert rows == in_parquet, mart
            kv = con.execute("select decode(value) from parquet_kv_metadata(?) where decode(key) = 'imr_release_id'",
                             [str(parquet / f"{mart}.parquet")]).fetchall()
            assert kv == [(release.name,)], (mart, kv)
    assert sorted(p.stem for p in parquet.glob("*.parquet")) == sorted(marts)
    return {"release": release.name, "marts": sorted(marts)}


def mart_names(path: Path) -> list[str]:
    return [r[0] for r in query(path, "select table_name from duckdb_tables() where schema_name = 'marts' "
                                      "order by table_name")]


class Holder:
    """Another process holding a DuckDB connection on a file, answering queries on demand."""

    SCRIPT = textwrap.dedent("""
        import sys, duckdb
        con = duckdb.connect(sys.argv[1], read_only=sys.argv[2] == "ro")
        print("ready", flush=True)
        for sql in sys.stdin:
            print(repr(con.execute(sql).fetchall()), flush=True)
    """)

    def __init__(self, path: Path, read_only: bool = True):
        self.process = subprocess.Popen(
            [sys.executable, "-c", self.SCRIPT, str(path), "ro" if read_only else "rw"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )
        assert self.process.stdout.readline().strip() == "ready"

    def query(self, sql: str):
        self.process.stdin.write(sql.replace("\n", " ") + "\n")
        self.process.stdin.flush()
        line = self.process.stdout.readline()
        assert line, "the holder process died"
        return eval(line)  # noqa: S307 - our own repr of a fetchall()

    def close(self) -> int:
        self.process.stdin.close()
        return self.process.wait(timeout=30)


# ---------------------------------------------------------------------------------------------
# The shared publish


@pytest.fixture(scope="module")
def published(published_warehouse) -> SimpleNamespace:
    """The session's publish (conftest): the real CLI into a temporary warehouse folder that did
    not exist before."""
    return published_warehouse


def test_publish_prints_a_summary_and_leaves_only_the_published_files(published):
    out = published.output
    assert f"Published {published.path}" in out
    assert "Wall time" in out
    for mart in ("dim_commune", "fct_area_year_rates", "audit_data_quality"):
        assert f"marts.{mart}" in out
    assert re.search(r"marts\.dim_commune\s+346 rows", out)
    assert not published.path.with_name(NAME + ".wal").exists()
    folder = published.path.parent
    # One release, nothing incoming; the reader paths are links into it.
    releases = sorted(p.name for p in (folder / "releases").iterdir())
    assert len(releases) == 1 and not releases[0].startswith("."), releases
    assert f"Release   {releases[0]}" in out
    assert os.readlink(folder / "current") == f"releases/{releases[0]}"
    assert os.readlink(published.path) == f"current/{NAME}"
    assert os.readlink(published.parquet) == "current/parquet"
    assert release_state(folder)["release"] == releases[0]
    # --check agrees, and the manifest lists every file with its SHA-256.
    check = run_publish(published.path, "--check")
    assert check.returncode == 0 and f"release {releases[0]}" in check.stdout, check.stderr
    manifest = json.loads((folder / "releases" / releases[0] / "RELEASE.json").read_text())
    assert manifest["files"][NAME]["sha256"] == sha256(published.path)
    assert manifest["marts"]["dim_commune"] == 346
    # dbt's artifacts are kept for `make docs` and state comparison.
    assert (published.target / "manifest.json").exists()


def test_every_publish_builds_at_one_path_so_the_next_reuses_dbts_parse(published, tmp_path):
    """dbt keys its partial parsing on the profile, database path included: a build into each
    new release folder re-parsed the whole project at every `make warehouse`. The publish builds
    at `.build/building/<name>` (gone once moved into the release), so a dbt command against
    that path with the publish's target folder finds the parse valid."""
    building = published.path.parent / ".build" / "building" / NAME
    assert not building.exists()
    target = tmp_path / "target"
    shutil.copytree(published.target, target)  # the session's folder stays as the publish left it
    env = {**os.environ, "IMR_DUCKDB_PATH": str(building), "DBT_TARGET_PATH": str(target),
           "DBT_LOG_PATH": str(tmp_path / "logs"), "DBT_USE_COLORS": "false"}
    result = subprocess.run([str(DBT), "parse", "--profiles-dir", "profiles"], cwd=REPO_ROOT, env=env,
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout[-3000:]
    assert "Unable to do partial parsing" not in result.stdout, result.stdout[-3000:]
    other = {**env, "IMR_DUCKDB_PATH": str(tmp_path / NAME)}  # and the check can fail
    result = subprocess.run([str(DBT), "parse", "--profiles-dir", "profiles"], cwd=REPO_ROOT, env=other,
                            capture_output=True, text=True)
    assert "Unable to do partial parsing because profile has changed" in result.stdout, result.stdout[-3000:]


def test_published_file_is_self_contained_for_readers_anywhere(published, tmp_path):
    """No staging views (relative CSV paths); every relation answers from another directory."""
    script = textwrap.dedent("""
        import json, sys, duckdb
        con = duckdb.connect(sys.argv[1], read_only=True)
        rels = con.execute("select schema_name, table_name from duckdb_tables() where database_name = current_database() "
                           "union all select schema_name, view_name from duckdb_views() "
                           "where not internal and database_name = current_database()").fetchall()
        counts = {f"{s}.{t}": con.execute(f'select count(*) from "{s}"."{t}"').fetchone()[0] for s, t in rels}
        print(json.dumps(counts))
    """)
    result = subprocess.run([sys.executable, "-c", script, str(published.path)], cwd=tmp_path,
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    counts = json.loads(result.stdout)
    assert not [name for name in counts if name.startswith("staging.")]
    assert counts["marts.dim_commune"] == 346
    assert counts["marts.fct_area_year_rates"] > 0
    assert counts["marts.fct_rates_commune_year"] == counts["marts.fct_area_year_rates"]  # the alias view
    assert query(published.path, "select count(*) from duckdb_schemas() where schema_name = 'staging'") == [(0,)]


def test_published_file_uses_the_duckdb_1_4_storage_format(published):
    (tags,), = query(published.path, "select tags from duckdb_databases() where database_name = current_database()")
    assert tags["storage_version"].startswith("v1.4.0")


def test_mart_and_column_descriptions_are_comments_in_the_database(published):
    manifest = json.loads((published.target / "manifest.json").read_text())
    marts = [node for node in manifest["nodes"].values()
             if node["resource_type"] == "model" and node["schema"] == "marts"]
    assert {"dim_commune", "fct_area_year_rates", "fct_rates_commune_year", "audit_data_quality"} <= {
        m["name"] for m in marts}
    tables = dict(query(published.path, "select table_name, comment from duckdb_tables() where schema_name = 'marts' "
                                        "union all select view_name, comment from duckdb_views() "
                                        "where schema_name = 'marts'"))
    columns = {(t, c): comment for t, c, comment in query(
        published.path, "select table_name, column_name, comment from duckdb_columns() where schema_name = 'marts'")}
    missing = []
    for mart in marts:
        name = mart["name"]
        if mart["description"] and (tables.get(name) or "").strip() != mart["description"].strip():
            missing.append(f"table {name}")
        for column in mart["columns"].values():
            if column["description"] and (columns.get((name, column["name"])) or "").strip() \
                    != column["description"].strip():
                missing.append(f"column {name}.{column['name']}")
    assert not missing, f"descriptions not persisted as comments: {missing}"
    assert "CUT commune code" in columns[("dim_commune", "commune_code")]


def test_parquet_files_have_the_same_rows_as_the_marts(published):
    marts = mart_names(published.path)
    assert sorted(p.stem for p in published.parquet.glob("*.parquet")) == marts
    with duckdb.connect(str(published.path), read_only=True) as con:
        for mart in marts:
            parquet = f"read_parquet('{published.parquet / (mart + '.parquet')}')"
            table = f"marts.{mart}"
            (n_table,), = con.execute(f"select count(*) from {table}").fetchall()
            (n_parquet,), = con.execute(f"select count(*) from {parquet}").fetchall()
            assert n_table == n_parquet, mart
            # Multiset equality, both ways (EXCEPT ALL treats NULLs as equal).
            for a, b in ((table, parquet), (parquet, table)):
                assert con.execute(f"select count(*) from (from {a} except all from {b})").fetchall() == [(0,)], mart
            table_types = con.execute(f"select column_name, column_type from (describe {table})").fetchall()
            parquet_types = con.execute(f"select column_name, column_type from (describe from {parquet})").fetchall()
            assert table_types == parquet_types, mart


def test_the_old_mart_name_is_a_view_with_the_same_rows_and_no_parquet_file(published):
    """fct_rates_commune_year, renamed fct_area_year_rates, stays as a deprecated alias: a view
    (no copy, no Parquet file of its own) with the mart's columns and rows."""
    assert query(published.path, "select view_name from duckdb_views() where schema_name = 'marts'") == [
        ("fct_rates_commune_year",)]
    assert "fct_rates_commune_year" not in mart_names(published.path)
    assert not (published.parquet / "fct_rates_commune_year.parquet").exists()
    assert (published.parquet / "fct_area_year_rates.parquet").exists()
    with duckdb.connect(str(published.path), read_only=True) as con:
        old, new = "marts.fct_rates_commune_year", "marts.fct_area_year_rates"
        assert con.execute(f"describe {old}").fetchall() == con.execute(f"describe {new}").fetchall()
        for a, b in ((old, new), (new, old)):
            assert con.execute(f"select count(*) from (from {a} except all from {b})").fetchall() == [(0,)]
        assert con.execute(f"select count(*) from {old}").fetchone()[0] > 0
        (comment,), = con.execute("select comment from duckdb_views() where view_name = 'fct_rates_commune_year'"
                                  ).fetchall()
    assert "Deprecated alias of `fct_area_year_rates`" in comment


def test_superset_style_sqlalchemy_engine_reads_a_mart_and_releases_the_file(published):
    engine = create_engine(f"duckdb:///{published.path}", poolclass=NullPool,
                           connect_args={"read_only": True})
    with engine.connect() as connection:
        rows = connection.execute(text(
            "select commune_name from marts.dim_commune where commune_code = '13101'")).fetchall()
    engine.dispose()
    assert rows == [("Santiago",)]
    # With NullPool nothing stays open: another process can even open the file read-write.
    writer = Holder(published.path, read_only=False)
    assert writer.query("select count(*) from marts.dim_commune") == [(346,)]
    assert writer.close() == 0


@pytest.fixture(scope="session")
def duckdb14_python() -> Path:
    """python of a separate venv with duckdb 1.4.x (needs PyPI the first time; then cached)."""
    venv = DUCKDB14_VENV / "venv"
    python = venv / "bin" / "python"
    stamp = DUCKDB14_VENV / "ready"
    DUCKDB14_VENV.mkdir(exist_ok=True)
    with open(DUCKDB14_VENV / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # parallel test runs create it once
        if not stamp.exists():
            subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
            install = subprocess.run(
                [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "duckdb==1.4.*"],
                capture_output=True, text=True,
            )
            assert install.returncode == 0, f"pip install duckdb==1.4.* failed (needs PyPI):\n{install.stderr}"
            stamp.touch()
    return python


def test_published_file_opens_in_duckdb_1_4(published, duckdb14_python):
    script = textwrap.dedent("""
        import sys, duckdb
        con = duckdb.connect(sys.argv[1], read_only=True)
        print(duckdb.__version__)
        print(con.execute("select count(*) from marts.dim_commune").fetchone()[0])
        print(con.execute("select count(*) from marts.fct_area_year_rates").fetchone()[0])
    """)
    result = subprocess.run([str(duckdb14_python), "-c", script, str(published.path)],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    version, communes, rates = result.stdout.split()
    assert version.startswith("1.4.")
    assert int(communes) == 346
    assert int(rates) == query(published.path, "select count(*) from marts.fct_area_year_rates")[0][0]


# ---------------------------------------------------------------------------------------------
# Publishing again, with readers and writers around


UNRELIABLE = "select count(*) from marts.fct_area_year_rates where is_unreliable"


@pytest.mark.e2e  # a whole user command: a second full publish, while a reader holds the file
def test_publish_succeeds_while_a_reader_holds_the_file_and_new_connections_see_the_new_build(
        published, tmp_path):
    path = copy_published(published.path, tmp_path)
    reader = Holder(path, read_only=True)
    try:
        before = reader.query(UNRELIABLE)  # built with unreliable_below_deaths = 20
        inode_before = path.stat().st_ino
        result = run_publish(path, "--vars", '{"unreliable_below_deaths": 5}')
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
        # The open reader is unharmed: it still answers, from the build it opened.
        assert reader.query(UNRELIABLE) == before
        assert reader.query("select count(*) from marts.dim_commune") == [(346,)]
    finally:
        assert reader.close() == 0
    assert path.stat().st_ino != inode_before
    after = query(path, UNRELIABLE)
    assert after[0][0] < before[0][0], "a new connection must see the build with the lower threshold"
    # The Parquet files were replaced too.
    parquet = path.parent / "parquet" / "fct_area_year_rates.parquet"
    with duckdb.connect() as con:
        assert con.execute(f"select count(*) from read_parquet('{parquet}') where is_unreliable").fetchall() == after


@pytest.mark.e2e  # fault injection
def test_failed_build_leaves_the_published_files_untouched_and_says_why(published, tmp_path):
    path = copy_published(published.path, tmp_path)
    parquet_dir = path.parent / "parquet"
    hashes_before = {p.name: sha256(p) for p in [path, *parquet_dir.iterdir()]}
    # A faulty input that must stop the build: a copy of the raw files with one INE row twice.
    raw = tmp_path / "raw"
    shutil.copytree(REPO_ROOT / "data" / "raw", raw)
    broken = raw / "ine_vital_statistics_chile_2010_2019.csv"
    lines = broken.read_text(encoding="utf-8").splitlines(keepends=True)
    broken.chmod(0o644)
    broken.write_text("".join(lines[:3] + lines[2:]), encoding="utf-8")  # line 4 repeats line 3

    result = run_publish(path, "--vars", json.dumps({"raw_data_dir": str(raw)}))

    assert result.returncode != 0
    assert "dbt build FAILED" in result.stderr
    assert "Published file left untouched" in result.stderr
    assert f"Duplicated row in {broken} line 4: same key as line 3" in result.stderr  # dbt's error, via publish
    assert "Traceback" not in result.stderr
    assert {p.name: sha256(p) for p in [path, *parquet_dir.iterdir()]} == hashes_before
    # No large leftover: the failed build's folder is gone.
    assert [p.name for p in (path.parent / "releases").iterdir()] == [release_state(path.parent)["release"]]


def test_publish_refuses_while_a_writer_holds_the_published_file(published, tmp_path):
    path = copy_published(published.path, tmp_path)
    before = sha256(path)
    writer = Holder(path, read_only=False)
    try:
        result = run_publish(path)
    finally:
        assert writer.close() == 0
    assert result.returncode != 0
    assert "READ-WRITE" in result.stderr
    assert "Building into" not in result.stdout  # refused before spending a build
    assert sha256(path) == before


@pytest.mark.e2e  # a whole user command: `make docs` (dbt parses, compiles every node and reads the catalog)
def test_docs_only_generates_static_docs_without_opening_the_published_file(published, tmp_path):
    reader = Holder(published.path, read_only=True)  # would block any dbt run on that file
    before = sha256(published.path)
    target = tmp_path / "docs_target"
    try:
        result = run_publish(published.path, "--docs-only", env_extra={"DBT_TARGET_PATH": str(target)})
    finally:
        assert reader.close() == 0
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    page = target / "static_index.html"
    assert str(page) in result.stdout
    html = page.read_text()
    assert "fct_area_year_rates" in html and "dim_commune" in html
    assert (target / "catalog.json").exists()
    assert sha256(published.path) == before
    assert not (published.path.parent / ".build" / "docs").exists()


# ---------------------------------------------------------------------------------------------
# Pure helpers


def test_failure_lines_keep_dbt_closing_summary_without_colours_or_timestamps():
    output = [
        "\x1b[0m20:31:18  1 of 2 START sql view model staging.stg_x ........ [RUN]",
        "\x1b[0m20:31:18  1 of 2 ERROR creating sql view model staging.stg_x ... [\x1b[31mERROR\x1b[0m in 0.02s]",
        "\x1b[0m20:31:18  ",
        "\x1b[0m20:31:18  \x1b[31mCompleted with 1 error, 0 partial successes, and 0 warnings:\x1b[0m",
        "\x1b[0m20:31:18  ",
        "\x1b[0m20:31:18    Runtime Error in model stg_x (models/staging/stg_x.sql)",
        "  Binder Error: Referenced column \"cantidad\" not found",
        "\x1b[0m20:31:18  Done. PASS=0 WARN=0 ERROR=1 SKIP=1 NO-OP=0 TOTAL=2",
    ]
    assert failure_lines(output) == [
        "Completed with 1 error, 0 partial successes, and 0 warnings:",
        "  Runtime Error in model stg_x (models/staging/stg_x.sql)",
        "  Binder Error: Referenced column \"cantidad\" not found",
        "Done. PASS=0 WARN=0 ERROR=1 SKIP=1 NO-OP=0 TOTAL=2",
    ]
    assert failure_lines(["Encountered an error:", "Parsing Error", "  bad yaml"]) == [
        "Encountered an error:", "Parsing Error", "  bad yaml"]


# ---------------------------------------------------------------------------------------------
# Publishing is one step for readers: kills at any moment


# The release steps of `publish()` after dbt (the same functions, on a copy of a built
# database), so that dozens of kills cost seconds instead of a dbt build each.
RELEASE_SCRIPT = textwrap.dedent("""
    import shutil, sys
    from pathlib import Path
    from infant_mortality.tools import publish as p
    paths = p.Paths.resolve(Path(sys.argv[2]))
    print("started", flush=True)
    with p.new_release(paths) as (release_id, incoming):
        shutil.copyfile(sys.argv[1], incoming / paths.published.name)
        p.release(paths, incoming, release_id)
    print(release_id, flush=True)
""")


def start_release(source_db: Path, published: Path, kill_at: str | None = None) -> subprocess.Popen:
    env = {**os.environ, "IMR_DUCKDB_PATH": str(published)}
    env.pop("IMR_PUBLISH_KILL_AT", None)
    if kill_at:
        env["IMR_PUBLISH_KILL_AT"] = kill_at
    return subprocess.Popen([sys.executable, "-c", RELEASE_SCRIPT, str(source_db), str(REPO_ROOT)],
                            cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.mark.e2e  # fault injection
def test_a_kill_at_any_moment_leaves_the_old_or_the_new_release_never_a_mix(published, tmp_path):
    import random
    import signal
    import time

    path = copy_published(published.path, tmp_path)
    folder = path.parent
    source = tmp_path / "built.duckdb"  # a finished build (finalizing it again is a no-op)
    shutil.copyfile(published.path, source)

    def consistent_and_recover(label: str, before: str) -> str:
        state = release_state(folder)
        # The old release, or a newer one (ids start with their UTC time); never anything else.
        assert state["release"] == before or state["release"] > before, label
        assert state["marts"] == mart_names(published.path), label
        return state["release"]

    # 1. A kill at every named step of the release.
    steps = ["finalized", "exported:parquet", "manifest", "renamed", "swapped", "linked", "collected"]
    outcomes = {}
    for step in steps:
        before = release_state(folder)["release"]
        process = start_release(source, path, kill_at=step)
        process.communicate(timeout=120)
        assert process.returncode == -signal.SIGKILL, (step, process.returncode)
        after = consistent_and_recover(step, before)
        outcomes[step] = "old" if after == before else "new"
    # Before the pointer moves readers see the old release; from the swap on, the new one.
    assert outcomes == {"finalized": "old", "exported:parquet": "old", "manifest": "old", "renamed": "old",
                        "swapped": "new", "linked": "new", "collected": "new"}, outcomes

    # 2. SIGKILL at random moments of a whole release run, timed as the shortest of three runs:
    # the suite's other work only lengthens a run, and one slow timing run once sent 9 of the 16
    # kills after the end (a fresh clone's end-to-end group, 2026-12-07).
    durations = []
    for _ in range(3):
        timing = start_release(source, path)
        started = time.monotonic()
        out, err = timing.communicate(timeout=120)
        assert timing.returncode == 0, err
        durations.append(time.monotonic() - started)
    duration = min(durations)
    rng = random.Random(20261130)
    seen = {"old": 0, "new": 0}
    kills = 0
    for _ in range(16):
        before = release_state(folder)["release"]
        process = start_release(source, path)
        time.sleep(rng.uniform(0, duration * 1.2))
        process.send_signal(signal.SIGKILL)
        out, _ = process.communicate(timeout=120)
        kills += process.returncode == -signal.SIGKILL
        after = consistent_and_recover("random", before)
        seen["old" if after == before else "new"] += 1
        if process.returncode == 0:
            assert after == out.split()[-1]
    assert kills >= 8, f"only {kills} of 16 runs were killed before finishing; timing is off"
    print(f"\nkill points: {len(steps)} named steps + {kills} random SIGKILLs; outcomes {seen}; all consistent")

    # 3. The next publish cleans up every leftover and keeps two releases.
    final = start_release(source, path)
    out, err = final.communicate(timeout=120)
    assert final.returncode == 0, err
    assert release_state(folder)["release"] == out.split()[-1]
    assert not list((folder / "releases").glob(".incoming-*"))
    assert not list(folder.glob(".*.link-*"))
    assert len([p for p in (folder / "releases").iterdir()]) == 2


@pytest.mark.e2e  # fault injection
def test_a_publish_killed_during_dbt_build_stops_dbt_and_changes_nothing(published, tmp_path):
    import signal
    import time

    path = copy_published(published.path, tmp_path)
    before = release_state(path.parent)["release"]
    hashes = {p: sha256(p) for p in [path, *(path.parent / "parquet").iterdir()]}
    work = tmp_path
    env = {**os.environ, "IMR_DUCKDB_PATH": str(path), "DBT_TARGET_PATH": str(work / "t"),
           "DBT_LOG_PATH": str(work / "l")}
    process = subprocess.Popen([sys.executable, "-m", "infant_mortality.publish", "--quiet"], cwd=REPO_ROOT,
                               env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    building = path.parent / ".build" / "building" / NAME
    while not building.exists():  # dbt is writing
        assert time.monotonic() < deadline and process.poll() is None
        time.sleep(0.2)
    process.send_signal(signal.SIGKILL)
    process.wait()

    def dbt_children():
        found = []
        for environ in Path("/proc").glob("[0-9]*/environ"):
            try:
                if str(building).encode() in environ.read_bytes():
                    found.append(environ.parent.name)
            except OSError:
                pass
        return found

    deadline = time.monotonic() + 15
    while dbt_children() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not dbt_children(), "the dbt child outlived the killed publish"
    assert release_state(path.parent)["release"] == before
    assert {p: sha256(p) for p in hashes} == hashes


def test_a_warehouse_of_the_previous_layout_is_adopted_without_a_moment_of_mismatch(published, tmp_path):
    """Plain file + plain parquet/ (published before releases) become a release by hard links."""
    folder = tmp_path / "warehouse"
    (folder / "parquet").mkdir(parents=True)
    shutil.copyfile(published.path, folder / NAME)
    for parquet in published.parquet.glob("*.parquet"):
        shutil.copyfile(parquet, folder / "parquet" / parquet.name)
    inode = (folder / NAME).stat().st_ino
    process = start_release(tmp_path / "missing.duckdb", folder / NAME)  # adopts, then fails to copy
    _, err = process.communicate(timeout=120)
    assert process.returncode != 0 and "missing.duckdb" in err
    assert (folder / NAME).is_symlink() and (folder / "parquet").is_symlink()
    assert (folder / NAME).stat().st_ino == inode  # the same file, now inside releases/legacy-...
    assert (folder / "current").resolve().name.startswith("legacy-")
    assert not list((folder / "releases").glob(".incoming-*"))
    assert sorted(p.name for p in (folder / "parquet").iterdir()) == sorted(
        p.name for p in published.parquet.glob("*.parquet"))


def tree(folder: Path) -> dict:
    """Every path under `folder` (hidden ones too): a link's target, a file's SHA-256, or a folder."""
    found = {}
    for path in sorted(folder.rglob("*")):
        relative = str(path.relative_to(folder))
        if path.is_symlink():
            found[relative] = ("link", os.readlink(path))
        elif path.is_file():
            found[relative] = ("file", sha256(path))
        else:
            found[relative] = ("dir",)
    return found


def analysts_database(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with duckdb.connect(str(path)) as con:
        con.execute("create schema marts")  # even a schema called marts: it is still not ours
        con.execute("create table marts.my_cohort as select range as id from range(10)")


# What an analyst may have where IMR_DUCKDB_PATH points: (the published path's name, a set-up of
# the folder, the path the refusal must name). Each was replaced or deleted by a publish, exit 0.
FOREIGN = {
    "their database at the published path": (
        "mine.duckdb", lambda f: analysts_database(f / "mine.duckdb"), "mine.duckdb"),
    "their database and parquet/ folder": (
        "mine.duckdb", lambda f: (analysts_database(f / "mine.duckdb"), (f / "parquet").mkdir(),
                                  (f / "parquet" / "cohort.parquet").write_bytes(b"PAR1 not ours")),
        "mine.duckdb"),
    "their parquet/ folder beside a new path": (
        NAME, lambda f: ((f / "parquet").mkdir(parents=True), (f / "parquet" / "cohort.parquet").write_bytes(b"PAR1")),
        "parquet"),
    "their gis/ folder": (
        NAME, lambda f: ((f / "gis").mkdir(parents=True), (f / "gis" / "roads.gpkg").write_bytes(b"layer")), "gis"),
    "their releases/ folder": (
        NAME, lambda f: ((f / "releases" / "v1").mkdir(parents=True), (f / "releases" / "v1" / "paper.pdf").write_bytes(b"%PDF")),
        "releases"),
    "a current file": (
        NAME, lambda f: (f.mkdir(parents=True), (f / "current").write_text("their notes")), "current"),
    "another tool's .build/ folder": (
        NAME, lambda f: ((f / ".build").mkdir(parents=True), analysts_database(f / ".build" / "cache.duckdb")), ".build"),
}


@pytest.mark.parametrize("case", sorted(FOREIGN))
def test_publish_refuses_a_folder_holding_files_it_did_not_write_and_changes_nothing(tmp_path, case):
    # Publishing once took an analyst's database at IMR_DUCKDB_PATH over as a "legacy release"
    # and deleted it at the next publish, and replaced parquet/ and gis/ folders, exit code 0.
    name, make, named = FOREIGN[case]
    folder = tmp_path / "analysis"
    make(folder)
    (folder / "notes.txt").write_text("mine")
    before = tree(folder)
    result = run_publish(folder / name)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode == 1, (case, result.stdout[-2000:], result.stderr[-2000:])
    assert len(lines) == 1 and lines[0].startswith("publish FAILED: "), lines
    assert str(folder / named) in lines[0] and "not a release this project published" in lines[0], lines
    assert "nothing was changed" in lines[0] and "IMR_DUCKDB_PATH" in lines[0]
    assert "Building release" not in result.stdout  # refused before a build
    assert tree(folder) == before  # not one file, link or folder added, changed or removed
    if named == ".build":  # the docs build writes and deletes under .build/ too
        docs = run_publish(folder / name, "--docs-only")
        assert docs.returncode == 1 and f"{folder / '.build'} is not a build folder this project made" in docs.stderr
        assert tree(folder) == before


def test_the_projects_own_releases_and_a_fresh_folder_are_still_published(published, tmp_path):
    """Releases published before the ownership marker, and a folder with only unrelated files:
    both are published into, the unrelated files left as they were."""
    import time

    path = copy_published(published.path, tmp_path)
    folder = path.parent
    (folder / ".infant_mortality-warehouse").unlink()  # a release layout from before the marker
    (folder / "notes.txt").write_text("mine")
    (folder / "releases" / "kept-by-hand").mkdir()  # not a release: never collected
    (folder / "releases" / "kept-by-hand" / "x.txt").write_text("mine")
    half_deleted = folder / "releases" / "20200101T000000Z-abcdef"  # a collection killed after RELEASE.json went
    (half_deleted / "parquet").mkdir(parents=True)
    (half_deleted / "parquet" / "dim_commune.parquet").write_bytes(b"PAR1")
    before = release_state(folder)["release"]
    for _ in range(2):  # the second publish collects the first release but the folder by hand
        time.sleep(1.1)  # release ids start with the second
        process = start_release(published.path, path)
        out, err = process.communicate(timeout=120)
        assert process.returncode == 0, err
        assert release_state(folder)["release"] == out.split()[-1] != before
        assert (folder / ".infant_mortality-warehouse").is_file() and (folder / "notes.txt").read_text() == "mine"
        assert (folder / "releases" / "kept-by-hand" / "x.txt").read_text() == "mine"
        assert len(list((folder / "releases").iterdir())) == 3 and not half_deleted.exists()

    fresh = tmp_path / "fresh"
    fresh.mkdir()
    (fresh / "notes.txt").write_text("mine")
    process = start_release(published.path, fresh / NAME)
    out, err = process.communicate(timeout=120)
    assert process.returncode == 0, err
    assert release_state(fresh)["release"] == out.split()[-1]
    assert (fresh / "notes.txt").read_text() == "mine"


# ---------------------------------------------------------------------------------------------
# `dbt build` by hand


@pytest.mark.e2e  # a whole user command: a full dbt build in a copy of the checkout
def test_hand_dbt_build_writes_the_development_file_and_leaves_the_published_one_byte_identical(
        published, tmp_path):
    """A newcomer's `source .venv/bin/activate && dbt build` at the root of a checkout."""
    checkout = tmp_path / "checkout"
    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=REPO_ROOT, capture_output=True, check=True).stdout
    for name in filter(None, tracked.decode().split("\0")):
        source = REPO_ROOT / name
        if source.is_file():
            (checkout / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, checkout / name)
    copy_published(published.path, checkout)  # a published release, as `make warehouse` leaves it
    published_files = [checkout / "warehouse" / NAME,
                       *sorted(p for p in (checkout / "warehouse" / "releases").rglob("*") if p.is_file())]
    before = {p: sha256(p) for p in published_files}

    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("IMR_", "DBT_", "VIRTUAL_ENV"))}
    activate = Path(sys.executable).parent / "activate"
    result = subprocess.run(["bash", "-c", f'source "{activate}" && dbt build'], cwd=checkout, env=env,
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert "Completed successfully" in result.stdout

    after = {p: sha256(p) for p in published_files}
    assert after == before, "a hand dbt build changed a published file"
    print(f"\npublished {NAME} sha256 before {before[published_files[0]][:16]}... after "
          f"{after[published_files[0]][:16]}...; {len(before)} published files byte-identical")
    dev = checkout / "warehouse" / "dev" / NAME
    assert dev.exists()
    # Every relation of the development file answers from an unrelated folder (no relative views).
    script = textwrap.dedent("""
        import json, sys, duckdb
        con = duckdb.connect(sys.argv[1], read_only=True)
        views = con.execute("select schema_name, view_name from duckdb_views() where not internal").fetchall()
        rels = con.execute("select schema_name, table_name from duckdb_tables()").fetchall() + views
        print(json.dumps([sorted(f"{s}.{v}" for s, v in views),
                          {f"{s}.{t}": con.execute(f'select count(*) from "{s}"."{t}"').fetchone()[0]
                           for s, t in rels}]))
    """)
    elsewhere = subprocess.run([sys.executable, "-c", script, str(dev)], cwd=tmp_path, capture_output=True, text=True)
    assert elsewhere.returncode == 0, elsewhere.stderr
    views, counts = json.loads(elsewhere.stdout)
    # The only view is the deprecated alias of a mart, which reads no file.
    assert views == ["marts.fct_rates_commune_year"]
    assert counts["staging.stg_reference__communes"] == 346
    assert counts["marts.fct_area_year_rates"] == counts["marts.fct_rates_commune_year"] == query(
        published.path, "select count(*) from marts.fct_area_year_rates")[0][0]


def test_publish_errors_are_one_sentence_not_tracebacks(tmp_path):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the warehouse folder should be")
    cases = {
        "bad vars": (tmp_path / "w" / NAME, ["--vars", "{unclosed: [1, 2"], "--vars is not valid YAML/JSON"),
        "vars not a mapping": (tmp_path / "w" / NAME, ["--vars", "[1, 2]"], "--vars must be a mapping"),
        "folder is a file": (blocker / "warehouse" / NAME, [], "Not a directory"),
        "nothing published to check": (tmp_path / "w" / NAME, ["--check"], "has no published release"),
    }
    for label, (path, args, expected) in cases.items():
        result = run_publish(path, *args)
        lines = [line for line in result.stderr.splitlines() if line.strip()]
        assert result.returncode == 1, label
        assert len(lines) == 1 and lines[0].startswith("publish FAILED: ") and expected in lines[0], (label, lines)
        assert "Traceback" not in result.stderr + result.stdout, label


@pytest.mark.parametrize("damage", ["stable database link deleted", "parquet link deleted",
                                    "file the manifest does not list", "current led outside releases"])
def test_check_fails_on_every_missing_link_and_every_unlisted_file(published, tmp_path, damage):
    # `publish --check` once said OK after the stable link had been deleted (issue 28).
    path = copy_published(published.path, tmp_path)
    folder = path.parent
    assert run_publish(path, "--check").returncode == 0
    release = (folder / "current").resolve()
    if damage == "stable database link deleted":
        path.unlink()
        expected = f"{path} is missing or is not the link current/{NAME}"
    elif damage == "parquet link deleted":
        (folder / "parquet").unlink()
        expected = f"{folder / 'parquet'} is missing or is not the link current/parquet"
    elif damage == "file the manifest does not list":
        (release / "parquet" / "extra.parquet").write_bytes(b"PAR1")
        expected = "holds files its manifest does not list: parquet/extra.parquet"
    else:
        shutil.copytree(release, tmp_path / "elsewhere", symlinks=True)
        (folder / "current").unlink()
        (folder / "current").symlink_to(tmp_path / "elsewhere")
        expected = "not to a release under"
    check = run_publish(path, "--check")
    assert check.returncode == 1 and expected in check.stderr, check.stderr
