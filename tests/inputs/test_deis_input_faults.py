"""Fault injection on generated DEIS microdata (issue 18): every case is built for real by dbt.

The promise: every published rate equals what the clean input gives, or is unavailable with an
audit row naming the cell (tests/promise.py); otherwise the build stops with a message
naming the file and the line. One clean build is shared by the module; each case mutates a copy
of the generated files.
"""

from __future__ import annotations

import gzip
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from types import SimpleNamespace

import pytest

from conftest import microdata_vars, microdata_warehouse, query, run_dbt
from infant_mortality.dbt_plugins.deis_files import DEATHS_COLUMNS
from promise import PROMISE_MODELS, check_promise

# End to end: a group of its own (`make test-e2e`; `make check` and CI run it with the rest).
pytestmark = pytest.mark.e2e

# Arica y Parinacota: 4 communes, two years; small enough for a dozen builds.
DEATHS = "synthetic_deis_deaths_2018_2019.csv"
STOP_SELECT = ["build", "--indirect-selection", "cautious", "--select", "+int_deis__input_checks"]


@pytest.fixture(scope="module")
def clean(tmp_path_factory):
    """The generated files and the warehouse built from them, untouched: the reference of
    check_promise, so only the marts it reads."""
    built = microdata_warehouse(tmp_path_factory.mktemp("faults_clean"), ("15",), (2018, 2019), list(PROMISE_MODELS))
    assert built.deaths.name == DEATHS
    return built.files, built.path


def copy_inputs(clean, tmp_path: Path) -> Path:
    files, _ = clean
    target = tmp_path / "files"
    shutil.copytree(files, target)
    return target


def edit_line(path: Path, number: int, edit) -> str:
    """Replace line `number` (1-based) by edit(fields) joined by ';'; return the old line."""
    lines = path.read_bytes().decode("latin-1").split("\n")
    old = lines[number - 1]
    fields = old.split(";")
    lines[number - 1] = ";".join(edit(fields))
    path.write_bytes("\n".join(lines).encode("latin-1"))
    return old


def assert_stops(tmp_path: Path, deaths: Path, births: Path, *expected: str, select=STOP_SELECT, **extra):
    result = run_dbt(select, tmp_path / "faulted.duckdb", microdata_vars(deaths, births, tmp_path / "cache", **extra),
                     check=False)
    assert result.returncode != 0, "the build should have stopped"
    for text in expected:
        assert text in result.stdout, (text, result.stdout[-8000:])
    return result.stdout


def assert_promise(clean, tmp_path: Path, deaths: Path, births: Path) -> Path:
    database = tmp_path / "faulted.duckdb"
    run_dbt(["build"], database, microdata_vars(deaths, births, tmp_path / "cache"))
    assert check_promise(clean[1], database) == []
    return database


# --- Class 1: strict parsing (codes, ages, years are whole numbers; codes 4-5 digits) ---------

MALFORMED = [  # (line, column, value, record_problem)
    (7, 5, "15101.9", "commune_unparseable"),   # once counted in 15102 by a cast
    (9, 5, "151012", "commune_unparseable"),    # once cut to 5 digits
    (11, 4, "1.5", "age_unparseable"),          # once read as 2 days
    (13, 0, "2109", "year_out_of_range"),       # a year typo
    (15, 0, "2.018", "year_unparseable"),
]


def mutate(deaths: Path) -> None:
    for line, column, value, _ in MALFORMED:
        edit_line(deaths, line, lambda f, c=column, v=value: f[:c] + [v] + f[c + 1:])


def test_a_malformed_value_stops_the_build_naming_file_and_line(clean, tmp_path):
    files = copy_inputs(clean, tmp_path)
    deaths = files / DEATHS
    mutate(deaths)
    assert_stops(tmp_path, deaths, files / "nacimientos", f"{deaths} line 7: commune_unparseable",
                 "COMUNA=15101.9", "5 malformed record(s) in all")


