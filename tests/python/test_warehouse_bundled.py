"""The warehouse built by the real dbt CLI on the bundled real data gives the known figures."""

from conftest import query

RM_COMMUNES = 52


def test_every_rm_commune_has_ten_years_of_infant_mortality(bundled_warehouse):
    rows = query(
        bundled_warehouse,
        "select count(distinct area_code), count(distinct year), count(*) "
        "from marts.fct_rates_commune_year where area_level = 'commune' and indicator = 'imr'",
    )
    assert rows == [(RM_COMMUNES, 10, RM_COMMUNES * 10)]


def test_region_2010_is_721_deaths_in_101047_births(bundled_warehouse):
    # data/README.md: RM infant mortality from the derivation is 7.14 per 1000 in 2010.
    (deaths, births, rate, lower, upper), = query(
        bundled_warehouse,
        "select deaths, live_births, rate_per_1000, ci95_lower, ci95_upper from marts.fct_rates_commune_year "
        "where area_level = 'region' and area_code = '13' and year = 2010 and indicator = 'imr'",
    )
    assert (deaths, births) == (721, 101047)
    assert round(rate, 2) == 7.14
    assert lower < rate < upper


def test_region_rates_match_the_published_derivation_every_year(bundled_warehouse):
    published = [7.14, 7.55, 7.02, 6.73, 7.06, 6.57, 6.63, 6.82, 5.95, 5.97]  # data/README.md
    rows = query(
        bundled_warehouse,
        "select round(rate_per_1000, 2) from marts.fct_rates_commune_year "
        "where area_level = 'region' and indicator = 'imr' order by year",
    )
    assert [r[0] for r in rows] == published


def test_negative_derived_count_is_audited_and_has_no_rate(bundled_warehouse):
    # Providencia 2018: INE 1100 deaths of all ages, DEIS 1102 aged 1+ -> -2 infant deaths.
    audit = query(
        bundled_warehouse,
        "select check_name, observed_value, affects_results from marts.audit_data_quality "
        "where commune_code = '13123' and year = 2018",
    )
    assert audit == [("negative_derived_count", "deaths=-2 live_births=1857", True)]
    (deaths, rate, lower, reason), = query(
        bundled_warehouse,
        "select deaths, rate_per_1000, ci95_lower, unavailable_reason from marts.fct_rates_commune_year "
        "where area_code = '13123' and year = 2018",
    )
    assert (deaths, rate, lower, reason) == (None, None, None, "negative_derived_count")


def test_commune_interval_is_the_exact_poisson_interval_by_hand(bundled_warehouse):
    # Independencia 2010 by hand: INE births and all-age deaths minus DEIS deaths aged 1+.
    (deaths, births, rate, lower, upper), = query(
        bundled_warehouse,
        "select deaths, live_births, rate_per_1000, ci95_lower, ci95_upper from marts.fct_rates_commune_year "
        "where area_code = '13108' and year = 2010",
    )
    ine = query(
        bundled_warehouse,
        "select sum(case when evento = 'nacimiento' then cantidad end), sum(case when evento = 'defuncion' then cantidad end) "
        "from read_csv('data/raw/ine_vital_statistics_rm_2010_2019.csv') where codigo_comuna = 13108 and anio = 2010",
    )
    deis = query(
        bundled_warehouse,
        "select sum(Death_count_all_cause) from read_csv('data/raw/deis_deaths_by_commune_year_sex_agegroup_1990_2019.csv') "
        "where CODIGO_COMUNA_RESIDENCIA = 13108 and Year = 2010 and \"Age group\" = '1+'",
    )
    births_by_hand, all_deaths = ine[0]
    assert births == births_by_hand
    assert deaths == all_deaths - deis[0][0]
    from scipy import stats

    assert rate == 1000 * deaths / births
    assert lower == stats.chi2.ppf(0.025, 2 * deaths) / 2 * 1000 / births
    assert upper == stats.chi2.ppf(0.975, 2 * deaths + 2) / 2 * 1000 / births


def test_dim_commune_has_all_346_communes_with_coordinates(bundled_warehouse):
    rows = query(
        bundled_warehouse,
        "select count(*), count(distinct region_code), count(latitude), "
        "max(commune_name) filter (where commune_code = '13101') from marts.dim_commune",
    )
    assert rows == [(346, 16, 346, "Santiago")]


def test_unreliable_flag_follows_the_death_count(bundled_warehouse):
    rows = query(
        bundled_warehouse,
        "select count(*) from marts.fct_rates_commune_year "
        "where deaths is not null and is_unreliable <> (deaths < 20)",
    )
    assert rows == [(0,)]


def test_a_truncated_input_file_is_reported_not_silently_smaller(tmp_path):
    # A file cut at a line boundary still parses; the missing commune-years must show up in the
    # audit and the region's rate for those years must be unavailable, not computed on fewer communes.
    import shutil

    from conftest import REPO_ROOT, run_dbt

    raw = tmp_path / "raw"
    shutil.copytree(REPO_ROOT / "data" / "raw", raw)
    ine = raw / "ine_vital_statistics_rm_2010_2019.csv"
    lines = ine.read_text(encoding="utf-8").splitlines(keepends=True)
    ine.write_text("".join(lines[:-10]), encoding="utf-8")  # the last 5 communes of 2019 lost
    path = tmp_path / "truncated.duckdb"
    run_dbt(["build", "--exclude", "fct_trends"], path, {"raw_data_dir": str(raw)})

    missing = query(
        path,
        "select count(*) from marts.audit_data_quality where check_name = 'commune_year_missing' and year = 2019",
    )
    assert missing == [(5,)]
    region_2019 = query(
        path,
        "select rate_per_1000, unavailable_reason, communes_unavailable from marts.fct_rates_commune_year "
        "where area_level = 'region' and year = 2019",
    )
    assert region_2019 == [(None, "region_incomplete", 5)]
