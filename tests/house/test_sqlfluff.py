"""SQLFluff over the SQL of the dbt project (models/ and tests/dbt/), with the project's .sqlfluff.

The jinja templater renders every file with the project's own macros and no database, so a
file that cannot be rendered or parsed is a failure too, not a skipped file.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from conftest import REPO_ROOT

SQLFLUFF = Path(sys.executable).with_name("sqlfluff")


def _lint(*paths: str | Path) -> list[dict]:
    result = subprocess.run(
        [str(SQLFLUFF), "lint", *map(str, paths), "--config", str(REPO_ROOT / ".sqlfluff"),
         "--format", "json", "--nofail", "--processes", "2"],
        cwd=REPO_ROOT, capture_output=True, text=True)
    assert result.stdout.strip(), result.stderr[-3000:]
    return json.loads(result.stdout)


def test_the_project_sql_passes_sqlfluff():
    files = _lint("models", "tests/dbt")
    sql_files = {str(p.relative_to(REPO_ROOT)) for d in ("models", "tests/dbt") for p in (REPO_ROOT / d).rglob("*.sql")}
    assert {f["filepath"] for f in files} == sql_files  # every file linted, none skipped
    violations = [f"{f['filepath']}:{v.get('start_line_no')} {v['code']} {v['description']}"
                  for f in files for v in f["violations"]]
    assert violations == []


def test_the_configuration_catches_a_violation(tmp_path):
    # The same config must flag what it is there to flag (else the test above cannot fail).
    sample = tmp_path / "bad_model.sql"
    sample.write_text("SELECT a,b from {{ ref('x') }} where {{ var('unreliable_below_deaths') }} > 1  \n")
    codes = {v["code"] for f in _lint(sample) for v in f["violations"]}
    assert {"CP01", "LT01"} <= codes  # upper-case keyword, missing space after comma / trailing space
