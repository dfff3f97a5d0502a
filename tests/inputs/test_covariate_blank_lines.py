"""Blank lines in the covariate files (issue 41 part 8, found by the input fuzz)."""

from __future__ import annotations

import shutil

import pytest

from conftest import REPO_ROOT, run_dbt


@pytest.mark.e2e  # fault injection
def test_a_blank_line_in_a_covariate_file_is_skipped_not_a_nameless_stop(tmp_path):
    # Before (issue 41 part 8, found by the input fuzz): a blank line in a headerless covariate
    # file became a row without a commune code, and the build stopped through the not_null test
    # ("Got 1 result"), naming neither file nor line.
    raw = tmp_path / "raw"
    shutil.copytree(REPO_ROOT / "data" / "raw", raw)
    for name in ("social_priority_index_2019_rm.csv", "poverty_2022_communes.csv"):
        path = raw / "covariates" / name
        lines = path.read_text(encoding="utf-8").split("\n")
        lines[10] = ""
        path.write_text("\n".join(lines), encoding="utf-8")
    run_dbt(["build", "--select", "stg_covariates__social_priority_index_2019", "stg_covariates__poverty_2022"],
            tmp_path / "covariates.duckdb", {"raw_data_dir": str(raw)})
