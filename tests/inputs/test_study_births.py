"""The study's period (González et al. 2020: RM, 2005-2014) from the DEIS deaths alone (issue 42).

The bundled births by commune 2001-2016 (data/raw/deis_births_by_commune_year_2001_2016.csv) are
the births of the microdata mode when no births file is given. One build: generated RM deaths
2005-2019 (synthetic) and no births path. The births figures asserted are real (the bundle's).
"""

from __future__ import annotations

import pytest

from conftest import REPO_ROOT, query, run_dbt

BUNDLE = "data/raw/deis_births_by_commune_year_2001_2016.csv"


@pytest.fixture(scope="module")
def study(rm_study_period):
    """The session's build (conftest), shared with test_study_findings.py, whose custom_period
    reaches none of the marts read here."""
    return rm_study_period


def test_rm_births_2005_and_independencia_2005_2009_come_from_the_bundle(study):
    (rm_2005,), = query(study, """
        select live_births from marts.fct_area_year_rates
        where area_level = 'region' and area_code = '13' and year = 2005 and indicator = 'imr'""")
    assert rm_2005 == 92_773
    (independencia,), = query(study, """
        select sum(live_births) from marts.fct_area_year_rates
        where area_level = 'commune' and area_code = '13108' and year between 2005 and 2009 and indicator = 'imr'""")
    assert independencia == 5_536


def test_every_rm_commune_has_its_infant_mortality_for_every_year_of_the_study(study):
    rows = query(study, """
        select year, count(*) filter (where rate_per_1000 is not null), count(*)
        from marts.fct_area_year_rates
        where area_level = 'commune' and indicator = 'imr' and year between 2005 and 2014
        group by year order by year""")
    assert rows == [(year, 52, 52) for year in range(2005, 2015)]
    # Only the RM is in the input: the bundle's births of other regions are not read as zero deaths.
    (regions,), = query(study, "select count(distinct region_code) from marts.fct_area_year_rates where area_level = 'commune'")
    assert regions == 1


def test_count_basis_and_the_audit_say_which_source_fed_which_year(study):
    (basis,), = query(study, "select distinct count_basis from marts.fct_area_year_rates")
    assert basis.startswith("GENERATED DEIS-layout microdata (synthetic): death records")
    assert f"live births: bundled DEIS births by commune 2001-2016 ({BUNDLE})" in basis
    sources = query(study, """
        select year, source, observed_value from marts.audit_data_quality
        where check_name = 'births_source' order by year""")
    assert sources == [(year, "deis_births_bundle", BUNDLE) for year in range(2005, 2017)]
    (rm_2006_2009,), = query(study, """
        select list(live_births order by year) from marts.fct_area_year_rates
        where area_level = 'region' and indicator = 'imr' and year between 2006 and 2009""")
    assert rm_2006_2009 == [93_593, 97_594, 99_867, 102_242]
    # 2017-2019: deaths and no births source: unavailable, never a zero.
    missing = query(study, """
        select distinct year from marts.fct_area_year_rates
        where area_level = 'commune' and unavailable_reason = 'births_input_missing_year' order by year""")
    assert missing == [(2017,), (2018,), (2019,)]


def test_the_crosswalk_maps_the_source_codes_of_each_year(study):
    mapped = dict(((old, year), new) for old, year, new in query(study, """
        select commune_code_as_read, year, commune_code from staging.stg_deis_aggregates__births_by_commune_year
        where commune_code_as_read in ('01106', '01401', '01201', '15101', '05106', '05801', '08401', '10501', '14101')
            and year in (2006, 2007, 2009, 2010, 2016)"""))
    assert mapped[("01106", 2006)] == "01401" and mapped[("01401", 2007)] == "01401"  # Tamarugal, Pozo Almonte
    assert mapped[("01201", 2006)] == "15101" and mapped[("15101", 2007)] == "15101"  # Arica
    assert mapped[("10501", 2006)] == "14101" and mapped[("14101", 2007)] == "14101"  # Valdivia
    assert mapped[("05106", 2009)] == "05801" and mapped[("05801", 2010)] == "05801"  # Quilpué
    assert mapped[("08401", 2016)] == "16101"  # Chillán: 084xx in every year of the bundle