def test_with_the_audit_policy_malformed_records_are_audited_and_counted_nowhere(clean, tmp_path):
    files = copy_inputs(clean, tmp_path)
    deaths = files / DEATHS
    mutate(deaths)
    database = tmp_path / "audit.duckdb"
    run_dbt(["build", "--indirect-selection", "cautious", "--select", "+audit_data_quality"], database,
            microdata_vars(deaths, files / "nacimientos", tmp_path / "cache", deis_malformed_records="audit"))
    # The generated files also carry a few blank or invalid causes by design, audited per
    # commune-year (test_causes.py); the records here are the malformed ones.
    rows = query(database, "select source_line, check_name, observed_value, affects_results "
                           "from marts.audit_data_quality where source_file = ? and check_name not like 'cause%' "
                           "order by source_line", [str(deaths)])
    assert [(line, check, affects) for line, check, _, affects in rows] == [
        (line, problem, True) for line, _, _, problem in MALFORMED]
    for (_, _, observed, _), (_, _, value, _) in zip(rows, MALFORMED):
        assert value in observed
    assigned = query(database, "select count(*) from intermediate.int_deis__commune_year_counts")
    assert assigned[0][0] > 0
    (counted,), = query(database, f"""
        select count(*) from staging.stg_deis__deaths
        where source_line in ({", ".join(str(m[0]) for m in MALFORMED)})
          and {{assignable}}""".replace("{assignable}", "record_problem is null"))
    assert counted == 0


def test_loose_number_forms_are_not_read_as_numbers_in_any_field(clean, tmp_path):
    # DuckDB's own cast reads every one of these as a number (1e3 -> 1000, 0x1F -> 31, 3.8 -> 4).
    # In the numeric fields the warehouse parses (month and day of birth here) they stay unread
    # and the record says so; in the fields it does not use (weight, length, weeks, the mother's
    # age) nothing is parsed, so the record is counted as it is.
    files = copy_inputs(clean, tmp_path)
    births = files / "nacimientos" / "synthetic_deis_births_2018.csv"
    loose = {2: (1, "1e3"), 3: (2, "+5"), 4: (1, "3.8"), 5: (2, "0x1F"), 6: (1, "1_0")}
    for line, (column, value) in loose.items():
        edit_line(births, line, lambda f, c=column, v=value: f[:c] + [v] + f[c + 1:])
    edit_line(births, 7, lambda f: f[:1] + ["03", " 7 "] + f[3:])   # leading zero, spaces: numbers
    edit_line(births, 8, lambda f: f[:4] + ["1e3", "3.8", "+50", "0x1F"] + f[8:])   # unused fields
    deaths = files / DEATHS
    edit_line(deaths, 11, lambda f: f[:4] + ["-1"] + f[5:])
    database = tmp_path / "loose.duckdb"
    run_dbt(["build", "--select", "+stg_deis__births", "+stg_deis__deaths"], database,
            microdata_vars(deaths, files / "nacimientos", tmp_path / "cache"))
    rows = dict((line, values) for line, *values in query(database, f"""
        select source_line, birth_month, birth_day, record_problem
        from staging.stg_deis__births where source_file = ? and source_line between 2 and 8""", [str(births)]))
    for line, (column, value) in loose.items():
        month_or_day = column - 1
        assert rows[line][month_or_day] is None, (line, value, rows[line])
        assert rows[line][1 - month_or_day] is not None, rows[line]
        assert rows[line][2] == "unparseable_date", rows[line]
    assert rows[7] == [3, 7, None]
    assert rows[8][2] is None
    (problem,), = query(database, "select record_problem from staging.stg_deis__deaths "
                                  "where source_file = ? and source_line = 11", [str(deaths)])
    assert problem == "age_unparseable"


