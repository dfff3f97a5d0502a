"""Build the warehouse aside, test it, and publish it as one release (`make warehouse`, `make docs`).

DuckDB allows one writer, and any other process holding the file open (even read-only, even an
idle BI connection pool) makes `dbt build` fail with "Could not set lock on file". And readers
need the database and its Parquet files (and any other export) to change together. So the
published files are never built in place, and they change with ONE atomic rename:

    warehouse/
      infant_mortality.duckdb -> current/infant_mortality.duckdb   (stable links, made once;
      parquet                 -> current/parquet                    BI tools keep these paths)
      current                 -> releases/<release_id>              (THE pointer: one rename)
      releases/<release_id>/    infant_mortality.duckdb, parquet/<mart>.parquet, RELEASE.json
      releases/.incoming-<release_id>/   a release being built (removed if it fails)

1. `dbt build` (models, seeds and data tests; the unit tests, which test the code and not the
   data, run in `make test`) runs as a subprocess, from the repository root, into
   `.build/building/<published name>` (fresh, so the profile's `storage_compatibility_version`
   applies; same basename, so the catalog name is stable), then the file moves into
   `releases/.incoming-<id>/`. The path dbt writes to is the same at every publish: dbt keys
   its partial parsing on the profile, path included, and a new path made it re-parse the whole
   project every time (8 s of a 45 s publish on a 2-core machine).
2. Only if the whole build and every test passed, the database is made self-contained: the
   `staging` schema is dropped (readers use the marts), every remaining view is checked to bind
   from an unrelated directory, the connection is checkpointed and closed.
3. Each exporter of `EXPORTERS` writes its artefact into the incoming folder (Parquet: one file
   per mart, carrying the release id in its key-value metadata). Adding an artefact to the
   release is one line there.
4. `RELEASE.json` lists every file of the release with its size and SHA-256; the folder is
   renamed to `releases/<id>`, then the `current` link is replaced by an atomic rename: that is
   the commit point. A kill at any moment before it leaves the previous release published,
   after it the new one; never a mix (`--check` verifies a warehouse folder).
5. Releases other than the new and the previous one are deleted (open connections keep reading
   deleted files on Linux and macOS), and so are leftovers of interrupted publishes.

Only what the project wrote is replaced or deleted. The first publish into a folder writes
`.infant_mortality-warehouse` there before anything else; a folder without it is the project's only
if it holds a release layout (publishes from before the marker) or a warehouse of the previous
layout (`_is_previous_layout`). Anything else at a path publishing would replace or delete (an
analyst's own database at `$IMR_DUCKDB_PATH`, a `parquet/` or `releases/` folder of theirs) makes
it refuse before building, naming the paths, with nothing written.

A failed build prints dbt's failure lines, exits non-zero, removes its incoming folder and leaves
the published release untouched. The dbt subprocess dies with the publish process (Linux).

`--docs-only` builds models and seeds (no tests) into a scratch file under `.build/docs/`, runs
`dbt docs generate --static` against it and prints the path of the self-contained HTML page. It
never opens the published file.

Paths: the published file is `$IMR_DUCKDB_PATH` if set, else `warehouse/infant_mortality.duckdb`;
relative paths resolve against the repository root. dbt's artifacts go to `target/` (or
`$DBT_TARGET_PATH`).
"""

from __future__ import annotations

import argparse
import ctypes
import fcntl
import hashlib
import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

import duckdb
import yaml

from infant_mortality.tools.progress import Heartbeat, say
from infant_mortality.tools.sources import fingerprint

DEFAULT_PUBLISHED = "warehouse/infant_mortality.duckdb"
MARTS_SCHEMA = "marts"
# Tables built from the raw files; readers use the marts, so they are not published.
BUILD_ONLY_SCHEMAS = ("staging",)
MANIFEST = "RELEASE.json"
INCOMING_PREFIX = ".incoming-"

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_TIMESTAMP = re.compile(r"^\d\d:\d\d:\d\d  ")


class PublishError(RuntimeError):
    """A problem that stops the publish; the message is shown to the user as is."""


