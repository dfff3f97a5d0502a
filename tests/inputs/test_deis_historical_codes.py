"""Per-year DEIS bases before 2010 carry the codes in force in their year (Marga Marga 2010,
Arica y Parinacota and Los Ríos 2007): the generator writes them and the build reads them back
under today's communes, through the crosswalk seed."""

from __future__ import annotations

import duckdb
import pytest

from conftest import REPO_ROOT, query, run_dbt
from infant_mortality.tools.generate_deis import Options, generate

# The official pairs, written out here from the laws' renumbering as recocl.ado lists them
# (not read from the seed, which is what is being tested).
MARGA_MARGA = {"05801": "05106", "05802": "05505", "05803": "05507", "05804": "05108"}  # Ley 20.368
ARICA_PARINACOTA = {"15101": "01201", "15102": "01202", "15201": "01301", "15202": "01302"}  # Ley 20.175
LOS_RIOS = {"14101": "10501", "14102": "10502", "14103": "10506", "14104": "10507", "14105": "10508",
            "14106": "10509", "14107": "10510", "14108": "10511", "14201": "10504", "14202": "10503",
            "14203": "10505", "14204": "10512"}  # Ley 20.174
YEARS = (2006, 2008, 2010)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    out = tmp_path_factory.mktemp("historical") / "files"
    manifest = generate(Options(out_dir=out, regions=("5", "14", "15"), years=YEARS, births_layout="per_year_base",
                                project_dir=REPO_ROOT))
    return out, out / manifest["deaths_file"]


def _codes_by_year(folder) -> dict[int, set[str]]:
    con = duckdb.connect()
    rows = con.sql(f"""select ANO_NAC, lpad(COMUNA, 5, '0') from read_csv('{folder}/nacimientos/*.csv',
                       delim=';', header=true, all_varchar=true) group by all""").fetchall()
    by_year: dict[int, set[str]] = {}
    for year, code in rows:
        by_year.setdefault(int(year), set()).add(code)
    return by_year


def test_generator_writes_the_codes_in_force_each_year(files):
    codes = _codes_by_year(files[0])
    for new, old in {**ARICA_PARINACOTA, **LOS_RIOS}.items():
        assert old in codes[2006] and new not in codes[2006], new
        assert new in codes[2008] and old not in codes[2008], new
    for new, old in MARGA_MARGA.items():
        assert old in codes[2008] and new not in codes[2008], new
        assert new in codes[2010] and old not in codes[2010], new


def test_build_counts_old_codes_under_todays_communes(files, tmp_path):
    folder, deaths = files
    database = tmp_path / "historical.duckdb"
    run_dbt(["build", "--indirect-selection", "cautious", "--select", "+audit_data_quality"], database,
            {"vital_source": "deis_microdata", "deis_deaths_path": str(deaths),
             "deis_births_path": str(folder / "nacimientos"), "deis_cache_dir": str(tmp_path / "cache")})
    mapped = dict(((old, year), new) for old, year, new in query(database, """
        select distinct commune_code_as_read, birth_year, commune_code from staging.stg_deis__births
        where commune_code_as_read <> commune_code"""))
    expected = {(old, year): new for year in YEARS
                for new, old in {**MARGA_MARGA, **ARICA_PARINACOTA, **LOS_RIOS}.items()
                if year < (2010 if new in MARGA_MARGA else 2007)}
    assert mapped == expected
    problems = query(database, """
        select check_name, count(*) from marts.audit_data_quality
        where check_name in ('commune_code_unmapped', 'commune_unknown') group by all""")
    assert problems == []
    audited = query(database, """
        select record_key, commune_code from marts.audit_data_quality
        where check_name = 'commune_code_mapped' and record_key = 'code 10501 in 2006'""")
    assert audited == [("code 10501 in 2006", "14101")]