def test_a_line_with_a_field_too_many_in_an_unused_column_still_stops_the_build(clean, tmp_path):
    # The fields the warehouse does not use are not parsed, but their line is still checked as a
    # whole: an extra ';' anywhere shifts the fields after it, so the build stops naming the line.
    files = copy_inputs(clean, tmp_path)
    births = files / "nacimientos" / "synthetic_deis_births_2018.csv"
    # Line 400: past the lines Python sniffs before DuckDB reads the file (those stop earlier).
    edit_line(births, 400, lambda f: f[:4] + ["3.2", "kg"] + f[5:])   # PESO written as "3.2;kg"
    assert_stops(tmp_path, files / DEATHS, files / "nacimientos", "synthetic_deis_births_2018.csv",
                 "Line: 400", "Expected Number of Columns: 11 Found: 12")


# --- Class 5: files -------------------------------------------------------------------------

def test_an_unknown_extension_in_a_folder_stops_the_build(clean, tmp_path):
    files = copy_inputs(clean, tmp_path)
    (files / "nacimientos" / "notas.xlsx").write_bytes(b"PK\x03\x04 not read")
    assert_stops(tmp_path, files / DEATHS, files / "nacimientos", "notas.xlsx: unknown file type")


def test_a_second_copy_of_a_births_file_stops_the_build(clean, tmp_path):
    files = copy_inputs(clean, tmp_path)
    births = files / "nacimientos"
    shutil.copy(births / "synthetic_deis_births_2018.csv", births / "synthetic_deis_births_2018 (1).csv")
    assert_stops(tmp_path, files / DEATHS, births, "synthetic_deis_births_2018 (1).csv", "identical content")


def test_a_zip_holding_the_same_csv_twice_stops_the_build(clean, tmp_path):
    files = copy_inputs(clean, tmp_path)
    archive = tmp_path / "deaths.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as z:
        z.write(files / DEATHS, DEATHS)
        z.write(files / DEATHS, "copia/" + DEATHS)
    assert_stops(tmp_path, archive, files / "nacimientos", "identical content", f"deaths.zip/copia/{DEATHS}")


def test_two_births_files_of_one_year_stop_the_build(clean, tmp_path):
    files = copy_inputs(clean, tmp_path)
    births = files / "nacimientos"
    other = births / "nac_2018_segunda_entrega.csv"
    shutil.copy(births / "synthetic_deis_births_2018.csv", other)
    edit_line(other, 2, lambda f: f[:7] + ["51"] + f[8:])   # mother's age: not a byte copy
    assert_stops(tmp_path, files / DEATHS, births, "year 2018 is in 2 files", "nac_2018_segunda_entrega.csv line 2",
                 select=STOP_SELECT)


@pytest.fixture(scope="module")
def several_faults(clean, tmp_path_factory):
    """One build holding five faults that each once broke the promise, in files of their own, so
    none can hide another: the deaths file gzipped in a folder (once skipped silently), with a
    blank line (once shifted every later source_line) and a field starting with a quote (once
    merged the following lines into one record); blank lines in the first births file (once
    moved the next file's lines); a births file of 2017, a year the deaths file does not hold
    (every 2017 IMR was once 0.0). Only that year's cells may be unavailable."""
    tmp = tmp_path_factory.mktemp("faults_promise")
    files = copy_inputs(clean, tmp)
    deaths = files / DEATHS
    edit_line(deaths, 5, lambda f: f[:6] + ['"' + f[6]] + f[7:])   # unbalanced quote in the name
    lines = deaths.read_bytes().split(b"\n")
    folder = tmp / "deaths"
    folder.mkdir()
    with gzip.open(folder / (DEATHS + ".gz"), "wb") as sink:
        sink.write(b"\n".join(lines[:10] + [b""] + lines[10:]))   # line 11 is now blank
    births = files / "nacimientos"
    first, second = sorted(births.glob("*.csv"))
    text = first.read_bytes()
    year_2017 = births / "births_2017.csv"
    rows = text.decode("latin-1").split("\n")
    year_2017.write_bytes("\n".join([rows[0]] + [line.replace("2018;", "2017;", 1) for line in rows[1:]])
                          .encode("latin-1"))
    blank = text.split(b"\n")
    first.write_bytes(b"\n".join(blank[:3] + [b""] + blank[3:40] + [b"", b""] + blank[40:]))  # blank: 4, 42, 43
    database = assert_promise(clean, tmp, folder, births)
    # No fault hides another: every cell the clean build publishes is published here too.
    clean_cells = set(query(clean[1], "select area_level, area_code, year, indicator from marts.fct_area_year_rates "
                                      "where rate_per_1000 is not null"))
    published = set(query(database, "select area_level, area_code, year, indicator from marts.fct_area_year_rates "
                                    "where rate_per_1000 is not null"))
    assert clean_cells and clean_cells <= published, sorted(clean_cells - published)[:5]
    return SimpleNamespace(database=database, folder=folder, lines=lines, first=first, second=second,
                           year_2017=year_2017)


