"""Property-style fuzz of single-line mutations (issue 28), over a fixed seed.

Every mutation breaks one line of an input the way a hand edit or a bad export does (a letter in
a number, a field lost or added, a line cut, deleted or blanked, a byte that is not UTF-8, a
malformed year, code or age in the microdata). The property: the build either stops with a
message naming the file and the mutated line, or it publishes only the clean build's numbers,
every other cell unavailable with an audit row naming it (tests/promise.py).

Builds are the expensive part, so mutations are batched: the aggregate ones on lines of distinct
commune-years share one scoped build (the rates and the audit), the microdata ones one run up to
the input checks (which name the first malformed line and count all of them), and the non-UTF-8
bytes go through the reader itself, which is where they stop.

Issue 41 part 8: the fuzz covers every input file the build reads. The UN IGME files, the
MINSAL anchors, the covariates, the INE population, the bundled births 2001-2016 and the RM's
corrected births are mutated one line per file per round, and every mart, not only
fct_area_year_rates, is compared with the clean build (the rule is in the docstring of
test_single_line_mutations_of_every_other_input_keep_the_promise); the year window vars are set
to random windows inside and around the data.
"""

from __future__ import annotations

import json
import random
import re
import shutil
import time
from pathlib import Path

import pytest

from conftest import REPO_ROOT, build_selected, run_dbt
from infant_mortality.dbt_plugins.deis_files import DeisFileError, read_text_strict
from infant_mortality.tools.generate_deis import Options, generate
from promise import PROMISE_MODELS, check_promise, differing_marts

# End to end: a group of its own (`make test-e2e`; `make check` and CI run it with the rest).
pytestmark = pytest.mark.e2e

SEED = 28
INE = "ine_vital_statistics_chile_2010_2019.csv"
DEIS = "deis_deaths_by_commune_year_sex_agegroup_1990_2019.csv"
AGGREGATE_SELECT = [*build_selected(*PROMISE_MODELS), "--exclude", "fct_trends+"]   # what check_promise reads
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
    """A point inside a number of two or more digits (a year, a code or a count): `4.503`; on a
    line without one (a rate `9.2` beside a year is one), a letter in a number."""
    fields = line.split(",")
    candidates = [i for i, field in enumerate(fields) if field.isdigit() and len(field) > 1]
    if not candidates:
        return _letter_in_a_number(line, rng)
    i = rng.choice(candidates)
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


# The other inputs the build reads (issue 41 part 8): each file, the source that reads it.
SURFACES = {
    "un_igme_chile_2000_2019.csv": "un_igme.estimates_2020_round",
    "un_igme_2015_round_chile_bounds.csv": "un_igme.bounds_2015_round",
    "minsal_drdss_2023_infant_mortality_rates.csv": "minsal.drdss_2023_infant_mortality_rates",
    "covariates/poverty_2022_communes.csv": "covariates.poverty_2022_communes",
    "covariates/income_poverty_2013_rm.csv": "covariates.income_poverty_2013_rm",
    "covariates/social_priority_index_2019_rm.csv": "covariates.social_priority_index_2019_rm",
    "ine_population_by_commune_year_2002_2035.csv": "ine.population",
    "deis_births_by_commune_year_2001_2016.csv": "deis_aggregates.births_by_commune_year",
    "seremi_rm_corrected_births_1992_2021.csv": "seremi_rm.corrected_births",
}
SURFACE_ROUNDS = 2          # rounds of one mutation per file: 2 x 8 mutations
KNOWN_BUGS: set[tuple[str, int, str]] = set()   # (file, line, operator) left out: see the report


def _stop_names(output: str, file: str, number: int) -> bool:
    """Whether dbt's output names `file` and line `number` (`f line 12`, `f lines 11, 12`)."""
    name = re.escape(Path(file).name)
    return any(str(number) in re.findall(r"\d+", match)
               for match in re.findall(rf"{name} lines? (\d+(?:(?:, | and )\d+)*)", output))


