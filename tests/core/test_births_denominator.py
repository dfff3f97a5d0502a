"""The denominator choice as data (issue 42 part 2): registered or DEIS-corrected live births.

The expectations are computed here with pandas from the bundled files themselves
(data/raw/seremi_rm_corrected_births_1992_2021.csv for the corrected births, the bundled DEIS
births by commune and the INE yearbook for the registered ones), never from the marts. Builds:

- the session's bundled build (default `births_denominator: registered`): every rate on
  registered births, fct_births_denominators beside them for the RM 2010-2019;
- generated deaths (synthetic) for the RM and Aysén 2005-2010 with the bundled births and
  `births_denominator: corrected`: the RM's rates on corrected births (x 1.0526 in 2005-2006),
  Aysén's on registered births with that stated, the country `mixed`;
- a copy of the raw folder with one broken line of the corrected births per case: the build
  stops naming the file and line, or, for a line deleted, audits the gap.
"""

from __future__ import annotations

import shutil

import pandas as pd
import pytest

from conftest import REPO_ROOT, aggregate_indicators, indicator_multipliers, microdata_warehouse, query, run_dbt

RAW = REPO_ROOT / "data" / "raw"
CORRECTED = "seremi_rm_corrected_births_1992_2021.csv"
STAGING = ["build", "--select", "+stg_seremi_rm__corrected_births", "+int_audit__corrected_births"]


def corrected_file() -> pd.DataFrame:
    return pd.read_csv(RAW / CORRECTED)


def rm_corrected(year: int) -> int:
    frame = corrected_file()
    return int(frame[(frame["Comuna"] == "Región Metropolitana") & (frame["Año"] == year)]["Nacidos Vivos Corregidos"].iloc[0])


def commune_corrected(name: str, year: int) -> int:
    frame = corrected_file()
    return int(frame[(frame["Comuna"] == name) & (frame["Año"] == year)]["Nacidos Vivos Corregidos"].iloc[0])


def bundle_births() -> pd.DataFrame:
    """The bundled DEIS births by commune 2001-2016 (the registered births of the microdata mode)."""
    return pd.read_csv(RAW / "deis_births_by_commune_year_2001_2016.csv", dtype={"codigo_comuna": str})


def ine_births() -> pd.DataFrame:
    frame = pd.read_csv(RAW / "ine_vital_statistics_chile_2010_2019.csv", dtype={"codigo_comuna": str})
    return frame[(frame["evento"] == "nacimiento") & (frame["sexo"] == "total")]


# ---------------------------------------------------------------------------------------------
# The bundled file, by hand


def test_the_corrected_births_are_registered_births_x_1_0526_in_2005_and_2006():
    bundle = bundle_births()
    rm_registered = bundle[bundle["codigo_comuna"].str.startswith("13")].groupby("anio")["nacimientos"].sum()
    assert (rm_registered[2005], rm_registered[2006]) == (92_773, 93_593)
    assert (rm_corrected(2005), rm_corrected(2006)) == (97_653, 98_520)
    assert rm_corrected(2005) / 92_773 == pytest.approx(1.0526, abs=5e-5)
    assert rm_corrected(2006) / 93_593 == pytest.approx(1.0526, abs=5e-5)
    # The region's own line is the sum of its 52 communes' in every year of the file.
    frame = corrected_file()
    communes = frame[frame["Comuna"] != "Región Metropolitana"]
    assert communes.groupby("Año").size().eq(52).all()
    sums = communes.groupby("Año")["Nacidos Vivos Corregidos"].sum()
    region = frame[frame["Comuna"] == "Región Metropolitana"].set_index("Año")["Nacidos Vivos Corregidos"]
    assert (sums == region.loc[sums.index]).all() and len(region) == 30


# ---------------------------------------------------------------------------------------------
# The default build: registered births, the corrected ones beside them


