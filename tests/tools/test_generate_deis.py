"""The DEIS microdata generator: determinism, calibration to the bundled real counts, realism."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import duckdb
import pytest

from infant_mortality.tools.generate_deis import Options, generate, main

ROOT = Path(__file__).resolve().parents[2]
RAW = ROOT / "data" / "raw"

# Deaths file columns by position (no header): ANO_DEF, EDAD_TIPO, EDAD_CANT, CODIGO_COMUNA_RESIDENCIA.
DEATHS_BY_POSITION = """
    select column00::int as year, column03::int as unit, column04::int as amount,
           lpad(column05, 5, '0') as commune, column02 as sex
    from read_csv('{path}', delim=';', header=false, all_varchar=true, encoding='latin-1')
"""
INFANT = "(unit in (2, 3, 4) or (unit = 1 and amount = 0))"


@pytest.fixture(scope="module")
def rm_2010_2019(tmp_path_factory) -> tuple[Path, dict]:
    out = tmp_path_factory.mktemp("rm")
    manifest = generate(Options(out_dir=out, regions=("13",), years=tuple(range(2010, 2020)), seed=7))
    return out, manifest


def _deaths(out: Path, manifest: dict) -> str:
    return DEATHS_BY_POSITION.format(path=out / manifest["deaths_file"])


def test_same_seed_gives_identical_bytes(tmp_path):
    def files(out: Path, seed: int) -> dict[str, bytes]:
        generate(Options(out_dir=out, regions=("15",), years=(2018, 2019), seed=seed, zip_deaths=True,
                         deaths_header="alternative", inject_bad_records=True))
        return {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}

    first, again, other = files(tmp_path / "a", 3), files(tmp_path / "b", 3), files(tmp_path / "c", 4)
    assert set(first) == {"synthetic_deis_deaths_2018_2019.zip", "generation_manifest.json",
                          "nacimientos/synthetic_deis_births_2018.csv", "nacimientos/synthetic_deis_births_2019.csv"}
    assert first == again
    assert first["nacimientos/synthetic_deis_births_2019.csv"] != other["nacimientos/synthetic_deis_births_2019.csv"]


def test_rm_2010_2019_counts_equal_the_bundled_derived_counts(rm_2010_2019):
    out, manifest = rm_2010_2019
    con = duckdb.connect()
    expected = con.sql(f"""
        with ine as (
            select codigo_comuna as commune, anio as year,
                   sum(cantidad) filter (where evento = 'nacimiento') as births,
                   sum(cantidad) filter (where evento = 'defuncion') as deaths
            from read_csv('{RAW / 'ine_vital_statistics_chile_2010_2019.csv'}', types={{'codigo_comuna': 'VARCHAR'}})
            where codigo_comuna like '13%'
            group by all
        ),
        aged_1_plus as (
            select lpad(CODIGO_COMUNA_RESIDENCIA::varchar, 5, '0') as commune, "Year" as year,
                   sum(Death_count_all_cause) as deaths
            from read_csv('{RAW / 'deis_deaths_by_commune_year_sex_agegroup_1990_2019.csv'}')
            where "Age group" = '1+'
            group by all
        )
        select ine.commune, ine.year, ine.births,
               greatest(ine.deaths - coalesce(aged_1_plus.deaths, 0), 0) as infant_deaths
        from ine left join aged_1_plus using (commune, year)
        order by all
    """).fetchall()
    births = con.sql(f"""
        select lpad(COMUNA::varchar, 5, '0') as commune, ANO_NAC as year, count(*) as births
        from read_csv('{out}/nacimientos/*.csv', delim=';', header=true, encoding='latin-1')
        group by all
    """)
    generated = con.sql(f"""
        select b.commune, b.year, b.births, count(d.year) as infant_deaths
        from births b left join ({_deaths(out, manifest)}) d
            on d.commune = b.commune and d.year = b.year and {INFANT}
        group by all order by all
    """).fetchall()
    assert len(expected) == 520
    assert generated == expected
    # Providencia 2018 derives to -2 infant deaths: written as 0, and said so.
    assert ("13123", 2018) in {(c, y) for c, y, _, d in generated if d == 0}
    assert any(note.startswith("commune 13123 2018") and "is -2;" in note for note in manifest["notes"])


def test_deaths_aged_1_plus_equal_the_real_deis_counts(rm_2010_2019):
    out, manifest = rm_2010_2019
    con = duckdb.connect()
    real = con.sql(f"""
        select lpad(CODIGO_COMUNA_RESIDENCIA::varchar, 5, '0') as commune, "Year" as year,
               Gender as sex, Death_count_all_cause as deaths
        from read_csv('{RAW / 'deis_deaths_by_commune_year_sex_agegroup_1990_2019.csv'}')
        where "Age group" = '1+' and CODIGO_COMUNA_RESIDENCIA between 13101 and 13605
          and "Year" between 2010 and 2019
        order by all
    """).fetchall()
    generated = con.sql(f"""
        select commune, year, sex, count(*) from ({_deaths(out, manifest)})
        where unit = 1 and amount >= 1 group by all order by all
    """).fetchall()
    assert generated == real


def test_neonatal_share_is_realistic(rm_2010_2019):
    out, manifest = rm_2010_2019
    infants, neonatal = duckdb.sql(f"""
        select count(*), count(*) filter (where unit = 4 or (unit = 3 and amount <= 27))
        from ({_deaths(out, manifest)}) where {INFANT}
    """).fetchall()[0]
    assert 0.60 <= neonatal / infants <= 0.70
    assert manifest["neonatal_share_of_infant_deaths"] == round(neonatal / infants, 4)


def test_latin1_output_encodes_spanish_letters(rm_2010_2019):
    out, manifest = rm_2010_2019
    raw = (out / manifest["deaths_file"]).read_bytes()
    with pytest.raises(UnicodeDecodeError):
        raw.decode("utf-8")
    text = raw.decode("latin-1")
    for word in ("Ñuñoa", "Peñalolén", "Conchalí", "Región Metropolitana de Santiago", "Hospital o Clínica",
                 "Casa habitación", "Síndrome"):
        assert word in text, word
    births = (out / "nacimientos" / "synthetic_deis_births_2015.csv").read_bytes()
    assert b"\xd1u\xf1oa" in births  # Ñuñoa in latin-1


def test_national_scope_covers_all_communes(tmp_path):
    # 2014: one of the years with real deaths of unknown commune (99999) in the DEIS file.
    manifest = generate(Options(out_dir=tmp_path, years=(2014,), deaths_encoding="utf-8",
                                births_encoding="utf-8", births_header="none"))
    con = duckdb.connect()
    births = con.sql(f"""
        select distinct lpad(column08, 5, '0') as commune
        from read_csv('{tmp_path}/nacimientos/synthetic_deis_births_2014.csv', delim=';', header=false, all_varchar=true)
    """)
    deaths = con.sql(f"""
        select distinct lpad(column05, 5, '0') as commune
        from read_csv('{tmp_path / manifest['deaths_file']}', delim=';', header=false, all_varchar=true)
    """)
    reference = {code for (code,) in con.sql(
        f"select codigo_comuna from read_csv('{ROOT / 'seeds' / 'communes_chile.csv'}', all_varchar=true)"
    ).fetchall()}
    birth_communes = {code for (code,) in births.fetchall()}
    death_communes = {code for (code,) in deaths.fetchall()}
    assert manifest["communes"] == len(reference) == 346
    # A few communes have no birth (population aged 0 of 0-3: Río Verde, Antártica) or no death in
    # a year, in the real data too; together the two files name every commune, plus 99999 (the
    # real deaths of unknown commune in 2014).
    assert birth_communes | death_communes == reference | {"99999"}
    assert len(birth_communes) >= 340 and len(death_communes) >= 340


def test_scale_multiplies_counts_and_years_outside_the_real_data_are_extrapolated(tmp_path):
    base = generate(Options(out_dir=tmp_path / "x1", regions=("15",), years=(2021, 2022)))
    double = generate(Options(out_dir=tmp_path / "x2", regions=("15",), years=(2021, 2022), scale=2.0))
    assert base["records"]["deaths_aged_1_plus"] > 1000  # Arica: extrapolated from 2015-2019
    for key in ("births", "deaths_aged_1_plus"):
        assert 1.9 < double["records"][key] / base["records"][key] < 2.1


def test_bad_records_are_listed_in_the_manifest(tmp_path):
    manifest = generate(Options(out_dir=tmp_path, regions=("15",), years=(2019,), inject_bad_records=True,
                                zip_deaths=True))
    problems = {record["record_problem"] for record in manifest["bad_records"]}
    assert problems == {"commune_unknown", "commune_missing", "age_unit_unknown", "age_out_of_range",
                        "infant_age_month_zero", "unparseable_date", "date_year_mismatch", "year_unparseable",
                        "age_unparseable"}
    with zipfile.ZipFile(tmp_path / manifest["deaths_file"]) as archive:
        lines = archive.read(archive.namelist()[0]).decode("latin-1").splitlines()
    for record in manifest["bad_records"]:
        if record["file"] == manifest["deaths_file"].replace(".zip", ".csv"):
            assert len(lines[record["line"] - 1].split(";")) == 27


def test_cli_says_the_rows_are_synthetic(tmp_path, capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    assert "synthetic" in capsys.readouterr().out
    assert main(["--out", str(tmp_path), "--regions", "15", "--years", "2019"]) == 0
    printed = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert printed["deis_births_path"] == str(tmp_path / "nacimientos")


def test_generated_files_never_carry_the_official_names(tmp_path):
    manifest = generate(Options(out_dir=tmp_path, regions=("15",), years=(2019,), zip_deaths=True))
    names = [p.name for p in tmp_path.rglob("*") if p.is_file()]
    assert not [n for n in names if n.upper().startswith(("DEFUNCIONES_FUENTE_DEIS", "NACIMIENTOS_"))], names
    assert manifest["deaths_file"] == "synthetic_deis_deaths_2019_2019.zip"


def test_per_year_base_layout_carries_the_codes_in_force(tmp_path):
    # Ñuble (16) in 2016 and 2019: before 2018 its communes had the 084xx codes of region 8.
    generate(Options(out_dir=tmp_path / "a", regions=("16",), years=(2016, 2019), births_layout="per_year_base"))
    generate(Options(out_dir=tmp_path / "b", regions=("16",), years=(2016,), births_layout="per_year_base",
                     births_region=False))
    con = duckdb.connect()

    def read(path):
        return con.sql(f"select * from read_csv('{path}', delim=';', header=true, all_varchar=true)")

    y2016 = read(tmp_path / "a" / "nacimientos" / "synthetic_deis_births_2016.csv")
    assert y2016.columns[:4] == ["SEXO", "DIA_NAC", "MES_NAC", "ANO_NAC"] and len(y2016.columns) == 33
    assert set(r[0] for r in con.sql("select distinct left(lpad(COMUNA, 5, '0'), 3) from y2016").fetchall()) == {"084"}
    assert con.sql("select distinct REG_RES from y2016").fetchall() == [("8",)]
    y2019 = read(tmp_path / "a" / "nacimientos" / "synthetic_deis_births_2019.csv")
    assert con.sql("select distinct left(COMUNA, 2) from y2019").fetchall() == [("16",)]
    without = read(tmp_path / "b" / "nacimientos" / "synthetic_deis_births_2016.csv")
    assert "REG_RES" not in without.columns and len(without.columns) == 32
