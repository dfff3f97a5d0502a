"""The documented commands keep their names after the package was grouped by role
(statistics/, geography/, dbt_plugins/, report/, tools/): `python -m infant_mortality.<name>`
and the console script `imr-generate-deis`, run from any folder."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO_ROOT

PACKAGE = REPO_ROOT / "python" / "infant_mortality"
# name -> the module whose main() it runs
SHIMS = {"query": "tools.query", "publish": "tools.publish", "gis": "tools.gis",
         "generate_deis": "tools.generate_deis", "deis_files": "dbt_plugins.deis_files"}


@pytest.mark.parametrize("name", [*SHIMS, "report"])
def test_python_m_entry_point_answers_help_from_any_folder(name, tmp_path):
    result = subprocess.run([sys.executable, "-m", f"infant_mortality.{name}", "--help"], cwd=tmp_path,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.startswith("usage: "), result.stdout[:200]


def test_console_script_imr_generate_deis_answers_help(tmp_path):
    script = Path(sys.executable).with_name("imr-generate-deis")
    result = subprocess.run([str(script), "--help"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.startswith("usage: imr-generate-deis")


@pytest.mark.parametrize("name", SHIMS)
def test_top_level_modules_are_only_entry_points(name):
    """A docstring, `import sys`, the import of the real module's main and the __main__ block:
    no code to drift from the module it stands for."""
    tree = ast.parse((PACKAGE / f"{name}.py").read_text(encoding="utf-8"))
    kinds = [type(node).__name__ for node in tree.body]
    assert kinds == ["Expr", "Import", "ImportFrom", "If"], kinds
    imported = tree.body[2]
    assert imported.module == f"infant_mortality.{SHIMS[name]}" and [a.name for a in imported.names] == ["main"]
    assert (PACKAGE / (SHIMS[name].replace(".", "/") + ".py")).is_file()


def test_make_help_shows_every_target_with_its_whole_description():
    """A description may span several `## ` lines: `make help` joins them, cutting nothing."""
    makefile = (REPO_ROOT / "Makefile").read_text(encoding="utf-8").splitlines()
    expected, doc = {}, []
    for line in makefile:
        if line.startswith("## "):
            doc.append(line[3:])
            continue
        target = line.split(":", 1)[0]
        if doc and ":" in line and target.replace("-", "").isalnum():
            expected[target] = " ".join(doc)
        doc = []
    assert len(expected["bench"].split(". ")) > 1 and "25 GB" in expected["bench"]
    shown = subprocess.run(["make", "--no-print-directory", "help"], cwd=REPO_ROOT, capture_output=True, text=True,
                           timeout=60).stdout.splitlines()
    got = {line.split()[1]: line.split(None, 2)[2] for line in shown}
    assert got == expected