def test_by_default_every_rate_divides_by_the_registered_births(bundled_warehouse):
    assert query(bundled_warehouse, "select distinct births_basis from marts.fct_area_year_rates") == [("registered",)]
    basis = {b for (b,) in query(bundled_warehouse, "select distinct count_basis from marts.fct_area_year_rates")}
    assert basis == {"derived: INE deaths all ages - DEIS deaths aged 1+; bias against MINSAL by region: fct_official_anchors"}
    rm_2010 = query(bundled_warehouse, "select indicator, live_births from marts.fct_area_year_rates "
                                       "where area_level = 'region' and area_code = '13' and year = 2010 order by 1")
    assert rm_2010 == [(indicator, 101_047) for indicator in sorted(aggregate_indicators())]
    assert query(bundled_warehouse, "select count(*) from marts.audit_data_quality "
                                    "where source = 'seremi_rm_corrected_births'") == [(0,)]


def test_both_denominators_side_by_side_for_the_rm_2010_2019(bundled_warehouse):
    every = pd.DataFrame(query(bundled_warehouse, """
        select d.indicator, d.area_level, d.area_code, d.year, d.registered_live_births, d.corrected_live_births,
            d.deaths, d.rate_on_registered, d.rate_on_corrected, d.rate_ratio, d.correction_factor, d.births_basis,
            d.unavailable_reason, r.rate_per_1000
        from marts.fct_births_denominators as d
        inner join marts.fct_area_year_rates as r using (area_level, area_code, year, indicator)"""),
        columns=["indicator", "level", "code", "year", "registered", "corrected", "deaths", "on_registered",
                 "on_corrected", "ratio", "factor", "basis", "reason", "published"])
    # The RM's 52 communes and the region, 10 years, for every indicator of the build.
    assert sorted(set(every.indicator)) == sorted(aggregate_indicators())
    for indicator, rows in every.groupby("indicator"):
        multiplier = indicator_multipliers()[indicator]
        assert len(rows) == 53 * 10 and set(rows.year) == set(range(2010, 2020)), indicator
        assert set(rows.code) == {"13"} | {c for c in ine_births()["codigo_comuna"] if c.startswith("13")}
        assert set(rows.basis) == {"registered"}
        # The registered births are the INE yearbook's, the corrected ones the file's (by name).
        ine = ine_births().set_index(["codigo_comuna", "anio"])["cantidad"]
        communes = rows[rows.level == "commune"].set_index(["code", "year"])
        assert (communes.registered == ine.loc[communes.index]).all()
        assert communes.loc[("13108", 2012), "corrected"] == commune_corrected("Independencia", 2012)
        assert communes.loc[("13122", 2012), "corrected"] == commune_corrected("Peñalolen", 2012)
        assert communes.loc[("13203", 2012), "corrected"] == commune_corrected("San José del Maipo", 2012)
        region = rows[rows.level == "region"].set_index("year")
        assert region.loc[2010, ["registered", "corrected"]].tolist() == [101_047, 101_310]
        # The published rate is the rate on registered births; the other is the same deaths over the
        # corrected births, per the indicator's multiplier (seeds/indicators.csv).
        rated, tolerance = rows[rows.reason.isna()], 1e-12 * multiplier / 1000  # 1e-12 per 1000
        assert len(rated) > 500
        assert (rated.on_registered - rated.published).abs().max() < tolerance
        assert ((rated.on_corrected - multiplier * rated.deaths / rated.corrected).abs() < tolerance).all()
        positive = rated[rated.deaths > 0]
        assert ((positive.ratio - positive.registered / positive.corrected).abs() < 1e-12).all()
        assert rated[rated.deaths == 0].ratio.isna().all()  # no rate to divide: no ratio
        assert ((rows.factor - rows.corrected / rows.registered).abs() < 1e-12).all()
        # A commune-year without a rate keeps both births and gives neither rate.
        unrated = rows[rows.reason.notna()]
        assert unrated.on_registered.isna().all() and unrated.on_corrected.isna().all() and unrated.deaths.isna().all()
        assert ("13123", 2018) in set(zip(unrated.code, unrated.year))  # Providencia 2018: -2 derived deaths


# ---------------------------------------------------------------------------------------------
# births_denominator: corrected, with deaths for 2005-2010 (generated) and the bundled births


@pytest.fixture(scope="module")
def corrected(tmp_path_factory):
    return microdata_warehouse(
        tmp_path_factory.mktemp("births_corrected"), ("13", "11"), range(2005, 2011),
        ["+fct_births_denominators", "+fct_area_year_rates", "+audit_data_quality", "--exclude", "fct_trends+"],
        births="bundled", generator={"deaths_encoding": "utf-8"}, births_denominator="corrected").path