def _marts_reading(target: Path) -> dict[str, set[str]]:
    """{file: the marts downstream of its source}, from the build's manifest."""
    manifest = json.loads((target / "manifest.json").read_text())
    children = manifest["child_map"]
    reading = {}
    for file, source in SURFACES.items():
        seen, todo = set(), [f"source.infant_mortality.{source}"]
        while todo:
            node = todo.pop()
            for child in children.get(node, []):
                if child not in seen:
                    seen.add(child)
                    todo.append(child)
        reading[file] = {manifest["nodes"][n]["name"] for n in seen
                         if n.startswith("model.") and manifest["nodes"][n]["schema"].endswith("marts")}
    return reading


def _new_audit_rows(clean: Path, database: Path) -> list[tuple]:
    """Audit rows of `database` that the clean build has not (files compared by name)."""
    from conftest import query
    sql = ("select source, regexp_extract(source_file, '[^/]+$') as file, source_line, record_key, commune_code, "
           "year, indicator, check_name from marts.audit_data_quality")
    clean_rows = query(clean, sql)
    rows = query(database, sql)
    for row in clean_rows:
        if row in rows:
            rows.remove(row)
    return rows


def _explains(row: tuple, file: str, original_line: str) -> bool:
    """Whether a new audit row is about a mutated line: it names the file, or a commune code
    written on the line (a covariate left out is audited by commune, not by line)."""
    communes = {field.strip().lstrip("\ufeff").zfill(5) for field in original_line.split(",")
                if field.strip().lstrip("\ufeff").isdigit() and 4 <= len(field.strip().lstrip("\ufeff")) <= 5}
    return row[1] == Path(file).name or row[4] in communes


def test_single_line_mutations_of_every_other_input_keep_the_promise(bundled_warehouse, tmp_path):
    """The UN IGME files, the MINSAL anchors, the covariates, the INE population, the bundled
    births 2001-2016 and the RM's corrected births, each mutated on one line per round (one line per file, so that each stop is
    the mutation's own). The rule checked, per round:

    - a mutation the build stops on must be named in dbt's output as `<file> line <n>` (or
      `lines ..., <n>`); those files are then restored and the round built again, which must then
      succeed (a stop that names no mutated line is a violation);
    - on the build that succeeds: every mart that reads none of the mutated files (the marts
      downstream of its source in the build's manifest) is identical, row for row, to the clean
      build's (`differing_marts`; meta_build and audit_input_files name the build, a source_file
      is compared by name); fct_area_year_rates keeps the promise cell by cell (`check_promise`);
    - and a mart that reads a mutated file and differs is explained: among the mutations of the
      files it reads, one has an audit row the clean build has not, naming its file or a commune
      code written on its line (a covariate left out is audited by commune). This is as precise
      as a batch allows: the marts that read several covariates (the inequity marts) cannot say
      which of the round's mutations moved which row, and a mutation that changes nothing any
      mart uses (a region code in the poverty file, which the marts take from the commune
      reference) needs no audit row.
    """
    started = time.monotonic()
    rng = random.Random(SEED + 1)
    builds, outcomes = 0, {"stopped naming the line": 0, "built": 0}
    # Every round at the same paths (its files, its warehouse), so that dbt parses the project
    # once for all the rounds: the vars are the same, and the files are data, not project.
    raw, database = tmp_path / "raw", tmp_path / "surfaces.duckdb"
    for _ in range(SURFACE_ROUNDS):
        shutil.rmtree(raw, ignore_errors=True)
        database.unlink(missing_ok=True)
        shutil.copytree(REPO_ROOT / "data" / "raw", raw)
        applied, originals = [], {}
        for file in SURFACES:
            path = raw / file
            originals[file] = path.read_bytes()
            lines = path.read_text(encoding="utf-8").split("\n")
            number = rng.randrange(2, len(lines))   # 1-based; never a header, nor a headerless file's BOM
            while not lines[number - 1]:
                number = rng.randrange(2, len(lines))
            name = rng.choice(sorted(AGGREGATE_MUTATIONS))
            if (file, number, name) in KNOWN_BUGS:
                continue
            operator = AGGREGATE_MUTATIONS[name]
            if operator is None:
                del lines[number - 1]
            else:
                lines[number - 1] = operator(lines[number - 1], rng)
            path.write_text("\n".join(lines), encoding="utf-8")
            applied.append((file, number, name))
        result = run_dbt(["build"], database, {"raw_data_dir": str(raw)}, check=False)
        builds += 1
        stopped = [m for m in applied if _stop_names(result.stdout, m[0], m[1])]
        if stopped:
            assert result.returncode != 0, (stopped, "named in the output of a build that succeeded")
            for file, _, _ in stopped:
                (raw / file).write_bytes(originals[file])
            database.unlink(missing_ok=True)
            result = run_dbt(["build"], database, {"raw_data_dir": str(raw)}, check=False)
            builds += 1
        kept = [m for m in applied if m not in stopped]
        assert result.returncode == 0, (kept, "stopped without naming the mutated line",
                                        [line for line in result.stdout.splitlines() if "rror" in line][-10:])
        outcomes["stopped naming the line"] += len(stopped)
        outcomes["built"] += len(kept)
        violations = check_promise(bundled_warehouse, database)
        assert violations == [], (kept, violations[:10])
        reading = _marts_reading(tmp_path / "dbt_target")
        allowed = set().union(*(reading[file] for file, _, _ in kept)) if kept else set()
        differing = differing_marts(bundled_warehouse, database)
        assert set(differing) <= allowed, (kept, {m: n for m, n in differing.items() if m not in allowed})
        new_audit = _new_audit_rows(bundled_warehouse, database)
        explained = {m for m in kept if any(_explains(row, m[0], originals[m[0]].decode("utf-8").split("\n")[m[1] - 1])
                                            for row in new_audit)}
        for mart in sorted(set(differing) - {"audit_data_quality"}):
            readers = [m for m in kept if mart in reading[m[0]]]
            assert set(readers) & explained, (mart, differing[mart], readers, new_audit[:10])
        for mutation in applied:
            print(f"  {mutation}: " + ("stopped naming the line" if mutation in stopped else
                                       "built, audited" if mutation in explained else "built, no audit row"))
        TALLY["tried"] += len(applied)
        TALLY["kept"] += len(applied)
    print(f"\nsurface fuzz: {sum(outcomes.values())} mutations, {builds} builds, "
          f"{time.monotonic() - started:.0f} s; {outcomes}")


