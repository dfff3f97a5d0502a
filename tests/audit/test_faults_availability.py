"""Issue 41: births held against the area, and one availability rule for every mart.

One faulted build, compared with the clean one (the session's bundled_warehouse):

- Coyhaique 2015 births 884 -> 999,999 and Puente Alto 2017 births 7,322 -> 950,000, both under
  var max_plausible_count, so no line-level check stops them: before issue 41 they were published
  (Chile 2015 IMR 1.36 instead of 6.91, Aysén 0.008, the RM's 2017 rate 0.67);
- La Florida's 2010 births line removed: fct_area_year_rates said the RM's (and the country's)
  2010 rate is unavailable, but fct_geographic_inequality published both, and its period rows
  counted 3,546 RM deaths where fct_area_period_rates has 2,851.

The availability test enumerates the marts of the build (information_schema), so that a new mart
fails it until it says how it aggregates communes: each mart is normalized to the area-spans it
publishes (area, indicator, first and last year, the published value, the area's deaths), and
checked against fct_area_year_rates / fct_area_period_rates.
"""

from __future__ import annotations

import shutil

import duckdb
import pytest

from conftest import REPO_ROOT, query, run_dbt
from promise import check_promise

# End to end: a group of its own (`make test-e2e`; `make check` and CI run it with the rest).
pytestmark = pytest.mark.e2e

INE = "ine_vital_statistics_chile_2010_2019.csv"
BIRTHS_TYPOS = {("11101", 2015): "999999", ("13201", 2017): "950000"}  # Coyhaique, Puente Alto
REMOVED_BIRTHS = ("13110", 2010)                                       # La Florida


def _mutate(path):
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)

    def find(commune, year):
        return next(i for i, line in enumerate(lines) if line.startswith(f"{year},{commune},") and ",nacimiento," in line)

    for (commune, year), value in BIRTHS_TYPOS.items():
        i = find(commune, year)
        fields = lines[i].rstrip("\n").split(",")
        fields[5] = value
        lines[i] = ",".join(fields) + "\n"
    del lines[find(*REMOVED_BIRTHS)]
    path.write_text("".join(lines), encoding="utf-8")


@pytest.fixture(scope="module")
def faulted(tmp_path_factory):
    root = tmp_path_factory.mktemp("availability")
    raw = root / "raw"
    shutil.copytree(REPO_ROOT / "data" / "raw", raw)
    _mutate(raw / INE)
    path = root / "faulted.duckdb"
    run_dbt(["build"], path, {"raw_data_dir": str(raw)})  # every mart, the trends too: each is checked
    return path


def _rate(path, level, code, year):
    return query(path, "select rate_per_1000, unavailable_reason from marts.fct_area_year_rates "
                       "where area_level = ? and area_code = ? and year = ? and indicator = 'imr'", [level, code, year])[0]


# ---------------------------------------------------------------------------------------------
# 1. Births against the area


def test_births_far_beyond_the_population_aged_0_are_audited_and_publish_no_aggregate(bundled_warehouse, faulted):
    assert check_promise(bundled_warehouse, faulted) == []
    for (commune, year), value in BIRTHS_TYPOS.items():
        region = commune[:2]
        assert _rate(faulted, "commune", commune, year) == (None, "implausible_births")
        assert _rate(faulted, "region", region, year) == (None, "region_commune_out_of_bounds")
        assert _rate(faulted, "country", "CL", year) == (None, "country_commune_out_of_bounds")
        (observed,) = query(faulted, "select observed_value from marts.audit_data_quality "
                                     "where check_name = 'implausible_births' and commune_code = ? and year = ? "
                                     "and indicator = 'imr'", [commune, year])[0]
        assert f"live_births={value} population_aged_0=" in observed
        # The region's audit row names the commune.
        (names,) = query(faulted, "select observed_value from marts.audit_data_quality "
                                  "where record_key = ?", [f"region={region} year={year} indicator=imr"])[0]
        assert f"{commune} (implausible_births)" in names
    # The clean build: Chile 2015 6.91, Aysén 2015 and the RM 2017 published.
    assert _rate(bundled_warehouse, "country", "CL", 2015)[0] == pytest.approx(6.91, abs=0.005)
    # Every period of Aysén holding 2015 pools the other years only, as its yearly rates say.
    periods = query(faulted, "select period_start, period_end, n_years from marts.fct_area_period_rates "
                             "where area_code = '11' and indicator = 'imr' and 2015 between period_start and period_end")
    assert periods and all(n == end - start for start, end, n in periods)


