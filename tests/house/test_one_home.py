"""One home per list: the indicators live in seeds/indicators.csv, the stratifiers in
seeds/stratifiers.csv, the rooms in models/_groups.yml. Code, models, descriptions and tests read
them from there (a seed, a dimension mart, the YAML); a list of three or more of their codes
spelled anywhere else is a second home that drifts (three copies had drifted when this test was
written). Hand-computed expectations keyed by code (`{"imr": (3, 4), ...}`) are data, not lists,
and are left alone: only a run of codes separated by commas, `or`/`and` or a gloss in
parentheses counts, and in Python a list, tuple or set literal of them."""

from __future__ import annotations

import ast
import csv
import re
import subprocess

import pytest
import yaml

from conftest import REPO_ROOT

SCANNED = ["models", "macros", "python", "tests", "bi", "seeds/*.yml", "dbt_project.yml"]
SUFFIXES = (".py", ".sql", ".yml", ".yaml")
# The homes themselves, and this file (its detector's examples are lists on purpose).
HOMES = {"seeds/indicators.csv", "seeds/stratifiers.csv", "models/_groups.yml", "seeds/trend_methods.csv",
         "tests/house/test_one_home.py"}
# Copies that cannot read their home, each held equal to it by a test: the var check runs while
# dbt parses, before any seed exists; the trend model's methods are checked against the seed.
HELD_EQUAL = {"macros/validate_vars.sql": "tests/trends/test_trend_methods.py",
              "python/infant_mortality/statistics/trends.py": "tests/trends/test_trend_methods.py",
              "tests/trends/test_trend_methods.py": "its own examples"}
# A gap between two codes of a spelled list: quotes, backticks, commas, brackets, an optional
# gloss in parentheses ("imr (TMI), nmr (TMN)") and an optional "or" / "and" / "y" / "o".
LIST_GAP = re.compile(r"""^[\s`'",\[\]]*(\([^()]{0,60}\))?[\s`'",;\]]*((or|and|y|o)\s)?[\s`'"\[]*$""")


def _seed_codes(seed: str, column: str) -> list[str]:
    with open(REPO_ROOT / "seeds" / seed, encoding="utf-8") as handle:
        return [row[column] for row in csv.DictReader(handle)]


def _rooms() -> list[str]:
    groups = yaml.safe_load((REPO_ROOT / "models" / "_groups.yml").read_text())["groups"]
    return [group["name"] for group in groups]


LISTS = {
    "indicators (seeds/indicators.csv)": (_seed_codes("indicators.csv", "indicator"), 3),
    "stratifiers (seeds/stratifiers.csv)": (_seed_codes("stratifiers.csv", "stratifier"), 3),
    "rooms (models/_groups.yml)": (_rooms(), 5),
    "trend methods (seeds/trend_methods.csv)": (_seed_codes("trend_methods.csv", "method"), 3),
}


def _scanned_files() -> list[str]:
    listed = subprocess.run(["git", "ls-files", *SCANNED], cwd=REPO_ROOT, capture_output=True, text=True,
                            check=True).stdout.split()
    return [f for f in listed if f.endswith(SUFFIXES) and f not in HOMES and f not in HELD_EQUAL]


def _spelled_runs(text: str, codes: list[str]) -> list[tuple[int, int]]:
    """Each run of codes in `text` that reads as a list (codes joined by list gaps, across lines
    too): (the offset where it starts, how many codes)."""
    pattern = re.compile(r"(?<![A-Za-z0-9_])(" + "|".join(map(re.escape, codes)) + r")(?![A-Za-z0-9_])")
    runs, start, seen = [], None, set()
    matches = list(pattern.finditer(text))
    for before, after in zip([None, *matches], matches):
        joined = before is not None and LIST_GAP.match(text[before.end():after.start()])
        if joined and after.group(1) not in seen:
            seen.add(after.group(1))
            runs[-1] = (start, len(seen))
        else:
            start, seen = after.start(), {after.group(1)}
            runs.append((start, 1))
    return runs


def _longest_spelled_run(text: str, codes: list[str]) -> int:
    return max((length for _, length in _spelled_runs(text, codes)), default=0)


