"""The documentation keeps its promises: one list of rooms, a README that is a front door, and
no path to a document that does not exist.

- CONTRIBUTING.md holds the only list of the rooms; its table has dbt's groups
  (`models/_groups.yml`), no more, no fewer, in the same order.
- README.md stays under 200 lines and states no duration (durations live in BENCHMARKS.md,
  produced by the benchmarks).
- Every `docs/...` path named in the README, CONTRIBUTING, the docs, the models, macros, seeds,
  the Python package and the tests exists, and a heading quoted after a `docs/methods/` file on
  the same line is a heading of that file. Relative links inside Markdown files resolve.
- `docs/methods/` has one file per room that defines a statistic, listed in room order by its
  index, with headings by subject (no "issue NN" heading).

Reads files only: no build, no warehouse.
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml

REPO_ROOT = Path(__file__).resolve().parents[2]
README_MAX_LINES = 200
# A number followed by a unit of time: "45 s", "1.0 minute", "11 minutes", "2 hours".
TIMING = re.compile(r"\b\d+(?:[.,]\d+)?\s?(?:s|sec|secs|seconds?|min|mins|minutes?|h|hours?)\b")
DOC_PATH = re.compile(r"(?<![\w/.-])docs/[\w./-]*[\w/]")
QUOTED_HEADING = re.compile(r"(?<![\w/.-])(docs/methods/[\w-]+\.md)`{0,2},\s\"([^\"]+)\"")
MARKDOWN_LINK = re.compile(r"\]\(([^)\s]+)\)")
# Where a docs/ path may be named: documentation, models, macros, seeds, the package, tests.
SCANNED = ("README.md", "CONTRIBUTING.md", "BENCHMARKS.md", "Makefile", "data/README.md", "docs/**/*.md",
           "models/**/*.yml", "models/**/*.sql", "models/**/*.py", "models/**/*.md", "macros/**/*.sql",
           "macros/**/*.yml", "seeds/**/*.yml", "python/**/*.py", "tests/**/*.py", "tests/**/*.sql")


def _groups() -> list[str]:
    return [group["name"] for group in yaml.safe_load((REPO_ROOT / "models" / "_groups.yml").read_text())["groups"]]


def _section(markdown: str, heading: str) -> str:
    """The text of the `## heading` section of a Markdown document."""
    match = re.search(rf"^## {re.escape(heading)}\n(.*?)(?=^## |\Z)", markdown, re.M | re.S)
    assert match, f"no section '## {heading}'"
    return match[1]


def _scanned_files() -> list[Path]:
    files = {path for pattern in SCANNED for path in REPO_ROOT.glob(pattern) if path.is_file()}
    return sorted(path for path in files if "__pycache__" not in path.parts)


def _headings(path: Path) -> list[str]:
    return [line.lstrip("#").strip() for line in path.read_text(encoding="utf-8").splitlines()
            if line.startswith("#")]


def test_contributing_lists_the_rooms_of_models_groups_yml_in_order():
    rooms_section = _section((REPO_ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8"), "Rooms")
    table = re.findall(r"^\| `([a-z_]+)/` \|", rooms_section, re.M)
    assert table == _groups(), ("CONTRIBUTING.md's room table must list models/_groups.yml's groups, in its order",
                                table, _groups())


def test_the_readme_is_a_front_door_without_timings():
    readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    lines = readme.splitlines()
    assert len(lines) < README_MAX_LINES, f"README.md has {len(lines)} lines; the detail belongs in docs/"
    timings = [(number, line) for number, line in enumerate(lines, 1) if TIMING.search(line)]
    assert timings == [], "durations belong in BENCHMARKS.md, not in the README"
    # The two commands that work on a fresh machine come first.
    assert lines[2] == "```sh" and lines[3].startswith("make warehouse ") and lines[4].startswith("make check "), \
        lines[:6]


def test_the_timing_pattern_catches_what_it_should():
    for text in ("took 4 minutes 13 s", "the first make warehouse 1.0 minute", "about 45 minutes",
                 "75 s at load 1.4", "an hour, 2 hours", "12.6 min"):
        assert TIMING.search(text), text
    for text in ("2 cores", "346 communes", "per 1000 live births", "2010-2019", "5 years", "8 sections"):
        assert not TIMING.search(text), text


def test_every_docs_path_named_in_the_repository_exists():
    missing = []
    for path in _scanned_files():
        for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            for found in DOC_PATH.findall(line):
                target = found.rstrip("./")
                if not (REPO_ROOT / target).exists():
                    missing.append(f"{path.relative_to(REPO_ROOT)}:{number}: {found}")
    assert missing == []


def test_a_heading_quoted_after_a_methods_file_is_one_of_its_headings():
    wrong = []
    for path in _scanned_files():
        for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            for file, heading in QUOTED_HEADING.findall(line):
                target = REPO_ROOT / file
                if target.exists() and not any(h.startswith(heading) for h in _headings(target)):
                    wrong.append(f"{path.relative_to(REPO_ROOT)}:{number}: {file}, \"{heading}\"")
    assert wrong == []


def test_relative_links_in_markdown_resolve():
    broken = []
    for path in [*REPO_ROOT.glob("*.md"), *REPO_ROOT.glob("docs/**/*.md"), REPO_ROOT / "data" / "README.md"]:
        for link in MARKDOWN_LINK.findall(path.read_text(encoding="utf-8")):
            if re.match(r"[a-z]+:", link) or link.startswith("#"):
                continue
            if not (path.parent / link.split("#")[0]).exists():
                broken.append(f"{path.relative_to(REPO_ROOT)}: {link}")
    assert broken == []


def test_the_methods_are_one_file_per_room_in_room_order_with_headings_by_subject():
    methods = REPO_ROOT / "docs" / "methods"
    index = (methods / "README.md").read_text(encoding="utf-8")
    listed = re.findall(r"^\| `([a-z_]+)` \| \[([\w-]+\.md)\]", index, re.M)
    rooms = [room for room, _ in listed]
    assert [room for room in _groups() if room in rooms] == rooms, "the index lists the rooms in room order"
    assert all(file == f"{room}.md" and (methods / file).exists() for room, file in listed)
    companions = {"README.md", "joinpoint.md"}  # the index, and the trends room's joinpoint rules
    assert {p.name for p in methods.glob("*.md")} - companions == {file for _, file in listed}
    assert not (REPO_ROOT / "docs" / "methods.md").exists(), "the contract lives in docs/methods/, by room"
    by_issue = [f"{p.name}: {h}" for p in methods.glob("*.md") for h in _headings(p)
                if re.search(r"\bissue \d+|^\d+(\.\d+)*\.? ", h, re.I)]
    assert by_issue == [], "headings by subject, not by issue or section number"
