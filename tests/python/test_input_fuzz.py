"""Property-style fuzz of single-line mutations (issue 28), over a fixed seed.

Every mutation breaks one line of an input the way a hand edit or a bad export does (a letter in
a number, a field lost or added, a line cut, deleted or blanked, a byte that is not UTF-8, a
malformed year, code or age in the microdata). The property: the build either stops with a
message naming the file and the mutated line, or it publishes only the clean build's numbers,
every other cell unavailable with an audit row naming it (tests/python/promise.py).

Builds are the expensive part, so mutations are batched: the aggregate ones on lines of distinct
commune-years share one scoped build (the rates and the audit), the microdata ones one run up to
the input checks (which name the first malformed line and count all of them), and the non-UTF-8
bytes go through the reader itself, which is where they stop.
"""

from __future__ import annotations

import random
import shutil
import time
from pathlib import Path

import pytest

from conftest import REPO_ROOT, run_dbt
from infant_mortality.dbt_plugins.deis_files import DeisFileError, read_text_strict
from infant_mortality.tools.generate_deis import Options, generate
from promise import check_promise

SEED = 28
INE = "ine_vital_statistics_chile_2010_2019.csv"
DEIS = "deis_deaths_by_commune_year_sex_agegroup_1990_2019.csv"
AGGREGATE_SELECT = ["build", "--indirect-selection", "cautious", "--select", "+fct_area_year_rates",
                    "+audit_data_quality", "--exclude", "fct_trends+"]
TALLY: dict[str, int] = {"tried": 0, "kept": 0}


def _letter_in_a_number(line: str, rng: random.Random) -> str:
    digits = [i for i, ch in enumerate(line) if ch.isdigit()]
    i = rng.choice(digits)
    return line[:i] + "O" + line[i + 1:]


def _field_dropped(line: str, rng: random.Random) -> str:
    fields = line.split(",")
    del fields[rng.randrange(len(fields))]
    return ",".join(fields)


def _field_added(line: str, rng: random.Random) -> str:
    fields = line.split(",")
    i = rng.randrange(len(fields))
    return ",".join(fields[:i] + [fields[i]] + fields[i:])