def _rates(path) -> pd.DataFrame:
    return pd.DataFrame(query(path, """
        select area_level, area_code, year, deaths, live_births, rate_per_1000, births_basis, count_basis
        from marts.fct_area_year_rates where indicator = 'imr'"""),
        columns=["level", "code", "year", "deaths", "births", "rate", "basis", "count_basis"]).set_index(
        ["level", "code", "year"])


def test_the_rm_divides_by_corrected_births_and_says_so(corrected):
    rates = _rates(corrected)
    for year in (2005, 2006):
        rm = rates.loc[("region", "13", year)]
        assert rm.births == rm_corrected(year) and rm.basis == "corrected"
        assert rm.rate == pytest.approx(1000 * rm.deaths / rm_corrected(year), rel=1e-12)
        assert "live births: DEIS-corrected (data/raw/seremi_rm_corrected_births_1992_2021.csv)" in rm.count_basis
    independencia = rates.loc[("commune", "13108", 2005)]
    assert independencia.births == commune_corrected("Independencia", 2005) and independencia.basis == "corrected"
    rm_communes = rates[(rates.index.get_level_values("level") == "commune")
                        & rates.index.get_level_values("code").str.startswith("13")]
    assert set(rm_communes.basis) == {"corrected"} and len(rm_communes) == 52 * 6


def test_communes_without_a_corrected_figure_keep_registered_births_with_that_stated(corrected):
    rates = _rates(corrected)
    bundle = bundle_births().set_index(["codigo_comuna", "anio"])["nacimientos"]
    aysen = rates[rates.index.get_level_values("code").str.startswith("11")]
    assert set(aysen.basis) == {"registered_no_corrected_figure"} and len(aysen) == (10 + 1) * 6
    coyhaique = rates.loc[("commune", "11101", 2005)]
    assert coyhaique.births == bundle[("11101", 2005)]
    assert "live births: registered (births_denominator corrected, but no DEIS-corrected figure here)" in coyhaique.count_basis
    # The country sums both: mixed, never one of them silently.
    country = rates.loc[("country", "CL", 2005)]
    births = bundle_births()
    aysen_2005 = int(births[births["codigo_comuna"].str.startswith("11") & (births["anio"] == 2005)]["nacimientos"].sum())
    assert country.basis == "mixed" and country.births == rm_corrected(2005) + aysen_2005
    assert "DEIS-corrected where published" in country.count_basis and "registered elsewhere" in country.count_basis


def test_the_effect_on_every_2005_and_2006_rate_is_published(corrected):
    rows = pd.DataFrame(query(corrected, """
        select area_level, area_code, year, registered_live_births, corrected_live_births, deaths,
            rate_on_registered, rate_on_corrected, rate_ratio, births_basis
        from marts.fct_births_denominators where indicator = 'imr'"""),
        columns=["level", "code", "year", "registered", "corrected", "deaths", "on_registered", "on_corrected",
                 "ratio", "basis"]).set_index(["level", "code", "year"])
    assert not rows.index.get_level_values("code").str.startswith("11").any()  # Aysén: no corrected figure
    assert len(rows) == 53 * 6 and set(rows.basis) == {"corrected"}
    rm = rows.loc[("region", "13", 2005)]
    assert (rm.registered, rm.corrected) == (92_773, rm_corrected(2005))
    assert rm.on_registered == pytest.approx(1000 * rm.deaths / 92_773, rel=1e-12)
    assert rm.on_corrected == pytest.approx(1000 * rm.deaths / 97_653, rel=1e-12)
    assert rm.ratio == pytest.approx(92_773 / 97_653, rel=1e-12)  # 0.950
    # Every RM rate of 2005-2006 is 5% lower on corrected births (corrected = registered x 1.051-1.056
    # by commune); the ratio is the births' ratio wherever there is a positive rate to divide.
    early = rows[rows.index.get_level_values("year") <= 2006]
    assert len(early) == 2 * 53
    assert (early.registered / early.corrected).between(1 / 1.057, 1 / 1.050).all()
    with_ratio = early.dropna(subset=["ratio"])
    assert len(with_ratio) > 80
    assert ((with_ratio.ratio - with_ratio.registered / with_ratio.corrected).abs() < 1e-12).all()
    bundle = bundle_births().set_index(["codigo_comuna", "anio"])["nacimientos"]
    assert rows.loc[("commune", "13108", 2006)].registered == bundle[("13108", 2006)]
    # The published rate is the rate on corrected births.
    rates = _rates(corrected)
    for key, row in rows.dropna(subset=["on_corrected"]).iterrows():
        assert rates.loc[key].rate == pytest.approx(row.on_corrected, rel=1e-12), key