def test_gzip_blank_line_and_quote_led_field_give_the_clean_numbers_and_exact_lines(clean, several_faults):
    database, folder, lines = several_faults.database, several_faults.folder, several_faults.lines
    assert check_promise(clean[1], database) == []
    staged = dict(query(database, "select source_line, commune_name || ';' || age_amount_as_read "
                                  "from staging.stg_deis__deaths where source_line in (5, 10, 12, 13)"))
    for number, original in ((5, lines[4]), (10, lines[9]), (12, lines[10]), (13, lines[11])):
        fields = original.decode("latin-1").split(";")
        assert staged[number] == f"{fields[6]};{fields[4]}", number
    assert staged[5].startswith('"')
    entries = query(database, "select entry, action, blank_lines, records_read = records_expected "
                              "from marts.audit_input_files where input = 'deis_deaths'")
    assert entries == [(str(folder / (DEATHS + ".gz")), "read", 1, True)]


def test_blank_lines_in_one_births_file_shift_no_line_of_any_file(clean, several_faults):
    # Births files are read together and numbered from Python's record counts per file: blank
    # lines in the first file must move neither its own later lines nor the next files', and the
    # counts stay those of the clean files.
    database, first, second = several_faults.database, several_faults.first, several_faults.second
    assert check_promise(clean[1], database) == []
    for path in (first, second, several_faults.year_2017):
        physical = path.read_bytes().decode("latin-1").split("\n")
        staged = query(database, "select source_line, birth_day, birth_month, commune_code_as_read "
                                 "from staging.stg_deis__births where source_file = ?", [str(path)])
        assert len(staged) == len([line for line in physical[1:] if line.strip("\r")])
        for line, day, month, commune in staged:
            fields = physical[line - 1].split(";")
            assert (int(fields[2]), int(fields[1]), fields[8].zfill(5)) == (day, month, commune), (path.name, line)
    entries = dict(query(database, "select entry, blank_lines from marts.audit_input_files where input = 'deis_births'"))
    assert entries == {str(first): 3, str(second): 0, str(several_faults.year_2017): 0}


# --- Security: ZIP members are confined to the cache and bounded ----------------------------

def test_zip_slip_is_refused_by_the_build_and_by_the_command_line_check(clean, tmp_path):
    files = copy_inputs(clean, tmp_path)
    archive = tmp_path / "slip.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("../../escaped.csv", (files / DEATHS).read_bytes()[:2000])
    assert_stops(tmp_path, archive, files / "nacimientos", "zip slip")
    check = subprocess.run([sys.executable, "-m", "infant_mortality.deis_files", "deaths", str(archive),
                            "--cache-dir", str(tmp_path / "cli_cache")], capture_output=True, text=True)
    assert check.returncode == 1 and "zip slip" in check.stdout
    assert not list(tmp_path.rglob("escaped.csv")) and not (tmp_path.parent / "escaped.csv").exists()