def _line_cut(line: str, rng: random.Random) -> str:
    return line[:len(line) // 2]


def _decimal_point(line: str, rng: random.Random) -> str:
    """A point inside a number of two or more digits (a year, a code or a count): `4.503`."""
    fields = line.split(",")
    i = rng.choice([i for i, field in enumerate(fields) if field.isdigit() and len(field) > 1])
    fields[i] = fields[i][:1] + "." + fields[i][1:]
    return ",".join(fields)


AGGREGATE_MUTATIONS = {
    "letter in a number": _letter_in_a_number,
    "field dropped": _field_dropped,
    "field added": _field_added,
    "line cut": _line_cut,
    "decimal point in a number": _decimal_point,
    "line deleted": None,
    "line blanked": lambda line, rng: "",
}


def mutate_aggregates(raw: Path, rng: random.Random, per_file: dict[str, int]) -> list[tuple[str, int, str]]:
    """Apply single-line mutations to lines of distinct commune-years; (file, line, operator) each."""
    applied, taken = [], set()
    for file, count in per_file.items():
        path = raw / file
        lines = path.read_text(encoding="utf-8").split("\n")
        chosen = []
        while len(chosen) < count:
            number = rng.randrange(2, len(lines))   # 1-based; never the header
            if not lines[number - 1]:
                continue
            fields = lines[number - 1].split(",")
            commune_year = (fields[1].zfill(5), fields[0]) if file == INE else (fields[0].zfill(5), fields[1])
            if commune_year in taken:
                continue
            taken.add(commune_year)
            chosen.append(number)
        deleted = []
        for number in chosen:
            name = rng.choice(sorted(AGGREGATE_MUTATIONS))
            operator = AGGREGATE_MUTATIONS[name]
            if operator is None:
                deleted.append(number)
            else:
                lines[number - 1] = operator(lines[number - 1], rng)
            applied.append((file, number, name))
        lines = [line for i, line in enumerate(lines, start=1) if i not in deleted]
        path.write_text("\n".join(lines), encoding="utf-8")
    return applied


def test_single_line_mutations_of_the_aggregate_inputs_keep_the_promise(bundled_warehouse, tmp_path):
    started = time.monotonic()
    rng = random.Random(SEED)
    raw = tmp_path / "raw"
    shutil.copytree(REPO_ROOT / "data" / "raw", raw)
    applied = mutate_aggregates(raw, rng, {INE: 16, DEIS: 8})
    database = tmp_path / "fuzz.duckdb"
    result = run_dbt(AGGREGATE_SELECT, database, {"raw_data_dir": str(raw)}, check=False)
    assert result.returncode == 0, (applied, result.stdout[-3000:])
    violations = check_promise(bundled_warehouse, database)
    assert violations == [], (applied, violations[:10])
    TALLY["tried"] += len(applied)
    TALLY["kept"] += len(applied)
    print(f"\naggregate fuzz: {len(applied)} mutations, 1 build, {time.monotonic() - started:.0f} s; "
          f"promise kept: {len(applied)}")


def test_a_byte_that_is_not_utf8_stops_at_the_reader_naming_its_line(tmp_path):
    rng = random.Random(SEED)
    clean = (REPO_ROOT / "data" / "raw" / INE).read_bytes()
    lines = clean.split(b"\n")
    path = tmp_path / INE
    for _ in range(20):
        number = rng.randrange(2, len(lines))
        line = lines[number - 1]
        at = rng.randrange(len(line) + 1)
        path.write_bytes(b"\n".join(lines[:number - 1] + [line[:at] + bytes([rng.randrange(0x80, 0x100)])
                                                          + line[at:]] + lines[number:]))
        with pytest.raises(DeisFileError, match=rf"{INE} line {number}: byte 0x[89A-F][0-9A-F] is not UTF-8 text"):
            read_text_strict(str(path))
        TALLY["tried"] += 1
        TALLY["kept"] += 1


MICRODATA_MUTATIONS = {   # (column, value) -> record_problem
    "year with a decimal point": (0, "2.018"),
    "year typo": (0, "2109"),
    "commune code with decimals": (5, "15101.9"),
    "commune code of 6 digits": (5, "151012"),
    "age with decimals": (4, "1.5"),
}


def test_single_line_malformations_of_generated_microdata_stop_naming_the_first_line(tmp_path):
    rng = random.Random(SEED)
    files = tmp_path / "files"
    generate(Options(out_dir=files, regions=("15",), years=(2018, 2019), project_dir=REPO_ROOT))
    deaths = files / "synthetic_deis_deaths_2018_2019.csv"
    lines = deaths.read_bytes().decode("latin-1").split("\n")
    numbers = sorted(rng.sample(range(1, len(lines)), 12))   # headerless: line 1 is a record
    for number in numbers:
        column, value = MICRODATA_MUTATIONS[rng.choice(sorted(MICRODATA_MUTATIONS))]
        fields = lines[number - 1].split(";")
        fields[column] = value
        lines[number - 1] = ";".join(fields)
    deaths.write_bytes("\n".join(lines).encode("latin-1"))
    result = run_dbt(["build", "--indirect-selection", "cautious", "--select", "+int_deis__input_checks"],
                     tmp_path / "fuzz.duckdb",
                     {"vital_source": "deis_microdata", "deis_deaths_path": str(deaths),
                      "deis_births_path": str(files / "nacimientos"), "deis_cache_dir": str(tmp_path / "cache")},
                     check=False)
    assert result.returncode != 0
    assert f"{deaths} line {numbers[0]}:" in result.stdout, result.stdout[-3000:]
    assert f"{len(numbers)} malformed record(s) in all" in result.stdout
    TALLY["tried"] += len(numbers)
    TALLY["kept"] += len(numbers)


def test_zz_fuzz_tally():
    """The count for the closing note (run with -s): mutations tried and promises kept."""
    print(f"\nfuzz (seed {SEED}): {TALLY['tried']} single-line mutations tried, promise kept for {TALLY['kept']}")
    assert TALLY["tried"] == TALLY["kept"] == 16 + 8 + 20 + 12