@dataclass(frozen=True)
class Paths:
    project_dir: Path
    published: Path  # the stable link readers open, e.g. warehouse/infant_mortality.duckdb
    build_dir: Path  # the publish lock and the docs scratch file
    releases: Path
    current: Path  # the one pointer that is swapped
    target_dir: Path

    @classmethod
    def resolve(cls, project_dir: Path) -> "Paths":
        published = Path(os.environ.get("IMR_DUCKDB_PATH") or DEFAULT_PUBLISHED)
        if not published.is_absolute():
            published = project_dir / published
        target = Path(os.environ.get("DBT_TARGET_PATH") or _project_target_path(project_dir))
        if not target.is_absolute():
            target = project_dir / target
        folder = published.parent
        return cls(
            project_dir=project_dir,
            published=published,
            build_dir=folder / ".build",
            releases=folder / "releases",
            current=folder / "current",
            target_dir=target,
        )

    @property
    def folder(self) -> Path:
        return self.published.parent

    @property
    def parquet_dir(self) -> Path:
        return self.folder / "parquet"

    @property
    def building(self) -> Path:
        """The file `dbt build` writes, at the same path at every publish (partial parsing)."""
        return self.build_dir / "building" / self.published.name


def _project_target_path(project_dir: Path) -> str:
    config = yaml.safe_load((project_dir / "dbt_project.yml").read_text()) or {}
    return config.get("target-path", "target")


def _default_project_dir() -> Path:
    cwd = Path.cwd()
    if (cwd / "dbt_project.yml").exists():
        return cwd
    return Path(__file__).resolve().parents[3]  # python/infant_mortality/tools/publish.py -> repo root


def _dbt_executable() -> str:
    beside = Path(sys.executable).with_name("dbt")
    if beside.exists():
        return str(beside)
    found = shutil.which("dbt")
    if not found:
        raise PublishError("dbt executable not found (expected next to the Python interpreter or on PATH)")
    return found


def _log(message: str = "", err: bool = False) -> None:
    say(message, sys.stderr if err else sys.stdout)


def _step(name: str) -> None:
    """A named point of the publish; IMR_PUBLISH_KILL_AT=<name> kills the process there (tests)."""
    if os.environ.get("IMR_PUBLISH_KILL_AT") == name:
        os.kill(os.getpid(), signal.SIGKILL)


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
    lock for a read-only one, so a shared lock attempt fails only against a writer. Publishing
    under a writer would be wrong: it keeps writing to the old file and to `<path>.wal`, which
    the next opener would replay onto the new file.
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


def _die_with_parent() -> None:  # pragma: no cover - runs in the child before exec
    """Linux: the dbt child gets SIGKILL when the publish process dies, so a killed publish
    leaves no build running into a folder the next publish deletes."""
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


class DbtProgress:
    """What dbt is doing, read off its own output lines: the status line printed when dbt has
    been silent for a few seconds (its start-up, a full parse of the project, a long model)."""

    NODE = re.compile(r"^(\d+) of (\d+) (START|OK|PASS|WARN|ERROR|FAIL|SKIP|NO-OP)\b(.*)$")

    def __init__(self, clock: Callable[[], float] = time.monotonic):
        self.clock = clock
        self.phase = "starting"
        self.phase_started = clock()
        self.total = 0
        self.finished: set[int] = set()
        self.running: dict[int, tuple[str, float]] = {}  # node number -> (name, started)
        self.explained: set[str] = set()  # phases whose status has said once why they take long

    def _enter(self, phase: str) -> None:
        if phase != self.phase:
            self.phase, self.phase_started = phase, self.clock()

    def feed(self, line: str) -> None:
        clean = _TIMESTAMP.sub("", _ANSI.sub("", line)).strip()
        if clean.startswith("Running with dbt"):
            self._enter("parsing")
        elif "Starting full parse" in clean:
            self._enter("full parse")
        elif clean.startswith("Found "):
            self._enter("preparing")
        elif clean.startswith("Finished running"):
            self._enter("finishing")
        elif match := self.NODE.match(clean):
            number, total, status, rest = int(match[1]), int(match[2]), match[3], match[4]
            if total != self.total:  # the hooks count apart (1 of 2), then the nodes (1 of 178)
                self.total, self.finished, self.running = total, set(), {}
            self._enter("nodes")
            if status == "START":
                words = rest.split(".....", 1)[0].replace("[RUN]", "").split()
                self.running[number] = (words[-1] if words else f"node {number}", self.clock())
            else:
                self.running.pop(number, None)
                self.finished.add(number)

    def status(self, silent: float) -> str:
        now = self.clock()
        took = f"{now - self.phase_started:.0f} s"
        if self.phase == "starting":
            what = f"dbt is starting (loading its Python modules; {took})"
        elif self.phase == "parsing":
            what = f"dbt is reading the project and parsing what changed since the last build ({took})"
        elif self.phase == "full parse":
            what = f"dbt is parsing every model, test and macro ({took}"
            if "full parse" not in self.explained:
                self.explained.add("full parse")
                what += ("; only the first build in a folder parses them all, usually in 10 to 20 s, "
                         "later builds reuse target/partial_parse.msgpack")
            what += ")"
        elif self.phase == "preparing":
            what = f"dbt is opening the database and running its start hooks ({took})"
        elif self.phase == "nodes":
            running = sorted(self.running.values(), key=lambda item: item[1])
            names = ", ".join(f"{name} ({now - since:.0f} s)" for name, since in running[:3])
            what = (f"dbt: {len(self.finished)} of {self.total} done"
                    + (f"; running {names}" if names else ""))
        else:
            what = f"dbt is writing its run results ({took})"
        return f"  ... {what}"


