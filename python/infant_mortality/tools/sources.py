"""What a build of the warehouse is made from, as one fingerprint (`make warehouse`'s up-to-date check).

`make warehouse` runs `publish --if-changed`: when the published release was built from exactly the
same sources and settings, and every one of its files is still the one its manifest lists, there is
nothing to build (as `make` does for a target newer than its inputs). The fingerprint covers

- every file of the project the build reads: models, macros, seeds, the bundled data, dbt's data
  tests, the profile, `dbt_project.yml`, the Python package (the dbt Python models import it) and
  the locked requirements;
- the versions of Python, dbt-core and DuckDB;
- the environment variables that steer dbt or the project (`DBT_*`, `IMR_*`), except those that
  only say where the outputs and logs go.

A build is never skipped when its inputs may live outside the project, where a fingerprint of the
project cannot see them change: when `--vars` is given, or when `dbt_project.yml` points an input
path var outside the bundled data folder. `fingerprint()` returns None then.
"""
from __future__ import annotations

import hashlib
import os
import sys
from importlib import metadata
from pathlib import Path

import yaml

# Folders and files of the project that a build reads (relative to the project root).
SOURCE_FOLDERS = ("models", "macros", "seeds", "data", "tests/dbt", "profiles", "python/infant_mortality")
SOURCE_FILES = ("dbt_project.yml", "requirements.lock", "pyproject.toml")
# Written by the tools themselves, not sources: Python's bytecode, and the anonymous id dbt writes
# beside the profile on its first run (it changed the fingerprint of a fresh clone's first build).
SKIPPED_NAMES = ("__pycache__", ".user.yml")
# Path vars that name inputs (the cache and spill folders do not change what is built).
INPUT_PATH_VARS = ("raw_data_dir", "deis_deaths_path", "deis_births_path", "deis_births_control_path")
BUNDLED_DATA = "data"
ENVIRONMENT_PREFIXES = ("DBT_", "IMR_")
WHERE_OUTPUTS_GO = ("IMR_DUCKDB_PATH", "DBT_TARGET_PATH", "DBT_LOG_PATH")
VERSIONED_PACKAGES = ("dbt-core", "dbt-duckdb", "duckdb")


def _source_files(project_dir: Path) -> list[Path]:
    files = [project_dir / name for name in SOURCE_FILES if (project_dir / name).is_file()]
    for folder in SOURCE_FOLDERS:
        root = project_dir / folder
        if root.is_dir():
            files += [path for path in root.rglob("*")
                      if path.is_file() and not any(part in SKIPPED_NAMES for part in path.parts)]
    return sorted(files)


def outside_inputs(project_dir: Path) -> list[str]:
    """The input path vars of `dbt_project.yml` that name something outside the bundled data."""
    project = yaml.safe_load((project_dir / "dbt_project.yml").read_text()) or {}
    declared = project.get("vars") or {}
    bundled = (project_dir / BUNDLED_DATA).resolve()
    outside = []
    for name in INPUT_PATH_VARS:
        value = str(declared.get(name) or "").strip()
        if value and not (project_dir / value).resolve().is_relative_to(bundled):
            outside.append(f"{name}: {value}")
    return outside


def fingerprint(project_dir: Path, dbt_vars: str | None) -> str | None:
    """SHA-256 over the build's sources and settings, or None when a build must never be skipped."""
    if dbt_vars or outside_inputs(project_dir):
        return None
    digest = hashlib.sha256()
    for path in _source_files(project_dir):
        digest.update(str(path.relative_to(project_dir)).encode() + b"\0")
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    versions = [f"python {sys.version}"] + [f"{name} {metadata.version(name)}" for name in VERSIONED_PACKAGES]
    environment = [f"{key}={value}" for key, value in sorted(os.environ.items())
                   if key.startswith(ENVIRONMENT_PREFIXES) and key not in WHERE_OUTPUTS_GO]
    digest.update("\n".join(versions + environment).encode())
    return digest.hexdigest()