def test_the_real_data_raise_no_births_alarm(bundled_warehouse):
    assert query(bundled_warehouse, "select count(*) from intermediate.int_commune_year_counts "
                                    "where count_problem = 'implausible_births'") == [(0,)]
    # Both yardsticks are there for every real commune-year (population aged 0, a 10-year series).
    assert query(bundled_warehouse, "select count(*), count(age_0_population), count(series_median_births) "
                                    "from intermediate.int_commune_year_counts where indicator = 'imr'") == [
        (3460, 3460, 3460)]
    # No population line is reported as unreadable.
    assert query(bundled_warehouse, "select count(*) from marts.audit_data_quality where source = 'ine_population'") == [(0,)]


# ---------------------------------------------------------------------------------------------
# 2. One availability rule for every mart

# Each mart that publishes something for an area (region, country) and a span, as rows of
# (area_level, area_code, indicator, period_start, period_end, value, deaths): `value` is what
# it publishes for that area-span (null: nothing), `deaths` the area's deaths it adds up to
# (null where the mart has no such sum). The marts of core are the reference.
NORMALIZED = {
    "fct_geographic_inequality": """
        select area_level, area_code, indicator, period_start, period_end, rate_per_1000 as value,
            deaths as published_deaths, cast(null as bigint) as deaths
        from {db}.marts.fct_geographic_inequality""",
    "fct_rates_by_quintile": """
        select area_level, area_code, indicator, period_start, period_end, max(rate_per_1000) as value,
            cast(null as bigint) as published_deaths, sum(deaths) as deaths
        from {db}.marts.fct_rates_by_quintile
        group by area_level, area_code, indicator, period_start, period_end, stratifier""",
    "fct_inequality": """
        select area_level, area_code, indicator, period_start, period_end, max(estimate) as value,
            cast(null as bigint) as published_deaths, max(deaths) as deaths
        from {db}.marts.fct_inequality
        group by area_level, area_code, indicator, period_start, period_end, stratifier""",
    "fct_commune_deprivation": """
        select area_level, area_code, indicator, period_start, period_end, max(rate_per_1000) as value,
            sum(deaths) as published_deaths, sum(deaths + unpublished_deaths) as deaths
        from {db}.marts.fct_commune_deprivation
        group by area_level, area_code, indicator, period_start, period_end, stratifier""",
    "fct_inequality_trends": """
        select area_level, area_code, indicator, period_start, period_end, rii as value,
            cast(null as bigint) as published_deaths, n_deaths as deaths
        from {db}.marts.fct_inequality_trends""",
    "fct_trends": """
        select area_level, area_code, indicator, period_start, period_end, apc as value,
            cast(null as bigint) as published_deaths, n_deaths as deaths
        from {db}.marts.fct_trends where area_level in ('region', 'country')""",
    "fct_trend_segments": """
        select area_level, area_code, indicator, period_start, period_end, max(apc) as value,
            cast(null as bigint) as published_deaths, max(series_deaths) as deaths
        from {db}.marts.fct_trend_segments where area_level in ('region', 'country')
        group by area_level, area_code, indicator, period_start, period_end""",
    "fct_reducible_infant_deaths": """
        select area_level, area_code, 'imr' as indicator, period_start, period_end, reducible_share as value,
            cast(null as bigint) as published_deaths, infant_deaths as deaths
        from {db}.marts.fct_reducible_infant_deaths where area_level in ('region', 'country')""",
    # The rate on registered or on corrected births: the published one is whichever births_basis names.
    "fct_births_denominators": """
        select area_level, area_code, indicator, year as period_start, year as period_end,
            case births_basis when 'corrected' then rate_on_corrected else rate_on_registered end as value,
            cast(null as bigint) as published_deaths, deaths
        from {db}.marts.fct_births_denominators where area_level in ('region', 'country')""",
    "fct_external_benchmarks": """
        select 'country' as area_level, 'CL' as area_code, indicator, year as period_start, year as period_end,
            country_rate_per_1000 as value, cast(null as bigint) as published_deaths, country_deaths as deaths
        from {db}.marts.fct_external_benchmarks""",
    "fct_funnel_limits": """
        select distinct 'region' as area_level, region_code as area_code, indicator, period_start, period_end,
            region_rate_per_1000 as value, cast(null as bigint) as published_deaths, cast(null as bigint) as deaths
        from {db}.marts.fct_funnel_limits""",
    # A commune's region pooled over the commune's own years: the region's period when they are all of them.
    "fct_commune_vs_region": """
        select 'region' as area_level, c.region_code as area_code, c.indicator, c.period_start, c.period_end,
            c.region_rate_per_1000 as value, cast(null as bigint) as published_deaths, c.region_deaths as deaths
        from {db}.marts.fct_commune_vs_region as c
        inner join {db}.marts.fct_area_period_rates as a
            on a.area_level = 'region' and a.area_code = c.region_code and a.indicator = c.indicator
            and a.period_start = c.period_start and a.period_end = c.period_end and a.n_years = c.n_years""",
}
REFERENCE = {"fct_area_year_rates", "fct_area_period_rates", "fct_rates_commune_year"}
# Marts with no area aggregate of their own, and why; a mart with area columns cannot be here.
NOT_AREA_AGGREGATES = {
    "audit_data_quality": "the audit itself",
    "audit_input_files": "files read",
    "meta_build": "build settings",
    "dim_commune": "reference", "dim_commune_neighbours": "reference", "dim_commune_peers": "reference",
    "dim_indicator": "reference", "dim_stratifier": "reference",
    "fct_smoothed_rates": "commune rows pooled as fct_commune_vs_region pools them (checked below)",
    "fct_bym2_rates": "commune rows pooled as fct_commune_vs_region pools them (checked below)",
    "fct_spatial_clusters": "commune rows pooled as fct_commune_vs_region pools them (checked below)",
    "fct_commune_screening": "commune rows: fct_commune_vs_region's comparison and the commune's trend",
    "fct_study_findings": "the study's statements: commune rows of fct_commune_vs_region and fct_trends",
    "fct_commune_vs_peers": "a commune against peers chosen across regions, each on its own published years",
    "fct_commune_vs_benchmark": "a commune against benchmark communes, each on its own published years",
    "fct_trend_calibration": "simulated series on the build's births: no area figure",
    "fct_cluster_calibration": "simulated maps on the build's births: no area figure",
    "dim_trend_method": "the list of trend methods: no area figure",
    "audit_births_sources": "commune-year births of two sources side by side (an audit)",
}
# Marts pooling an area over a span that is not an analysis period (MINSAL's 2011-2020), straight
# from fct_area_year_rates' published years: checked below against those years' sums.
POOLS_CORE_YEARS = {"fct_official_anchors"}