def _run_dbt(args: list[str], paths: Paths, database: Path, quiet: bool) -> tuple[int, list[str]]:
    """Run the dbt CLI from the project root against `database`; stream and return its output.
    When dbt prints nothing for a few seconds, a line says what it is doing and how far it is."""
    command = [_dbt_executable(), *args, "--profiles-dir", str(paths.project_dir / "profiles")]
    env = {**os.environ, "IMR_DUCKDB_PATH": str(database)}
    if not sys.stdout.isatty():
        env.setdefault("DBT_USE_COLORS", "false")
    lines: list[str] = []
    progress = DbtProgress()
    with subprocess.Popen(
        command,
        cwd=paths.project_dir,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        bufsize=1,
        preexec_fn=_die_with_parent,
    ) as process, Heartbeat(say, progress.status, enabled=not quiet) as beat:
        assert process.stdout is not None
        for line in process.stdout:
            line = line.rstrip("\n")
            lines.append(line)
            progress.feed(line)
            if not quiet:
                beat.output()
                say(line)
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


# What `make warehouse` builds: everything but the unit tests, which test the models' code on
# fixed inputs, whatever the data (dbt's advice for production builds); `make test` runs them.
BUILD_ARGS = ["build", "--exclude-resource-type", "unit_test"]


def _dbt_vars_args(dbt_vars: str | None) -> list[str]:
    if not dbt_vars:
        return []
    try:
        parsed = yaml.safe_load(dbt_vars)
    except yaml.YAMLError as error:
        raise PublishError(f"--vars is not valid YAML/JSON: {str(error).splitlines()[0]}") from None
    if not isinstance(parsed, dict):
        raise PublishError("--vars must be a mapping, e.g. '{unreliable_below_deaths: 10}'")
    return ["--vars", dbt_vars]


# --------------------------------------------------------------------------------------------
# Making the build publishable


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
        last = (result.stderr.strip().splitlines() or ["no output"])[-1]
        raise PublishError(f"could not check the views of the build file ({last})")
    broken = json.loads(result.stdout.strip().splitlines()[-1])
    if broken:
        raise PublishError(
            "views in the build would break for readers outside the repository root "
            "(they read files by relative path): " + "; ".join(broken)
        )


@dataclass(frozen=True)
class Mart:
    name: str
    rows: int


def finalize_database(database: Path) -> tuple[list[Mart], str]:
    """Drop build-only schemas and checkpoint; return the marts and the storage version."""
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
        marts = [
            Mart(name, con.execute(f"select count(*) from {_ident(MARTS_SCHEMA)}.{_ident(name)}").fetchone()[0])
            for name in names
        ]
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


# --------------------------------------------------------------------------------------------
# Exporters: every artefact of a release besides the database. Each writes `name` (a file or a
# folder) inside the incoming release folder from the finished, closed database; the folder
# `warehouse/<name>` then links to `current/<name>`. Adding an artefact is one line in EXPORTERS.


@dataclass(frozen=True)
class Exporter:
    name: str
    write: Callable[[Path, Path, str], None]  # (database, destination, release_id)
    what: str  # the progress line while it writes


def export_parquet(database: Path, destination: Path, release_id: str) -> None:
    """One Parquet file per mart, with the release id in its key-value metadata."""
    destination.mkdir()
    with duckdb.connect(str(database), read_only=True) as con:
        names = [r[0] for r in con.execute(
            "select table_name from duckdb_tables() where database_name = current_database() "
            "and schema_name = ? order by table_name", [MARTS_SCHEMA]).fetchall()]
        for name in names:
            target = destination / f"{name}.parquet"
            con.execute(
                f"copy {_ident(MARTS_SCHEMA)}.{_ident(name)} to {_literal(str(target))} "
                f"(format parquet, compression zstd, kv_metadata {{imr_release_id: {_literal(release_id)}}})"
            )


def export_geopackage(database: Path, destination: Path, release_id: str) -> None:
    """The GIS layer for QGIS/ArcGIS (communes and commune_indicators, EPSG:4326), from the marts;
    RELEASE.json carries its checksum under the release id."""
    from infant_mortality.tools.gis import write_geopackage

    write_geopackage(database, destination / "infant_mortality.gpkg")