def test_a_zip_bomb_is_refused_before_it_is_unpacked(clean, tmp_path):
    files = copy_inputs(clean, tmp_path)
    archive = tmp_path / "bomb.zip"
    zeros = bytes(16 * 1024 * 1024)
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as z, z.open("defunciones.csv", "w", force_zip64=True) as m:
        for _ in range(70):   # 1.1 GB of NULs
            m.write(zeros)
    assert archive.stat().st_size < 2_000_000
    assert_stops(tmp_path, archive, files / "nacimientos", "bomb.zip/defunciones.csv", "ZIP bomb")
    unpacked = sum(p.stat().st_size for p in (tmp_path / "cache").rglob("*") if p.is_file())
    assert unpacked == 0


# --- The pieces, without dbt ----------------------------------------------------------------

@pytest.mark.parametrize("chunk", [1, 2, 3, 7, 1 << 20])
def test_blank_lines_are_found_wherever_chunks_split_them(tmp_path, monkeypatch, chunk):
    from infant_mortality.dbt_plugins import deis_files
    monkeypatch.setattr(deis_files, "CHUNK", chunk)
    path = tmp_path / "f.csv"
    path.write_bytes(b"\na;b\n\n\nc;d\r\n\r\ne;f\n\n")   # blank: 1, 3, 4, 6, 8; 8 lines
    lines, blank, _, size = deis_files.scan_lines(str(path))
    assert (lines, blank, size) == (8, (1, 3, 4, 6, 8), 19)
    path.write_bytes(b"a;b\nc;d")                       # last line without its line end
    assert deis_files.scan_lines(str(path))[:2] == (2, ())


def test_line_scan_agrees_with_a_line_by_line_reading(tmp_path, monkeypatch):
    """The vectorised scan against the plain definition (split at \\n; a line that is empty or
    only \\r is blank), on random text of ';', 'x', \\n and, in most cases, \\r (the quick test
    for a possible blank line differs with and without \\r), cut into random chunk sizes."""
    import hashlib
    import random

    from infant_mortality.dbt_plugins import deis_files
    rng = random.Random(18)
    path = tmp_path / "r.csv"
    for case in range(80):
        alphabet = rng.choice([b"x;\r\n\n", b"x;\r\n\n", b"x;\n\n", b"xxx;\n"])
        data = bytes(rng.choice(alphabet) for _ in range(rng.randint(0, 400)))
        path.write_bytes(data)
        parts = data.split(b"\n")
        if data.endswith(b"\n"):
            parts = parts[:-1]
        expected_blank = tuple(i for i, line in enumerate(parts, start=1) if line in (b"", b"\r"))
        monkeypatch.setattr(deis_files, "CHUNK", rng.choice([1, 2, 3, 5, 64, 1 << 20]))
        lines, blank, digest, size = deis_files.scan_lines(str(path))
        assert (lines, blank, digest, size) == (len(parts), expected_blank, hashlib.sha256(data).hexdigest(),
                                                len(data)), (case, data)


@pytest.mark.parametrize("name", ["../x.csv", "/etc/x.csv", "a/../../x.csv", "C:/x.csv", "..\\x.csv"])
def test_every_way_out_of_the_cache_is_refused(tmp_path, name):
    from infant_mortality.dbt_plugins import deis_files
    archive = tmp_path / "a.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr(name, "ANO_DEF\n")
    with pytest.raises(deis_files.DeisFileError, match="zip slip"):
        deis_files.inspect(str(archive), "deaths", cache_dir=tmp_path / "cache")
    assert not [p for p in tmp_path.rglob("x.csv")]


# --- A deflated member: inflated (ISA-L) while its deflate stream is copied into gzip --------

def _deaths_text(rng, lines: int) -> bytes:
    """Deaths-shaped text: 27 ';'-separated fields per line, some blank lines, latin-1."""
    out = []
    for number in range(lines):
        if number % 97 == 13:
            out.append(b"")
            continue
        numbers = [str(rng.randint(0, 10 ** rng.randint(1, 6))).encode() for _ in range(26)]
        out.append(b";".join(numbers + ["REGIÓN".encode("latin-1")]))
    return b"\n".join(out) + b"\n"


