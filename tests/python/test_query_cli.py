"""The query command answers from a built warehouse and says clearly what is wrong otherwise."""

import csv
import subprocess
import sys

from conftest import REPO_ROOT


def run_query(*args, env_path):
    return subprocess.run([sys.executable, "-m", "infant_mortality.query", *args, "--warehouse", str(env_path)],
                          cwd=REPO_ROOT, capture_output=True, text=True)


def test_prints_and_exports_a_mart(bundled_warehouse, tmp_path):
    printed = run_query("select year, deaths from marts.fct_rates_commune_year "
                        "where area_level = 'region' and area_code = '13' order by year limit 1", env_path=bundled_warehouse)
    assert printed.returncode == 0
    assert printed.stdout.split() == ["year", "deaths", "2010", "721"]

    out = tmp_path / "communes.csv"
    exported = run_query("select commune_code, commune_name from marts.dim_commune where region_code = '13'",
                         "--csv", str(out), env_path=bundled_warehouse)
    assert exported.returncode == 0
    rows = list(csv.DictReader(out.open(encoding="utf-8")))
    assert len(rows) == 52 and {"commune_code": "13120", "commune_name": "Ñuñoa"} in rows


def test_missing_warehouse_and_bad_sql_are_clear_errors(bundled_warehouse, tmp_path):
    missing = run_query("select 1", env_path=tmp_path / "nothing.duckdb")
    assert missing.returncode == 1 and "run `make warehouse` first" in missing.stderr
    bad = run_query("select * from marts.no_such_mart", env_path=bundled_warehouse)
    assert bad.returncode == 1 and "no_such_mart" in bad.stderr