def _marts(db_path):
    return {name: set(columns.split(",")) for name, columns in query(db_path, """
        select table_name, string_agg(column_name, ',') from information_schema.columns
        where table_schema = 'marts' group by table_name""")}


def _reference(con, db):
    """Area-spans with a rate: (level, code, indicator, start, end) -> (deaths, published commune deaths)."""
    rows = con.execute(f"""
        select area_level, area_code, indicator, year, year, deaths, deaths - unpublished_commune_deaths
        from {db}.marts.fct_area_year_rates where area_level in ('region', 'country') and rate_per_1000 is not null
        union all
        select area_level, area_code, indicator, period_start, period_end, deaths, deaths - unpublished_commune_deaths
        from {db}.marts.fct_area_period_rates where rate_per_1000 is not null""").fetchall()
    return {tuple(r[:5]): tuple(r[5:]) for r in rows}


def availability_violations(clean_path, faulted_path) -> tuple[list[str], dict[str, int]]:
    """Every published area-span of every normalized mart of the faulted build must have a rate in
    fct_area_year_rates (a single year) or fct_area_period_rates (a period); and where a mart's
    deaths add up to the area's in the clean build, they must add up in the faulted one too.
    Returns the violations and, per mart, how many clean rows the add-up compared (not vacuous)."""
    violations, compared = [], {}
    with duckdb.connect() as con:
        con.execute("attach ? as clean (read_only)", [str(clean_path)])
        con.execute("attach ? as faulted (read_only)", [str(faulted_path)])
        reference = {db: _reference(con, db) for db in ("clean", "faulted")}
        for mart, sql in NORMALIZED.items():
            rows = {db: con.execute(sql.format(db=db)).fetchall() for db in ("clean", "faulted")}
            clean_adds_up = set()
            for level, code, indicator, start, end, value, published, deaths in rows["clean"]:
                ref = reference["clean"].get((level, code, indicator, start, end))
                if ref and ((deaths is not None and deaths == ref[0]) or (published is not None and published == ref[1])):
                    clean_adds_up.add((level, code, indicator, start, end))
            compared[mart] = len(clean_adds_up)
            for level, code, indicator, start, end, value, published, deaths in rows["faulted"]:
                key = (level, code, indicator, start, end)
                ref = reference["faulted"].get(key)
                if value is not None and ref is None:
                    violations.append(f"{mart}: publishes {value!r} for {key}, which has no rate in core")
                elif value is not None and key in clean_adds_up and not (
                        (deaths is not None and deaths == ref[0]) or (published is not None and published == ref[1])):
                    violations.append(f"{mart}: {key} counts deaths {deaths}/{published} where core has {ref}")
    return violations, compared