def _python_literals(path, codes: set[str], least: int) -> list[int]:
    """Line numbers of list, tuple or set literals holding `least` or more of the codes."""
    tree = ast.parse((REPO_ROOT / path).read_text(encoding="utf-8"))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            strings = {e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)}
            if len(strings & codes) >= least:
                found.append(node.lineno)
    return found


def second_homes(files: list[str]) -> list[str]:
    found = []
    for path in files:
        text = (REPO_ROOT / path).read_text(encoding="utf-8", errors="replace")
        for name, (codes, least) in LISTS.items():
            for start, length in _spelled_runs(text, codes):
                if length >= least:
                    number = text.count("\n", 0, start) + 1
                    found.append(f"{path}:{number}: {name} spelled: {text[start:start + 80].strip()}")
            if path.endswith(".py"):
                found += [f"{path}:{number}: {name} spelled as a literal"
                          for number in _python_literals(path, set(codes), least)]
    return sorted(set(found))


def test_no_list_of_indicators_stratifiers_or_rooms_is_spelled_outside_its_home():
    assert second_homes(_scanned_files()) == []


@pytest.mark.parametrize("text, spelled", [
    ("description: imr, nmr, enmr or pnmr.", True),
    ("description: imr (TMI), nmr (TMN), enmr (TMNP) or pnmr (TMIT).", True),
    ("where indicator in ('imr', 'nmr', 'enmr')", True),
    ('HAND = {("1", 2015): {"imr": (3, 4), "nmr": (2, 4), "enmr": (1, 4), "pnmr": (1, 4)}}', False),
    ("-- imr = nmr + pnmr + age_unknown_infant, nmr = enmr + late neonatal", False),
    ("where indicator = 'imr' and other = 'nmr'", False),
])
def test_the_detector_tells_a_spelled_list_from_expectations_and_identities(text, spelled):
    codes, least = LISTS["indicators (seeds/indicators.csv)"]
    assert (_longest_spelled_run(text, codes) >= least) is spelled


def test_the_detector_finds_a_list_planted_in_a_model(tmp_path, monkeypatch):
    planted = tmp_path / "models" / "planted.sql"
    planted.parent.mkdir()
    planted.write_text("select 1 where stratifier in ('income_poverty_2013', 'income_poverty_2022',\n"
                       "                             'social_priority_index_2019')\n")
    monkeypatch.setattr("test_one_home.REPO_ROOT", tmp_path)
    assert [line.split(": ")[0:2] for line in second_homes(["models/planted.sql"])] == [
        ["models/planted.sql:1", "stratifiers (seeds/stratifiers.csv) spelled"]]
    python = tmp_path / "models" / "planted.py"
    python.write_text("ROOMS = (\n 'inputs', 'core', 'comparisons',\n 'trends', 'inequity')\n")
    assert [line.split(": ")[0:2] for line in second_homes(["models/planted.py"])] == [
        ["models/planted.py:1", "rooms (models/_groups.yml) spelled as a literal"],
        ["models/planted.py:2", "rooms (models/_groups.yml) spelled"]]


def test_the_superset_exposure_lists_the_marts_its_export_reads():
    """dbt's lineage (`dbt ls -s +exposure:superset_dashboard`) is only right if the exposure
    names every mart a dataset of bi/superset/export reads, by table or in its SQL."""
    read = set()
    for path in (REPO_ROOT / "bi" / "superset" / "export" / "datasets").rglob("*.yaml"):
        dataset = yaml.safe_load(path.read_text(encoding="utf-8"))
        if dataset.get("schema") == "marts" and not dataset.get("sql"):
            read.add(dataset["table_name"])
        read |= set(re.findall(r"\bmarts\.([a-z_]+)", dataset.get("sql") or ""))
    exposures = yaml.safe_load((REPO_ROOT / "models" / "_exposures.yml").read_text(encoding="utf-8"))["exposures"]
    superset = next(e for e in exposures if e["name"] == "superset_dashboard")
    assert {re.fullmatch(r"ref\('(\w+)'\)", r).group(1) for r in superset["depends_on"]} == read