def _unpack_one(deis_files, archive, cache, limits=None):
    ((name, kept, scanned),) = deis_files.unpack_zip(str(archive), cache, limits or deis_files.Limits())
    return name, kept, scanned


@pytest.mark.parametrize("chunk", [7, 4096, 1 << 24])
def test_a_deflated_member_is_kept_as_gzip_of_exactly_its_bytes_and_scanned_like_the_text(tmp_path, monkeypatch, chunk):
    """Whatever the block size (7 bytes makes every block end mid-stream and mid-line), the gzip
    copy decompresses to the member's bytes, and the scan taken while inflating equals a scan of
    the plain text (second method: scan_lines on the member written out by zipfile)."""
    import random

    from infant_mortality.dbt_plugins import deis_files
    monkeypatch.setattr(deis_files, "CHUNK", chunk)
    text = _deaths_text(random.Random(chunk), 400 if chunk == 7 else 20000)
    archive = tmp_path / "d.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("defunciones.csv", text)
    name, kept, scanned = _unpack_one(deis_files, archive, tmp_path / "cache")
    assert name == "defunciones.csv" and kept.name == "defunciones.csv.gz"
    assert gzip.decompress(kept.read_bytes()) == text
    plain = tmp_path / "plain.csv"
    plain.write_bytes(text)
    assert scanned == deis_files.scan_lines(str(plain))
    assert scanned[1] and scanned[0] == text.count(b"\n")   # blank lines found, every line counted


def test_a_stored_member_is_written_out_as_it_is(tmp_path):
    from infant_mortality.dbt_plugins import deis_files
    text = b"ANO_DEF;X\n2019;1\n\n2019;2\n"
    archive = tmp_path / "s.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_STORED) as z:
        z.writestr("d.csv", text)
    _, kept, scanned = _unpack_one(deis_files, archive, tmp_path / "cache")
    assert kept.name == "d.csv" and kept.read_bytes() == text and scanned[:2] == (4, (3,))


def _with_declared_size(archive: Path, size: int) -> None:
    """Rewrite the uncompressed size the ZIP declares for its only member (local header and
    central directory), leaving the data alone: a ZIP that lies about what it unpacks to."""
    data = bytearray(archive.read_bytes())
    local, central = data.index(b"PK\x03\x04"), data.index(b"PK\x01\x02")
    data[local + 22:local + 26] = size.to_bytes(4, "little")
    data[central + 24:central + 28] = size.to_bytes(4, "little")
    archive.write_bytes(bytes(data))


def test_a_member_that_unpacks_to_more_than_it_declares_is_refused_and_nothing_is_kept(tmp_path, monkeypatch):
    from infant_mortality.dbt_plugins import deis_files
    monkeypatch.setattr(deis_files, "CHUNK", 1 << 16)
    archive = tmp_path / "liar.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("d.csv", b"2019;1;2\n" * 200_000)   # 1.8 MB
    _with_declared_size(archive, 100_000)
    with pytest.raises(deis_files.DeisFileError, match="unpacks to more than the 100,000 bytes"):
        _unpack_one(deis_files, archive, tmp_path / "cache")
    assert not [p for p in (tmp_path / "cache").rglob("*") if p.is_file()]


@pytest.mark.parametrize("damage", ["flipped byte", "wrong CRC-32"])
def test_a_damaged_deflated_member_stops_with_the_member_named(tmp_path, damage):
    from infant_mortality.dbt_plugins import deis_files
    archive = tmp_path / "bad.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("d.csv", b"".join(b"2019;%d;x\n" % i for i in range(50_000)))
    data = bytearray(archive.read_bytes())
    if damage == "flipped byte":
        data[data.index(b"d.csv") + 5 + 2000] ^= 0xFF   # inside the deflate stream
    else:   # the text inflates cleanly but is not what the archive declares
        local, central = data.index(b"PK\x03\x04"), data.index(b"PK\x01\x02")
        data[local + 14] ^= 0xFF
        data[central + 16] ^= 0xFF
    archive.write_bytes(bytes(data))
    with pytest.raises(deis_files.DeisFileError, match=r"bad\.zip/d\.csv: damaged ZIP member"):
        _unpack_one(deis_files, archive, tmp_path / "cache")
    assert not [p for p in (tmp_path / "cache").rglob("*") if p.is_file()]