def test_every_mart_follows_the_areas_availability(bundled_warehouse, faulted):
    marts = _marts(faulted)
    unclassified = set(marts) - set(NORMALIZED) - REFERENCE - set(NOT_AREA_AGGREGATES) - POOLS_CORE_YEARS
    assert unclassified == set(), f"classify these marts in test_faults_availability.py: {unclassified}"
    for name in NOT_AREA_AGGREGATES:
        assert "area_level" not in marts.get(name, set()), name
    assert _rate(faulted, "region", "13", 2010) == (None, "region_incomplete")
    assert _rate(faulted, "country", "CL", 2010) == (None, "country_incomplete")
    violations, compared = availability_violations(bundled_warehouse, faulted)
    assert violations == []
    # The add-up compares real rows for the marts that sum the area's deaths (not a vacuous check).
    for mart in ("fct_geographic_inequality", "fct_rates_by_quintile", "fct_commune_deprivation", "fct_commune_vs_region"):
        assert compared[mart] > 0, mart
    # The cases of the issue: no RM or country row for 2010; the RM's 2010-2014 deaths those of core.
    assert query(faulted, "select count(*) from marts.fct_geographic_inequality where span = 'year' "
                          "and period_start = 2010 and area_code in ('13', 'CL')") == [(0,)]
    ((core_deaths, unpublished),) = query(faulted, """
        select deaths, unpublished_commune_deaths from marts.fct_area_period_rates
        where area_code = '13' and indicator = 'imr' and period_start = 2010 and period_end = 2014""")
    assert query(faulted, "select deaths from marts.fct_geographic_inequality where area_code = '13' "
                          "and indicator = 'imr' and span = 'period' and period_start = 2010 and period_end = 2014") == [
        (core_deaths - unpublished,)]
    # MINSAL's periods pool exactly the area's years that have a rate in core (none of the RM's
    # unavailable ones), and the comparison compares something.
    anchors = query(faulted, """
        select a.area_level, a.area_code, a.minsal_period_label, a.n_years, a.deaths, count(y.rate_per_1000), sum(y.deaths)
        from marts.fct_official_anchors as a
        left join marts.fct_area_year_rates as y
            on y.area_level = a.area_level and y.area_code = a.area_code and y.indicator = a.indicator
            and y.year between a.minsal_period_start and a.minsal_period_end and y.rate_per_1000 is not null
        where a.rate_per_1000 is not null
        group by all""")
    assert len(anchors) > 300
    assert [row for row in anchors if row[3:5] != row[5:7]] == []
    # Puente Alto's 2017 births typo takes 2017 out of the RM's 2017-2019.
    assert [row[3] for row in anchors if row[:3] == ("region", "13", "2017-2019")] == [2]
    # Smoothing (EB, BYM2) and the clusters pool each commune as fct_commune_vs_region does.
    for mart in ("fct_smoothed_rates", "fct_bym2_rates", "fct_spatial_clusters"):
        assert query(faulted, f"""
            select count(*) from marts.{mart} as s
            inner join marts.fct_commune_vs_region as c using (commune_code, indicator, period_start, period_end)
            where s.deaths is distinct from c.deaths or s.live_births is distinct from c.live_births""") == [(0,)], mart


def test_the_availability_check_catches_a_mart_that_ignores_it(bundled_warehouse, faulted, tmp_path):
    """The check itself: a copy of the faulted build whose geographic inequality gets back the RM's
    2010 row (as before issue 41) is refused."""
    copy = tmp_path / "copy.duckdb"
    shutil.copy(faulted, copy)
    with duckdb.connect(str(copy)) as con:
        # With an interval: the mart's own check wants one on a row of 20 deaths or more.
        con.execute("""insert into marts.fct_geographic_inequality (area_level, area_code, indicator, span,
            period_start, period_end, n_communes, deaths, live_births, rate_per_1000,
            true_variance_ci95_lower, true_variance_ci95_upper)
            values ('region', '13', 'imr', 'year', 2010, 2010, 51, 700, 97000, 7.1988, 0.0, 1.0)""")
    violations, _ = availability_violations(bundled_warehouse, copy)
    assert any("fct_geographic_inequality" in v and "'13', 'imr', 2010, 2010" in v for v in violations)