WINDOWS = 3


def test_random_year_windows_keep_the_promise(bundled_warehouse, tmp_path):
    """input_year_min / input_year_max set to random windows inside and around the data
    (1985-2030): the build either stops naming the var, or the cells of the years in the window
    keep the promise (the clean build's numbers, or unavailable with an audit row naming them),
    and no cell of a year outside the window is published."""
    started = time.monotonic()
    rng = random.Random(SEED + 2)
    for n in range(WINDOWS):
        low = rng.randrange(1985, 2021)
        high = rng.randrange(low, 2031)
        database = tmp_path / f"window{n}.duckdb"
        result = run_dbt(AGGREGATE_SELECT, database,
                         {"input_year_min": low, "input_year_max": high}, check=False)
        window = (low, high)
        if result.returncode != 0:
            assert "input_year" in result.stdout, (window, result.stdout[-3000:])
        else:
            violations = check_promise(bundled_warehouse, database, years=range(low, high + 1))
            assert violations == [], (window, violations[:10])
            from conftest import query
            outside = query(database, "select count(*) from marts.fct_area_year_rates "
                            "where rate_per_1000 is not null and year not between ? and ?", [low, high])
            assert outside == [(0,)], window
        print(f"  window {window}: {'stopped' if result.returncode else 'built'}")
        TALLY["tried"] += 1
        TALLY["kept"] += 1
    print(f"\nyear windows: {WINDOWS} builds, {time.monotonic() - started:.0f} s")


def test_zz_fuzz_tally():
    """The count for the closing note (run with -s): mutations tried and promises kept."""
    print(f"\nfuzz (seed {SEED}): {TALLY['tried']} single-line mutations tried, promise kept for {TALLY['kept']}")
    assert TALLY["tried"] == TALLY["kept"] == 16 + 8 + 20 + 12 + SURFACE_ROUNDS * len(SURFACES) - len(KNOWN_BUGS) + WINDOWS