EXPORTERS: tuple[Exporter, ...] = (
    Exporter("parquet", export_parquet, "Parquet: one file per mart"),
    Exporter("gis", export_geopackage, "GeoPackage: commune polygons with their indicators"),
)


# --------------------------------------------------------------------------------------------
# Releases


def new_release_id() -> str:
    return datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ") + "-" + secrets.token_hex(3)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _fsync_tree(folder: Path) -> None:
    """Data and directory entries on disk before the rename that publishes them."""
    for path in sorted(folder.rglob("*"), key=lambda p: len(p.parts), reverse=True) + [folder]:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _write_manifest(folder: Path, release_id: str, marts: list[Mart], storage: str,
                    sources: str | None = None) -> None:
    files = {
        str(path.relative_to(folder)): {"bytes": path.stat().st_size, "sha256": _sha256(path)}
        for path in sorted(folder.rglob("*")) if path.is_file()
    }
    manifest = {
        "release_id": release_id,
        "published_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "storage_version": storage,
        "marts": {mart.name: mart.rows for mart in marts},
        "files": files,
        "sources_sha256": sources,  # what it was built from (tools/sources.py); None: not comparable
    }
    (folder / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")


def _relative_link(link: Path, target: str) -> None:
    """Make `link` point at `target` with one atomic rename (replacing a file or a link)."""
    temporary = link.with_name(f".{link.name}.link-{secrets.token_hex(4)}")
    os.symlink(target, temporary)
    try:
        os.replace(temporary, link)
    except OSError:
        temporary.unlink(missing_ok=True)
        raise


def _stable_names(paths: Paths) -> list[str]:
    return [paths.published.name, *(exporter.name for exporter in EXPORTERS)]


def _ensure_stable_links(paths: Paths) -> None:
    """`warehouse/<name> -> current/<name>` for the database and every exporter (made once).

    A folder left by the previous layout (files published one by one) is moved aside and
    deleted; a plain file is replaced atomically.
    """
    for name in _stable_names(paths):
        link = paths.folder / name
        target = f"current/{name}"
        if link.is_symlink() and os.readlink(link) == target:
            continue
        if link.is_dir() and not link.is_symlink():
            aside = paths.build_dir / f"old-{name}-{secrets.token_hex(3)}"
            os.rename(link, aside)
            _relative_link(link, target)
            shutil.rmtree(aside, ignore_errors=True)
        else:
            _relative_link(link, target)
    _step("linked")


def _current_release(paths: Paths) -> str | None:
    if not paths.current.is_symlink():
        return None
    return Path(os.readlink(paths.current)).name


def _remove_leftovers(paths: Paths) -> None:
    """Incoming folders and temporary links of publishes that were killed (we hold the lock)."""
    if paths.releases.is_dir():
        for stale in paths.releases.glob(INCOMING_PREFIX + "*"):
            shutil.rmtree(stale, ignore_errors=True)
    for stale in paths.folder.glob(".*.link-*"):
        stale.unlink(missing_ok=True)
    for stale in paths.build_dir.glob("old-*"):
        shutil.rmtree(stale, ignore_errors=True)
    shutil.rmtree(paths.building.parent, ignore_errors=True)  # a killed build's file and spill
    # Build files and Parquet of the previous layout, which kept failed builds for inspection.
    for stale in (*paths.build_dir.glob("*.duckdb"), *paths.build_dir.glob("*.duckdb.wal")):
        stale.unlink(missing_ok=True)
    shutil.rmtree(paths.build_dir / "parquet.tmp", ignore_errors=True)


def _is_release(release_dir: Path) -> bool:
    """A release this project wrote: a folder whose RELEASE.json names it."""
    try:
        manifest = json.loads((release_dir / MANIFEST).read_text())
    except (OSError, ValueError):
        return False
    return isinstance(manifest, dict) and manifest.get("release_id") == release_dir.name


# The name `new_release_id()` gives a release (and `legacy-` + it, an adopted one).
RELEASE_NAME = re.compile(r"(legacy-)?\d{8}T\d{6}Z-[0-9a-f]{6}")


def _collect_old_releases(paths: Paths, keep: set[str]) -> None:
    """Delete every release but `keep` (open connections keep reading deleted files). A release
    is a folder whose RELEASE.json names it, or one named as releases are (a release whose
    deletion was killed may have lost its RELEASE.json); any other folder is not ours to delete."""
    for release_dir in paths.releases.iterdir():
        if (release_dir.is_dir() and not release_dir.is_symlink() and not release_dir.name.startswith(".")
                and release_dir.name not in keep
                and (RELEASE_NAME.fullmatch(release_dir.name) or _is_release(release_dir))):
            shutil.rmtree(release_dir, ignore_errors=True)


# --------------------------------------------------------------------------------------------
# Whose folder: publish replaces and deletes only what it wrote


# Written into the warehouse folder by the first publish, before anything else: from then on the
# release paths there (the stable links, current, releases/, .build/) are the project's to
# replace. A folder without it is the project's only when it holds a release layout (publishes
# from before the marker) or a warehouse of the previous layout (`_is_previous_layout`).
OWNER_MARKER = ".infant_mortality-warehouse"
OWNER_NOTE = (
    "This folder holds releases published by `python -m infant_mortality.publish` (make warehouse).\n"
    "Publishing replaces its links ({names}, current) and deletes old releases under releases/.\n"
    "Keep files of your own elsewhere.\n"
)


def _is_release_layout(folder: Path) -> bool:
    """`current` is a link to `releases/<id>`, a release of ours (publishes before the marker)."""
    current = folder / "current"
    if not current.is_symlink():
        return False
    target = Path(os.readlink(current))
    return target.parent == Path("releases") and _is_release(folder / "releases" / target.name)


def _is_previous_layout(paths: Paths) -> bool:
    """A warehouse published before releases existed: a plain database file beside a plain
    `parquet/` folder holding exactly one `<mart>.parquet` per table of its `marts` schema (what
    that publish wrote), and no release yet. An analyst's own database has no such twin."""
    parquet = paths.parquet_dir
    if (not paths.published.is_file() or paths.published.is_symlink() or not parquet.is_dir()
            or parquet.is_symlink() or paths.current.exists() or paths.current.is_symlink()):
        return False
    if paths.releases.exists() and (not paths.releases.is_dir() or any(  # an adoption killed half-way
            not entry.name.startswith((INCOMING_PREFIX + "legacy-", "legacy-")) for entry in paths.releases.iterdir())):
        return False
    entries = list(parquet.iterdir())
    if not entries or any(not e.is_file() or e.is_symlink() or e.suffix != ".parquet" for e in entries):
        return False
    try:
        with duckdb.connect(str(paths.published), read_only=True) as con:
            marts = {row[0] for row in con.execute(
                "select table_name from duckdb_tables() where database_name = current_database() "
                "and schema_name = ?", [MARTS_SCHEMA]).fetchall()}
    except duckdb.Error:
        return False
    return bool(marts) and marts == {e.stem for e in entries}


def _same_files(path: Path, released: Path) -> bool:
    """`path` (a plain file or folder) is `released` by hard links: an adoption of the previous
    layout killed before its links were made."""
    try:
        if path.is_file():
            return released.is_file() and os.path.samefile(path, released)
        if path.is_dir() and released.is_dir():
            mine = sorted(p.relative_to(path) for p in path.rglob("*"))
            if mine != sorted(p.relative_to(released) for p in released.rglob("*")):
                return False
            return all((path / r).is_dir() or os.path.samefile(path / r, released / r) for r in mine)
    except OSError:
        return False
    return False


def _ownership(paths: Paths) -> str:
    """'own' (the marker, or a release layout), 'previous' (a warehouse of the previous layout,
    to adopt) or 'new' (nothing of ours yet). Refuses, changing nothing, when a path publish
    would replace or delete holds something it did not write."""
    folder = paths.folder
    if (folder / OWNER_MARKER).is_file() or _is_release_layout(folder):
        state = "own"
    elif _is_previous_layout(paths):
        state = "previous"
    else:
        state = "new"

    def present(path: Path) -> bool:
        return path.exists() or path.is_symlink()

    foreign = []
    for name in _stable_names(paths):
        path = folder / name
        if not present(path):
            continue
        if state == "own" and path.is_symlink() and os.readlink(path) == f"current/{name}":
            continue
        if state == "own" and not path.is_symlink() and _same_files(path, paths.current / name):
            continue
        if state == "previous" and name in (paths.published.name, "parquet"):
            continue
        foreign.append(path)
    if state == "own":
        if present(paths.current) and not paths.current.is_symlink():
            foreign.append(paths.current)
        if present(paths.releases) and (paths.releases.is_symlink() or not paths.releases.is_dir()):
            foreign.append(paths.releases)
    else:
        foreign += [path for path in (paths.current, paths.releases,
                                      paths.published.with_name(paths.published.name + ".wal"))
                    if present(path)]
    if present(paths.build_dir) and not (paths.build_dir / ".publish.lock").is_file() and state != "own":
        foreign.append(paths.build_dir)
    if foreign:
        listed = ", ".join(str(path) for path in foreign)
        raise PublishError(
            f"{listed} {'is' if len(foreign) == 1 else 'are'} not a release this project published "
            f"(publish would replace or delete {'it' if len(foreign) == 1 else 'them'}); nothing was changed. "
            f"Move {'it' if len(foreign) == 1 else 'them'} away, or set IMR_DUCKDB_PATH to a file in a folder "
            "of its own (e.g. warehouse/infant_mortality.duckdb)"
        )
    return state


def _claim(paths: Paths) -> None:
    """The marker, written before the first release path: the folder is the project's from now."""
    marker = paths.folder / OWNER_MARKER
    if not marker.exists():
        marker.write_text(OWNER_NOTE.format(names=", ".join(_stable_names(paths))))


def _adopt_previous_layout(paths: Paths) -> None:
    """Warehouses published before releases existed have a plain file and a plain `parquet/`.

    They become release `legacy-...` by hard links (no copy, same inodes for open readers), the
    pointer goes to it, and only then are the plain paths replaced by links: every path leads to
    the same content at every moment.
    """
    if paths.current.is_symlink() or not paths.published.is_file() or paths.published.is_symlink():
        return
    release_id = "legacy-" + new_release_id()
    incoming = paths.releases / (INCOMING_PREFIX + release_id)
    incoming.mkdir(parents=True)
    for name in _stable_names(paths):
        source = paths.folder / name
        if source.is_dir() and not source.is_symlink():
            shutil.copytree(source, incoming / name, copy_function=os.link)
        elif source.is_file() and not source.is_symlink():
            os.link(source, incoming / name)
    _write_manifest(incoming, release_id, [], "unknown")
    os.rename(incoming, paths.releases / release_id)
    _relative_link(paths.current, f"releases/{release_id}")
    _ensure_stable_links(paths)


@contextmanager
def new_release(paths: Paths):
    """Under the publish lock, a fresh `releases/.incoming-<id>/` to build into; yields
    (release id, folder). The folder is removed on the way out unless `release()` renamed it."""
    _refuse_if_writer(paths.published)  # fail fast, before spending a build
    _ownership(paths)  # before the lock file: a folder of someone else's gets nothing written
    with _exclusive_publish(paths.build_dir):
        state = _ownership(paths)
        if state != "new":
            _remove_leftovers(paths)
        if state == "previous":
            _adopt_previous_layout(paths)  # the marker after it: a killed adoption stays "previous"
        _claim(paths)
        release_id = new_release_id()
        incoming = paths.releases / (INCOMING_PREFIX + release_id)
        incoming.mkdir(parents=True)
        try:
            yield release_id, incoming
        finally:
            shutil.rmtree(incoming, ignore_errors=True)


def _files_under(folder: Path) -> int:
    return sum(1 for path in folder.rglob("*") if path.is_file()) if folder.is_dir() else 0


def _megabytes_under(folder: Path) -> float:
    if not folder.is_dir():
        return 0.0
    return sum(path.stat().st_size for path in folder.rglob("*") if path.is_file()) / 1e6


@contextmanager
def _announced(say: Callable[[str], None] | None, what: str, far: Callable[[], str] | None = None):
    """`what ...` as the step starts, `done in N s` when it ends, and while it runs a line every
    few seconds saying how long (and, with `far`, how far) it is; nothing when `say` is None."""
    started = time.monotonic()
    if say is None:
        yield
        return
    say(f"{what} ...")

    def status(silent: float) -> str:
        return f"  ... {time.monotonic() - started:.0f} s" + (f": {far()}" if far else "")

    with Heartbeat(say, status):
        yield
    say(f"  done in {time.monotonic() - started:.1f} s")


def release(paths: Paths, incoming: Path, release_id: str,
            say: Callable[[str], None] | None = _log, sources: str | None = None) -> tuple[list[Mart], str]:
    """Turn a built database in `incoming` into the published release (steps 2 to 5); `say`
    reports each step that takes seconds as it starts, how far it is while it runs, and its time
    (None: nothing)."""
    database = incoming / paths.published.name
    with _announced(say, "Publishing: dropping the staging schema, checking every view, closing the database"):
        marts, storage = finalize_database(database)
    _step("finalized")
    for exporter in EXPORTERS:
        destination = incoming / exporter.name
        with _announced(say, f"Writing {exporter.what}",
                        lambda: f"{_files_under(destination)} of {len(marts)} marts written"
                        if exporter.name == "parquet" else f"{_megabytes_under(destination):.1f} MB written"):
            exporter.write(database, destination, release_id)
        _step(f"exported:{exporter.name}")
    with _announced(say, "Writing RELEASE.json (checksums of every file) and switching readers to the new release"):
        _write_manifest(incoming, release_id, marts, storage, sources)
        _fsync_tree(incoming)
    _step("manifest")
    final = paths.releases / release_id
    os.rename(incoming, final)
    _step("renamed")
    _refuse_if_writer(paths.published)
    # A .wal beside the published link belongs to the previous file (a crashed writer);
    # replayed onto the new file it would corrupt it.
    stale_wal = paths.published.with_name(paths.published.name + ".wal")
    if stale_wal.exists():
        _log(f"Removing stale {stale_wal} (left by a writer of the previous file)")
        stale_wal.unlink()
    previous = _current_release(paths)
    _relative_link(paths.current, f"releases/{release_id}")  # the commit point
    _step("swapped")
    _ensure_stable_links(paths)
    _collect_old_releases(paths, keep={release_id, previous})
    _step("collected")
    return marts, storage


def check_release(folder: Path, published_name: str = Path(DEFAULT_PUBLISHED).name) -> str:
    """The id of the release `folder` publishes, after checking that every file of the release
    is the one its manifest lists (size and SHA-256), that it holds no file the manifest does not
    list, and that every stable link exists and leads into that release."""
    current = folder / "current"
    if not current.is_symlink():
        raise PublishError(f"{folder} has no published release (no 'current' link)")
    release_dir = current.resolve()
    if release_dir.parent != (folder / "releases").resolve():
        raise PublishError(f"{current} leads to {release_dir}, not to a release under {folder / 'releases'}; "
                           "publish again")
    manifest_path = release_dir / MANIFEST
    if not manifest_path.exists():
        raise PublishError(f"{release_dir} has no {MANIFEST}")
    manifest = json.loads(manifest_path.read_text())
    if manifest["release_id"] != release_dir.name:
        raise PublishError(f"{manifest_path} names release {manifest['release_id']}, not {release_dir.name}")
    for relative, expected in manifest["files"].items():
        path = release_dir / relative
        if not path.is_file() or path.stat().st_size != expected["bytes"] or _sha256(path) != expected["sha256"]:
            raise PublishError(f"{path} differs from the release manifest")
    unlisted = sorted(str(path.relative_to(release_dir)) for path in release_dir.rglob("*")
                      if path.is_file() and path.name != MANIFEST
                      and str(path.relative_to(release_dir)) not in manifest["files"])
    if unlisted:
        raise PublishError(f"{release_dir} holds files its manifest does not list: {', '.join(unlisted)}")
    names = [published_name, *(exporter.name for exporter in EXPORTERS)]
    for name in names:
        link = folder / name
        published = any(relative == name or relative.startswith(name + "/") for relative in manifest["files"])
        if not link.is_symlink() and not published:
            continue   # an exporter this release did not produce, and no link to it
        if not link.is_symlink() or os.readlink(link) != f"current/{name}":
            raise PublishError(f"{link} is missing or is not the link current/{name}; publish again to "
                               f"restore it (readers open this path)")
        if link.resolve() != (release_dir / name).resolve() or not link.exists():
            raise PublishError(f"{link} leads to {link.resolve()}, not into release {release_dir.name}")
    with duckdb.connect() as con:
        for relative in manifest["files"]:
            if relative.endswith(".parquet"):
                (value,) = con.execute(
                    "select decode(value) from parquet_kv_metadata(?) where decode(key) = 'imr_release_id'",
                    [str(release_dir / relative)],
                ).fetchone() or (None,)
                if value != release_dir.name:
                    raise PublishError(f"{release_dir / relative} carries release id {value!r}")
    return release_dir.name


def _display(path: Path, project_dir: Path) -> str:
    try:
        return str(path.relative_to(project_dir))
    except ValueError:
        return str(path)


# --------------------------------------------------------------------------------------------
# Commands


def up_to_date(paths: Paths, sources: str | None) -> str | None:
    """The published release's id if it was built from `sources` and every file of it is intact."""
    if sources is None or not (paths.current / MANIFEST).is_file():
        return None
    if json.loads((paths.current / MANIFEST).read_text()).get("sources_sha256") != sources:
        return None
    try:
        return check_release(paths.folder, paths.published.name)
    except PublishError:
        return None  # a damaged release is rebuilt, not trusted


def publish(paths: Paths, dbt_vars: str | None, quiet: bool, if_changed: bool = False) -> int:
    started = time.monotonic()
    vars_args = _dbt_vars_args(dbt_vars)
    sources = fingerprint(paths.project_dir, dbt_vars)
    current = up_to_date(paths, sources) if if_changed else None
    if current:
        _log(f"Up to date: release {current} ({_display(paths.published, paths.project_dir)}) was built from "
             f"these same sources and settings, and every file of it is intact; nothing to build "
             f"({time.monotonic() - started:.1f} s). `make warehouse FORCE=1` rebuilds anyway.")
        return 0
    with new_release(paths) as (release_id, incoming):
        database = incoming / paths.published.name
        _fresh(paths.building)
        _log(f"Building release {release_id} into {_display(paths.building, paths.project_dir)} "
             "(dbt build: models, seeds, data tests)")
        try:
            code, output = _run_dbt([*BUILD_ARGS, *vars_args], paths, paths.building, quiet)
            if code == 0:
                for part in ("", ".wal"):  # a closed build leaves no .wal; finalize refuses one
                    source = paths.building.with_name(paths.building.name + part)
                    if source.exists():
                        os.rename(source, database.with_name(database.name + part))
        finally:
            _fresh(paths.building)
        built = time.monotonic()
        _step("built")
        if code != 0:
            _log("", err=True)
            _log(f"dbt build FAILED (exit code {code}); nothing was published.", err=True)
            _log(f"Published file left untouched: {paths.published}", err=True)
            _log(f"dbt's log: {paths.project_dir / 'logs' / 'dbt.log'} (or $DBT_LOG_PATH)", err=True)
            _log("Why (dbt):", err=True)
            for line in failure_lines(output):
                _log(f"  {line}", err=True)
            return 1
        marts, storage = release(paths, incoming, release_id, say=None if quiet else _log, sources=sources)
    finished = time.monotonic()

    size_mb = paths.published.stat().st_size / 1e6
    _log("")
    _log(f"Published {paths.published} ({size_mb:.1f} MB, storage {storage}, staging dropped)")
    _log(f"Release   {release_id} (warehouse folder {paths.folder}; current -> releases/{release_id})")
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
    if (paths.build_dir.exists() or paths.build_dir.is_symlink()) and not (paths.build_dir / ".publish.lock").is_file():
        raise PublishError(f"{paths.build_dir} is not a build folder this project made (the docs build writes and "
                           "deletes under it); nothing was changed. Move it away, or set IMR_DUCKDB_PATH to a file "
                           "in a folder of its own")
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
        description="Build the warehouse with dbt into a release folder, test it, and publish the "
        "database and one Parquet file per mart together with one atomic rename, so that open "
        "readers are never blocked and never see a mix of two builds.",
    )
    parser.add_argument("--docs-only", action="store_true",
                        help="only generate the static dbt docs site under target/ (never opens the published file)")
    parser.add_argument("--check", action="store_true",
                        help="verify the published release (every file as its manifest lists it) and print its id")
    parser.add_argument("--vars", metavar="YAML", help="passed to dbt as --vars, e.g. '{unreliable_below_deaths: 10}'")
    parser.add_argument("--project-dir", type=Path, default=None,
                        help="the dbt project (default: the working directory if it has dbt_project.yml, "
                        "else this repository)")
    parser.add_argument("--if-changed", action="store_true",
                        help="do nothing when the published release was built from the same sources and settings "
                        "and is intact (`make warehouse`; never skipped with --vars or inputs outside the project)")
    parser.add_argument("-q", "--quiet", action="store_true",
                        help="do not echo dbt's progress nor say how far each step is (failures and the summary "
                        "are still shown)")
    args = parser.parse_args(argv)

    project_dir = (args.project_dir or _default_project_dir()).resolve()
    if not (project_dir / "dbt_project.yml").exists():
        print(f"publish FAILED: no dbt_project.yml in {project_dir}", file=sys.stderr)
        return 2
    paths = Paths.resolve(project_dir)
    try:
        if args.check:
            release_id = check_release(paths.folder, paths.published.name)
            print(f"{paths.folder}: release {release_id}, every file as its manifest lists it")
            return 0
        if args.docs_only:
            return docs_only(paths, args.vars, args.quiet)
        return publish(paths, args.vars, args.quiet, if_changed=args.if_changed)
    except PublishError as error:
        print(f"\npublish FAILED: {error}", file=sys.stderr, flush=True)
    except (OSError, duckdb.Error) as error:
        # One sentence, not a traceback: disk full, permissions, a file another tool locked.
        first = (str(error).strip().splitlines() or [type(error).__name__])[0]
        print(f"\npublish FAILED: {first} (`--check` says which release is published).", file=sys.stderr, flush=True)
    except KeyboardInterrupt:
        print("\npublish interrupted (`--check` says which release is published).", file=sys.stderr, flush=True)
        return 130
    return 1


if __name__ == "__main__":
    sys.exit(main())