# ---------------------------------------------------------------------------------------------
# Strict staging of the corrected births


def _broken_copy(tmp_path, change) -> tuple:
    raw = tmp_path / "raw"
    shutil.copytree(RAW, raw)
    path = raw / CORRECTED
    lines = path.read_text(encoding="utf-8").split("\n")
    number = change(lines)
    path.write_text("\n".join(lines), encoding="utf-8")
    return raw, number


def _line_of(lines: list[str], prefix: str) -> int:
    return next(i for i, line in enumerate(lines, start=1) if line.startswith(prefix))


def _alter(prefix: str, field: int, value: str):
    def change(lines):
        number = _line_of(lines, prefix)
        fields = lines[number - 1].split(",")
        fields[field] = value
        lines[number - 1] = ",".join(fields)
        return number
    return change


def _duplicate(prefix: str):
    def change(lines):
        number = _line_of(lines, prefix)
        lines.insert(len(lines) - 1, lines[number - 1])  # the copy as the last line (the file ends with a newline)
        return len(lines) - 1
    return change


BROKEN = {
    # Alhué 2001: 49 births of a population of 4516 (rate 10.85); 48 no longer gives that rate.
    "births_not_the_rate": (_alter("2001,", 2, "48"), "Tasa Natalidad 10.850310008857395 is not Nacidos Vivos Corregidos"),
    "letter_in_a_count": (_alter("2001,", 3, "45O6"), "Not a number in {file} line {line}: Población INE"),
    "unknown_commune": (_alter("2001,", 4, "Alhué Norte"), "Unknown unit in {file} line {line}: Comuna"),
    "line_read_twice": (_duplicate("2005,"), "Duplicated row in {file} line {line}: same key as line"),
}


@pytest.mark.e2e  # fault injection
@pytest.mark.parametrize("case", list(BROKEN))
def test_a_broken_line_stops_the_build_naming_file_and_line(tmp_path, case):
    change, message = BROKEN[case]
    raw, number = _broken_copy(tmp_path, change)
    result = run_dbt(STAGING, tmp_path / "w.duckdb", {"raw_data_dir": str(raw)}, check=False)
    assert result.returncode != 0
    expected = message.format(file=f"{raw}/{CORRECTED}", line=number)
    assert expected in result.stdout, result.stdout[-3000:]
    assert f"{CORRECTED} line {number}" in result.stdout


@pytest.mark.e2e  # fault injection
def test_a_deleted_commune_line_is_audited_and_keeps_registered_births(tmp_path):
    def delete_independencia_2005(lines):
        number = next(i for i, line in enumerate(lines, start=1)
                      if line.startswith("2005,") and line.endswith(",Independencia"))
        del lines[number - 1]
        return number

    raw, _ = _broken_copy(tmp_path, delete_independencia_2005)
    path = tmp_path / "w.duckdb"
    run_dbt(STAGING, path, {"raw_data_dir": str(raw), "births_denominator": "corrected"})
    audit = query(path, "select check_name, commune_code, year, observed_value, affects_results "
                        "from intermediate.int_audit__corrected_births order by check_name")
    missing = rm_corrected(2005) - commune_corrected("Independencia", 2005)
    assert audit == [
        ("corrected_births_commune_year_missing", "13108", 2005, "no line for the commune-year", True),
        ("corrected_births_region_differs_from_communes", None, 2005,
         f"region={rm_corrected(2005)} sum_of_communes={missing}", False)]


def test_an_unknown_denominator_is_refused_before_anything_runs(tmp_path):
    result = run_dbt(["build", "--select", "stg_seremi_rm__corrected_births"], tmp_path / "w.duckdb",
                     {"births_denominator": "adjusted"}, check=False)
    assert result.returncode != 0
    assert "dbt var births_denominator must be one of registered, corrected; got 'adjusted'" in result.stdout + result.stderr
    assert "START" not in result.stdout