def test_binary_content_inside_a_deflated_member_is_refused(tmp_path):
    from infant_mortality.dbt_plugins import deis_files
    archive = tmp_path / "nul.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("d.csv", b"ANO_DEF;X\n" + bytes(100) + b"2019;1\n")
    with pytest.raises(deis_files.DeisFileError, match="binary content"):
        _unpack_one(deis_files, archive, tmp_path / "cache")


# --- Round two (issue 28): coverage, literal paths, content-keyed cache, cut files ----------

def test_a_year_with_births_and_no_deaths_file_is_unavailable_and_audited_never_zero(clean, several_faults):
    # Births of 2017 with a deaths file that holds only 2018-2019: every 2017 IMR was once 0.0.
    database = several_faults.database
    assert check_promise(clean[1], database) == []
    cells = query(database, "select area_level, rate_per_1000, deaths, unavailable_reason from marts.fct_area_year_rates "
                            "where year = 2017")
    assert cells and all(rate is None and deaths is None for _, rate, deaths, _ in cells)
    assert {reason for level, _, _, reason in cells if level == "commune"} == {"deaths_input_missing_year"}
    audited = query(database, "select distinct commune_code from marts.audit_data_quality "
                              "where year = 2017 and check_name = 'deaths_input_missing_year'")
    assert len(audited) == 4   # the four communes of Arica y Parinacota


def test_two_deaths_files_holding_one_year_stop_the_build_naming_both(clean, tmp_path):
    # The official 1990-2019 file and a later per-year file both hold 2019: once summed (IMR doubled).
    files = copy_inputs(clean, tmp_path)
    folder = tmp_path / "defunciones"
    folder.mkdir()
    shutil.copy(files / DEATHS, folder / DEATHS)
    lines = (files / DEATHS).read_bytes().split(b"\n")
    (folder / "defunciones_2019.csv").write_bytes(b"\n".join(l for l in lines if l.startswith(b"2019;")) + b"\n")
    assert_stops(tmp_path, folder, files / "nacimientos", "DEIS deaths input: year 2019 is in 2 files",
                 f"{folder / 'defunciones_2019.csv'} line 1", f"{folder / DEATHS} line")


def test_a_deaths_file_with_only_a_header_stops_the_build_naming_it(clean, tmp_path):
    # Once every rate was published as 0.0.
    files = copy_inputs(clean, tmp_path)
    header_only = tmp_path / "defunciones.csv"
    header_only.write_text(";".join(DEATHS_COLUMNS) + "\n", encoding="latin-1")
    assert_stops(tmp_path, header_only, files / "nacimientos", f"{header_only}: only a header, no deaths records")


def test_paths_are_taken_literally_by_the_inspection_and_by_duckdb(clean, tmp_path):
    # `br[1]/deaths[1].csv` was read as br1/deaths1.csv by DuckDB's glob.
    files = copy_inputs(clean, tmp_path)
    named = tmp_path / "br[1] {x} ?*'ñ"
    (named / "nac").mkdir(parents=True)
    shutil.copy(files / DEATHS, named / "deaths[1].csv")
    for path in (files / "nacimientos").iterdir():
        shutil.copy(path, named / "nac" / path.name)
    (tmp_path / "br1").mkdir()
    (tmp_path / "br1" / "deaths1.csv").write_bytes((files / DEATHS).read_bytes()[:3000])   # the decoy
    database = assert_promise(clean, tmp_path, named / "deaths[1].csv", named / "nac")
    entries = query(database, "select entry, sha256 from marts.audit_input_files where input = 'deis_deaths'")
    import hashlib
    assert entries == [(str(named / "deaths[1].csv"), hashlib.sha256((files / DEATHS).read_bytes()).hexdigest())]


