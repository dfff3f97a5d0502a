"""`make warehouse` does nothing when the published release was built from the same sources and
settings and is intact (`publish --if-changed`, `tools/sources.py`); anything else rebuilds."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from infant_mortality.tools.publish import MANIFEST, Paths, up_to_date
from infant_mortality.tools.sources import fingerprint
from test_publish import copy_published, run_publish


@pytest.fixture
def project(tmp_path) -> Path:
    """A minimal project tree: what the fingerprint reads, and nothing else."""
    root = tmp_path / "project"
    (root / "models").mkdir(parents=True)
    (root / "data" / "raw").mkdir(parents=True)
    (root / "dbt_project.yml").write_text("name: p\nvars:\n  raw_data_dir: data/raw\n  deis_deaths_path: ''\n")
    (root / "models" / "a.sql").write_text("select 1 as x\n")
    (root / "data" / "raw" / "births.csv").write_text("year,births\n2010,5\n")
    return root


def test_the_fingerprint_follows_every_source_and_setting_and_nothing_else(project, monkeypatch):
    monkeypatch.delenv("IMR_TEST_SETTING", raising=False)
    before = fingerprint(project, None)
    assert before == fingerprint(project, None)

    (project / "models" / "__pycache__").mkdir()
    (project / "models" / "__pycache__" / "a.pyc").write_bytes(b"compiled")
    (project / "profiles").mkdir()
    (project / "profiles" / ".user.yml").write_text("id: 5d3b\n")  # dbt's first run writes it
    monkeypatch.setenv("IMR_DUCKDB_PATH", "/elsewhere/infant_mortality.duckdb")  # where, not what
    monkeypatch.setenv("DBT_LOG_PATH", "/elsewhere/logs")
    assert fingerprint(project, None) == before

    monkeypatch.setenv("IMR_TEST_SETTING", "1")
    assert fingerprint(project, None) != before
    monkeypatch.delenv("IMR_TEST_SETTING")

    (project / "data" / "raw" / "births.csv").write_text("year,births\n2010,6\n")  # one digit of the data
    changed_data = fingerprint(project, None)
    assert changed_data != before
    (project / "models" / "b.sql").write_text("select 2 as x\n")
    assert fingerprint(project, None) not in (before, changed_data)


@pytest.mark.parametrize("setting", ["raw_data_dir: /home/analyst/deis", "deis_deaths_path: ../defunciones.zip"])
def test_inputs_outside_the_project_or_vars_on_the_command_line_are_never_skipped(project, setting):
    assert fingerprint(project, "{unreliable_below_deaths: 10}") is None
    name, value = setting.split(": ")
    text = (project / "dbt_project.yml").read_text()
    (project / "dbt_project.yml").write_text(text.replace(f"  {name}: ", f"  {name}: {value}  # was: "))
    assert fingerprint(project, None) is None


def test_a_second_publish_of_the_same_sources_builds_nothing(published_warehouse, tmp_path):
    copy = copy_published(published_warehouse.path, tmp_path)
    releases_before = sorted(p.name for p in (copy.parent / "releases").iterdir())
    manifest = json.loads((copy.parent / "current" / MANIFEST).read_text())
    assert manifest["sources_sha256"] and len(manifest["sources_sha256"]) == 64

    result = run_publish(copy, "--if-changed")
    assert result.returncode == 0, result.stderr
    assert f"Up to date: release {manifest['release_id']}" in result.stdout
    assert sorted(p.name for p in (copy.parent / "releases").iterdir()) == releases_before
    assert "Building release" not in result.stdout


def test_a_changed_fingerprint_or_a_damaged_file_means_rebuilding(published_warehouse, tmp_path):
    copy = copy_published(published_warehouse.path, tmp_path)
    paths = Paths(project_dir=tmp_path, published=copy, build_dir=copy.parent / ".build",
                  releases=copy.parent / "releases", current=copy.parent / "current", target_dir=tmp_path / "t")
    sources = json.loads((copy.parent / "current" / MANIFEST).read_text())["sources_sha256"]
    assert up_to_date(paths, sources) == (copy.parent / "current").resolve().name
    assert up_to_date(paths, "0" * 64) is None
    assert up_to_date(paths, None) is None

    parquet = next((copy.parent / "current" / "parquet").glob("*.parquet"))
    parquet.chmod(0o644)
    with open(parquet, "ab") as handle:
        handle.write(b"\0")
    assert up_to_date(paths, sources) is None