def test_the_bundle_and_the_ine_births_are_compared_not_chosen_between(study):
    by_year = query(study, """
        select year, count(*), count(*) filter (where is_different), max(abs(difference)),
            sum(births_deis_bundle), sum(births_ine)
        from marts.audit_births_sources group by year order by year""")
    assert [row[0] for row in by_year] == list(range(2010, 2017))
    assert all(count == 346 for _, count, *_ in by_year)
    assert by_year[0][4:] == (250_589, 250_643)  # 2010: the bundle 54 short nationally
    assert max(row[3] for row in by_year) == 20  # Iquique 2010: 3,407 and 3,427
    rm, = query(study, """
        select count(*) filter (where is_different), count(*), max(abs(difference)) from marts.audit_births_sources
        where region_code = '13' and year <= 2014""")
    # data/README.md of the source: 224 of the 260 RM commune-years 2010-2014 identical, none off by more than 4.
    assert rm == (36, 260, 4)


@pytest.mark.e2e  # fault injection
def test_the_continuity_test_catches_births_put_under_the_wrong_commune(tmp_path):
    # La Unión's and Futrono's births of 2006 swapped (as a crosswalk swapping 10503 and 10504
    # would count them): every line still parses and agrees with the derived codes, and only the
    # continuity across the 2007 recode sees it.
    import shutil

    raw = tmp_path / "raw"
    shutil.copytree(REPO_ROOT / "data" / "raw", raw)
    bundle = raw / "deis_births_by_commune_year_2001_2016.csv"
    lines = bundle.read_text(encoding="utf-8").split("\n")
    (la_union,), (futrono,) = ([i for i, line in enumerate(lines) if line.startswith(f"2006,{code},")]
                               for code in ("14201", "14202"))
    head = lambda line: line.split(",")[:4]  # noqa: E731
    tail = lambda line: line.split(",")[4:]  # noqa: E731
    lines[la_union], lines[futrono] = (",".join(head(lines[la_union]) + tail(lines[futrono])),
                                       ",".join(head(lines[futrono]) + tail(lines[la_union])))
    bundle.write_text("\n".join(lines), encoding="utf-8")
    result = run_dbt(["build", "--select", "+stg_deis_aggregates__births_by_commune_year",
                      "assert_bundled_births_continuous_across_recodes"],
                     tmp_path / "swapped.duckdb", {"raw_data_dir": str(raw)}, check=False)
    assert result.returncode != 0
    assert "Failure in test assert_bundled_births_continuous_across_recodes" in result.stdout
    assert "Failure in test stg_deis_aggregates__births_by_commune_year" not in result.stdout


@pytest.mark.e2e  # fault injection
def test_a_malformed_bundle_line_stops_naming_it_and_a_narrower_window_does_not(tmp_path):
    # Before (issue 41 part 8, found by the input fuzz): births "4.7" on one line stopped the
    # build only through the data test every_line_is_read ("Got 1 result"), naming neither file
    # nor line; and any input_year_min after 2001 stopped it the same way (every line of 2001 to
    # the minimum was year_out_of_range). Now the malformed line is named, a line of a real year
    # outside the window is left out of the window, and a blank line holds nothing.
    import shutil

    raw = tmp_path / "raw"
    shutil.copytree(REPO_ROOT / "data" / "raw", raw)
    bundle = raw / "deis_births_by_commune_year_2001_2016.csv"
    lines = bundle.read_text(encoding="utf-8").split("\n")
    vichuquen = next(i for i, line in enumerate(lines) if line.startswith("2009,07309,"))
    lines[vichuquen] = lines[vichuquen].replace(",47,", ",4.7,")
    lines[vichuquen - 5] = ""
    bundle.write_text("\n".join(lines), encoding="utf-8")
    result = run_dbt(["build", "--select", "+stg_deis_aggregates__births_by_commune_year"], tmp_path / "bundle.duckdb",
                     {"raw_data_dir": str(raw), "input_year_min": 2005}, check=False)
    assert result.returncode != 0
    assert f"{bundle} line {vichuquen + 1}: count_not_whole_number" in result.stdout, result.stdout[-3000:]
    assert "Failure in test" not in result.stdout