def test_a_glob_is_read_only_in_its_documented_form(tmp_path):
    from infant_mortality.dbt_plugins import deis_files
    (tmp_path / "d1.csv").write_text("x")
    (tmp_path / "d2.csv").write_text("x")
    assert deis_files.expand_paths(str(tmp_path / "d*.csv")) == [str(tmp_path / "d1.csv"), str(tmp_path / "d2.csv")]
    with pytest.raises(deis_files.DeisFileError, match=r"d\[1\]\.csv: no such file"):
        deis_files.expand_paths(str(tmp_path / "d[1].csv"))   # `[` is no glob: never d1.csv


def test_a_zip_replaced_by_another_of_the_same_size_and_time_is_never_read_stale(tmp_path):
    import hashlib
    import os

    from infant_mortality.dbt_plugins import deis_files
    header = ";".join(deis_files.DEATHS_COLUMNS)
    record = lambda year: ";".join([str(year), f"{year}-01-01", "Hombre", "1", "57", "15101"] + ["x"] * 21)
    archive = tmp_path / "defunciones.zip"
    for year in (2018, 2019):   # same length, other content
        with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as z:
            info = zipfile.ZipInfo("defunciones.csv", date_time=(2020, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, f"{header}\n{record(year)}\n")
        os.utime(archive, ns=(1_600_000_000_000_000_000, 1_600_000_000_000_000_000))
        found = deis_files.inspect_all(str(archive), "deaths", cache_dir=tmp_path / "cache")
        (member,) = found.files
        assert gzip.decompress(Path(member.path).read_bytes()).decode().split("\n")[1].startswith(str(year))
        zip_entry = next(e for e in found.entries if e.entry_type == "zip_archive")
        assert zip_entry.sha256 == hashlib.sha256(archive.read_bytes()).hexdigest()
    assert len(list((tmp_path / "cache").iterdir())) == 2   # one folder per content


def test_a_cut_gzip_file_stops_naming_it_not_a_bare_eof_error(clean, tmp_path):
    from infant_mortality.dbt_plugins import deis_files
    files, _ = clean
    cut = tmp_path / "defunciones.csv.gz"
    cut.write_bytes(gzip.compress((files / DEATHS).read_bytes())[:-4000])
    with pytest.raises(deis_files.DeisFileError, match=r"defunciones\.csv\.gz: the compressed file is damaged "
                                                       r"or cut short .*download or compress it again"):
        deis_files.inspect(str(cut), "deaths")


def test_with_the_audit_policy_a_file_without_records_is_listed_as_not_read(clean, tmp_path):
    files = copy_inputs(clean, tmp_path)
    folder = tmp_path / "defunciones"
    folder.mkdir()
    shutil.copy(files / DEATHS, folder / DEATHS)
    (folder / "defunciones_2020.csv").write_text(";".join(DEATHS_COLUMNS) + "\n", encoding="latin-1")
    assert_stops(tmp_path, folder, files / "nacimientos", "defunciones_2020.csv: only a header, no deaths records",
                 "deis_empty_files: audit")
    database = tmp_path / "audited.duckdb"
    run_dbt(["build", "--indirect-selection", "cautious", "--select", "+audit_input_files"], database,
            microdata_vars(folder, files / "nacimientos", tmp_path / "cache", deis_empty_files="audit"))
    entries = dict(query(database, "select entry, action from marts.audit_input_files where input = 'deis_deaths'"))
    assert entries == {str(folder / DEATHS): "read",
                       str(folder / "defunciones_2020.csv"): "not read: no records (deis_empty_files: audit); "
                                                             "a year no other file holds is unavailable"}
