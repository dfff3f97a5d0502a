"""marts.meta_build and marts.dim_indicator: how the file was built, and the indicator list."""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
from datetime import datetime, timedelta, timezone

import duckdb
import yaml

import dbt.version
from conftest import REPO_ROOT, query


def _meta(warehouse) -> dict:
    with duckdb.connect(str(warehouse), read_only=True) as con:
        cursor = con.execute("select * from marts.meta_build")
        names = [d[0] for d in cursor.description]
        rows = cursor.fetchall()
    assert len(rows) == 1
    return dict(zip(names, rows[0]))


def _declared_vars() -> dict:
    return yaml.safe_load((REPO_ROOT / "dbt_project.yml").read_text())["vars"]


def test_meta_build_records_the_bundled_build(bundled_warehouse):
    meta = _meta(bundled_warehouse)
    assert re.fullmatch(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", meta["build_id"])
    assert abs(datetime.now(timezone.utc).replace(tzinfo=None) - meta["built_at"]) < timedelta(hours=3)
    assert meta["dbt_version"] == dbt.version.__version__
    assert meta["duckdb_version"].lstrip("v") == duckdb.__version__
    assert meta["vital_source"] == "ine_aggregates"
    assert meta["count_basis"] == "derived: INE deaths all ages - DEIS deaths aged 1+; bias against MINSAL by region: fct_official_anchors"
    # The default scope (scope_regions: []) is every region in the input: Chile's 16 regions.
    assert _declared_vars()["scope_regions"] == []
    assert (meta["scope_regions"], meta["scope_year_start"], meta["scope_year_end"]) == (
        ",".join(f"{r:02d}" for r in range(1, 17)), 2010, 2019)
    # Every declared var with its default, since none was passed.
    assert json.loads(meta["vars_json"]) == _declared_vars()
    # Every file of the raw-data folder (sub-folders too), with its size and checksum as hashed here;
    # each is read by a dbt source (the population file too since issue 41: the births check).
    raw = REPO_ROOT / "data" / "raw"
    unread: set[str] = set()
    expected_files = [
        {"input": "raw_data", "entry": path.relative_to(REPO_ROOT).as_posix(), "size_bytes": path.stat().st_size,
         "sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
         "layout": None if path.name in unread else "aggregate CSV"}
        for path in sorted(raw.rglob("*"), key=lambda p: p.relative_to(REPO_ROOT).as_posix()) if path.is_file()]
    # Every file git holds under data/raw (today INE, DEIS, population, the covariates, two UN IGME
    # files, MINSAL, births 2001-2016, the RM's corrected births), none left out of the walk.
    tracked = subprocess.run(["git", "ls-files", "data/raw"], cwd=REPO_ROOT, capture_output=True, text=True)
    if tracked.returncode == 0:
        assert [f["entry"] for f in expected_files] == sorted(tracked.stdout.split())
    assert len(expected_files) >= 10
    assert json.loads(meta["input_files_json"]) == expected_files
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO_ROOT, capture_output=True, text=True)
    if head.returncode == 0:
        assert meta["git_commit"] == head.stdout.strip()
    else:
        assert meta["git_commit"] is None and "not a git checkout" in meta["git_note"]


def test_meta_build_shows_vars_passed_on_the_command_line(ols_trends_warehouse, bundled_warehouse):
    meta = _meta(ols_trends_warehouse)
    values = json.loads(meta["vars_json"])
    assert values["unreliable_below_deaths"] == 25  # declared, overridden with --vars
    assert values["trend_prais_variant"] == "ols"
    # Every other declared var (the list read from dbt_project.yml) keeps its default.
    overridden = ("unreliable_below_deaths", "trend_prais_variant")
    assert {k: v for k, v in values.items() if k not in overridden} == {
        k: v for k, v in _declared_vars().items() if k not in overridden}
    assert meta["build_id"] != _meta(bundled_warehouse)["build_id"]


def test_dim_indicator_is_the_seed_and_covers_every_mart(bundled_warehouse):
    import csv

    with open(REPO_ROOT / "seeds" / "indicators.csv", encoding="utf-8") as f:
        seed = {row["indicator"]: row for row in csv.DictReader(f)}
    rows = query(bundled_warehouse, "select indicator, abbreviation_es, name_en, multiplier, in_aggregates, "
                                    "has_counts from marts.dim_indicator order by sort_order")
    assert [r[0] for r in rows] == list(seed) and len(seed) >= 4
    assert [r[3] for r in rows] == [int(row["multiplier"]) for row in seed.values()]
    assert [r[4] for r in rows] == [row["in_aggregates"] == "true" for row in seed.values()]
    # The bundled aggregates count infant deaths: the indicators that read them have counts (imr among them).
    assert [r[0] for r in rows if r[5]] == [r[0] for r in rows if r[4]] and "imr" in [r[0] for r in rows if r[5]]
    for mart in ("fct_area_year_rates", "fct_commune_vs_region", "fct_trends", "fct_area_period_rates"):
        (outside,), = query(bundled_warehouse, f"select count(*) from marts.{mart} "
                                               "where indicator not in (select indicator from marts.dim_indicator)")
        assert outside == 0, mart


def test_git_commit_is_null_with_a_note_outside_a_git_checkout(tmp_path, monkeypatch):
    # The Python model int_build_git run as dbt runs it, from a folder that is not a checkout.
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "int_build_git", REPO_ROOT / "models" / "meta" / "intermediate" / "int_build_git.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)

    class Dbt:
        def config(self, **_):
            pass

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GIT_DIR", raising=False)
    session = duckdb.connect()  # dbt passes the build's connection; the model returns a relation on it
    [(commit, note)] = module.model(Dbt(), session).fetchall()
    assert commit is None and "not a git checkout" in note
    monkeypatch.chdir(REPO_ROOT)
    [(inside, _)] = module.model(Dbt(), session).fetchall()
    assert re.fullmatch(r"[0-9a-f]{40}", inside)
