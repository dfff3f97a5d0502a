"""The geometry shipped with the project (seeds commune_boundaries and commune_neighbours, the
coverage file) is what the pinned polygons give: regenerated here and compared."""

from __future__ import annotations

from infant_mortality.geography.coverage import COVERAGE_PATH
from infant_mortality.tools.generate_deis import default_project_dir
from infant_mortality.tools.generate_geography import differences, main


def test_shipped_geometry_is_regenerated_identically():
    assert differences(default_project_dir(), COVERAGE_PATH) == []


def test_check_reports_a_changed_seed(tmp_path, capsys, monkeypatch):
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
