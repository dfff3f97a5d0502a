"""The geometry shipped with the project (seeds commune_boundaries and commune_neighbours, the
coverage file) is what the pinned polygons give: regenerated here and compared.

The regeneration (the slow part: cleaning the coverage and finding neighbours) runs once for
the module; both comparisons read that one fresh computation. A whole tool run over the
polygons of all Chile (GEOS's coverage cleaning alone is about 17 s of CPU): the end-to-end group."""

from __future__ import annotations

import shutil

import pytest

from infant_mortality.geography.coverage import COVERAGE_PATH
from infant_mortality.tools import generate_geography
from infant_mortality.tools.generate_deis import default_project_dir
from infant_mortality.tools.generate_geography import BOUNDARIES_SEED, NEIGHBOURS_SEED, differences, main

pytestmark = pytest.mark.e2e  # a whole tool run on the full polygons (`make test-e2e`; `make check` runs it)


@pytest.fixture(scope="module")
def regenerated(tmp_path_factory):
    """The real generator's output, written once into a scratch project."""
    fresh = tmp_path_factory.mktemp("geography")
    (fresh / "seeds").mkdir()
    generate_geography.generate(fresh, fresh / "coverage.parquet")
    return fresh


@pytest.fixture
def generate_once(regenerated, monkeypatch):
    """`generate` hands back the module's one regeneration instead of computing it again."""
    def copy(project_dir, coverage_path):
        for seed in (BOUNDARIES_SEED, NEIGHBOURS_SEED):
            shutil.copyfile(regenerated / seed, project_dir / seed)
        shutil.copyfile(regenerated / "coverage.parquet", coverage_path)
    monkeypatch.setattr(generate_geography, "generate", copy)


def test_shipped_geometry_is_regenerated_identically(generate_once):
    assert differences(default_project_dir(), COVERAGE_PATH) == []


def test_check_reports_a_changed_seed(generate_once, tmp_path, capsys, monkeypatch):
    # A copy of the project whose neighbours seed lost a row: --check names it and fails.
    project = tmp_path / "project"
    (project / "seeds").mkdir(parents=True)
    for name in ("commune_boundaries.csv", "commune_neighbours.csv"):
        text = (default_project_dir() / "seeds" / name).read_text()
        if name == "commune_neighbours.csv":
            text = "".join(text.splitlines(keepends=True)[:-1])
        (project / "seeds" / name).write_text(text)
    monkeypatch.setattr("infant_mortality.tools.generate_geography.default_project_dir", lambda: project)
    assert main(["--check"]) == 1
    assert "seeds/commune_neighbours.csv differs" in capsys.readouterr().out
