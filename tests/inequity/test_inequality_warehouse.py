"""The inequality marts in real builds.

* The bundled build (RM, 2010-2019): membership recomputed from every commune's yearly births
  (the region's own commune-years, docs/methods/core.md, "One rule for every aggregate of communes") and the covariate file read with
  Python's csv module (a second reader); quintile sums equal the region's pooled count; D and PAF agree with the quintile mart; the fitted gradient; the benchmark is the
  lowest rate among communes with >= 20 deaths; single years come from the yearly mart; the
  RII trend mart is fct_trends' shell run on the published single-year RII.
* Generated microdata for three regions (the country path), built with covariate files that
  lack one commune's value and carry one unparseable value, and with `benchmark_communes` set:
  the communes without a value are counted and audited, the RM-only stratifiers produce no
  rows outside the RM and say so, the country ranks every commune of the three regions.
"""

from __future__ import annotations

import csv
import math
import shutil

import pytest

from conftest import (COVARIATE_DROPPED, COVARIATE_UNPARSEABLE, REPO_ROOT, THREE_REGIONS, aggregate_indicators,
                      query, run_dbt, regions_of, stratifier_communes, stratifier_regions)

RAW = REPO_ROOT / "data" / "raw"
MEASURE_KEYS = "indicator = 'imr' and period_label = '2010-2019' and stratifier = 'income_poverty_2013'"


def read_headerless(path) -> dict[str, float]:
    with open(path, encoding="utf-8-sig", newline="") as handle:
        return {code: float(value) for code, value in csv.reader(handle)}


def expected_membership(rows, values):
    """(code -> (ridit, quintile)) by the definition, written independently of the package."""
    ranked = sorted(((-values[c], c, n) for c, n in rows if c in values and (n or 0) > 0))
    total = sum(n for _, _, n in ranked)
    out, before = {}, 0
    for _, code, n in ranked:
        x = (before + n / 2) / total
        out[code] = (x, min(1 + math.floor(5 * x), 5))
        before += n
    return out


# --------------------------------------------------------------------------------------------
# Bundled build
# --------------------------------------------------------------------------------------------


def test_membership_follows_the_definition(bundled_warehouse):
    values = read_headerless(RAW / "covariates" / "income_poverty_2013_rm.csv")
    # Every year of the region's count, with or without a commune rate (Providencia 2018).
    pooled = query(bundled_warehouse, "select area_code, sum(live_births) from marts.fct_area_year_rates "
                                      "where area_level = 'commune' and region_code = '13' and indicator = 'imr' "
                                      "and year between 2010 and 2019 group by area_code")
    expected = expected_membership(pooled, values)
    got = query(bundled_warehouse, f"select commune_code, ridit, quintile, is_ranked from marts.fct_commune_deprivation "
                                   f"where area_level = 'region' and area_code = '13' and {MEASURE_KEYS}")
    assert len(got) == 52 and all(ranked for *_, ranked in got)
    assert {c: q for c, _, q, _ in got} == {c: q for c, (_, q) in expected.items()}
    for code, ridit, _, _ in got:
        assert ridit == pytest.approx(expected[code][0], abs=1e-12)
    assert sorted(q for _, (_, q) in expected.items()).count(5) > 0


def test_quintiles_reconcile_with_the_region_and_the_measures(bundled_warehouse):
    quintiles = query(bundled_warehouse, "select quintile, deaths, live_births, rate_per_1000 from marts.fct_rates_by_quintile "
                                         f"where area_code = '13' and {MEASURE_KEYS} order by quintile")
    region = query(bundled_warehouse, "select deaths, live_births from marts.fct_area_period_rates "
                                      "where area_code = '13' and indicator = 'imr' and period_label = '2010-2019'")[0]
    assert region == (6615, 979124)  # the region's own pooled count (was 6,617 / 977,267 before one rule)
    assert [q for q, *_ in quintiles] == [1, 2, 3, 4, 5]
    assert (sum(d for _, d, _, _ in quintiles), sum(n for _, _, n, _ in quintiles)) == region
    measures = dict(query(bundled_warehouse, "select measure, estimate from marts.fct_inequality "
                                             f"where area_code = '13' and {MEASURE_KEYS}"))
    r1, r5 = quintiles[0][3], quintiles[4][3]
    r_area = 1000 * region[0] / region[1]
    assert measures["D"] == pytest.approx(r1 - r5)
    assert measures["R"] == pytest.approx(r1 / r5)
    assert measures["PAF"] == pytest.approx(100 * (r_area - r5) / r_area)
    assert measures["avoidable_deaths"] == pytest.approx(region[0] - region[1] * r5 / 1000)
    assert measures["RII"] == pytest.approx(math.exp(-measures["gradient_b"]))
    counts = query(bundled_warehouse, "select distinct n_communes, n_communes_without_value, n_communes_without_births "
                                      f"from marts.fct_inequality where area_code = '13' and {MEASURE_KEYS}")
    assert counts == [(52, 0, 0)]


def test_fitted_gradient_is_published_per_commune(bundled_warehouse):
    a, b = (v for _, v in sorted(query(
        bundled_warehouse, "select measure, estimate from marts.fct_inequality "
                           f"where area_code = '13' and {MEASURE_KEYS} and measure like 'gradient_%'")))
    rows = query(bundled_warehouse, "select ridit, fitted_rate_per_1000 from marts.fct_commune_deprivation "
                                    f"where area_code = '13' and {MEASURE_KEYS}")
    for ridit, fitted in rows:
        assert fitted == pytest.approx(1000 * math.exp(a + b * ridit))


def test_single_years_come_from_the_yearly_rates(bundled_warehouse):
    mismatches = query(bundled_warehouse, """
        select count(*) from marts.fct_commune_deprivation as m
        left join marts.fct_area_year_rates as y
            on y.area_level = 'commune' and y.area_code = m.commune_code and y.year = m.period_start
            and y.indicator = m.indicator
        where m.period_kind = 'single_year' and m.period_start = m.period_end
            and (coalesce(y.deaths, 0) is distinct from m.deaths
                 or case when y.rate_per_1000 is null then 0 else y.live_births end is distinct from m.live_births)""")
    assert mismatches == [(0,)]
    # Providencia 2018 has no rate (negative derived count): no published count, but its signed
    # counts are in the region's 2018 count and so in its quintile's, for every indicator of the build.
    assert query(bundled_warehouse, "select indicator, deaths, live_births, unpublished_deaths, "
                                    "unpublished_live_births, is_ranked "
                                    "from marts.fct_commune_deprivation where commune_code = '13123' "
                                    "and period_kind = 'single_year' and period_start = 2018 "
                                    "and stratifier = 'income_poverty_2013' order by indicator") == [
        (indicator, 0, 0, -2, 1857, True) for indicator in sorted(aggregate_indicators())]
    years = query(bundled_warehouse, "select count(distinct period_start) from marts.fct_inequality "
                                     "where period_kind = 'single_year' and measure = 'RII'")
    assert years == [(10,)]


def test_rii_trend_rows_for_every_stratifier_and_period(bundled_warehouse):
    rows = query(bundled_warehouse, "select stratifier, period_label, n_years_used, trend, gap_change "
                                    "from marts.fct_inequality_trends where area_code = '13' and indicator = 'imr'")
    covering_rm = [s for s, regions in stratifier_regions(bundled_warehouse).items() if "13" in regions]
    assert len(covering_rm) >= 2 and len(rows) == len(covering_rm) * 3
    full = [r for r in rows if r[1] == "2010-2019"]
    assert all(n == 10 and trend != "not_estimable" for _, _, n, trend, _ in full)


def test_rii_trend_is_fct_trends_shell_on_the_published_yearly_rii(bundled_warehouse):
    """The mart is fit_series_trends (fct_trends' shell, default vars) on the single-year RII
    that fct_inequality publishes, held to fct_trends' rules (fewer than 20 deaths: no statistics,
    insufficient_data; an increase or decrease the count test does not find: not_confirmed),
    plus the gap columns: the model feeds it the right rows."""
    import pandas as pd

    from infant_mortality.statistics.inequality import classify_gap_change
    from infant_mortality.statistics.trends import fit_series_trends

    keys = ["area_level", "area_code", "indicator", "stratifier"]
    yearly = pd.DataFrame(
        query(bundled_warehouse, "select area_level, area_code, indicator, stratifier, period_start, estimate, note "
                                 "from marts.fct_inequality where measure = 'RII' and period_kind = 'single_year'"),
        columns=[*keys, "year", "rii", "rii_note"])
    periods = pd.DataFrame(query(bundled_warehouse, "select distinct period_start, period_end "
                                                    "from marts.fct_inequality_trends order by all"),
                           columns=["period_start", "period_end"])
    # A year without an RII (a region where it is not estimable) is NULL; the trend note quotes why.
    expected = fit_series_trends(yearly, keys, periods=periods, rate="rii", deaths=None, live_births=None,
                                 reason="rii_note").set_index([*keys, "period_start", "period_end"])
    columns = ["n_years", "n_years_used", "slope_log10", "slope_se", "intercept_log10", "p_value", "rho",
               "iterations", "converged", "apc", "apc_ci95_lower", "apc_ci95_upper", "trend", "note"]
    mart = pd.DataFrame(
        query(bundled_warehouse, f"select {', '.join(keys)}, period_start, period_end, {', '.join(columns)}, "
                                 "fitted_log10_rii_mid, gap_change from marts.fct_inequality_trends"),
        columns=[*keys, "period_start", "period_end", *columns, "fitted_log10_rii_mid", "gap_change"]
    ).set_index([*keys, "period_start", "period_end"])
    held = pd.DataFrame(query(bundled_warehouse, f"select {', '.join(keys)}, period_start, period_end, n_deaths, "
                                                 "count_test_p_value from marts.fct_inequality_trends"),
                        columns=[*keys, "period_start", "period_end", "n_deaths", "count_test_p_value"]
                        ).set_index([*keys, "period_start", "period_end"]).loc[mart.index]
    # Three periods for each series: for each indicator of the build, in each region the stratifiers
    # whose files give it values (the RM all of today's; the others the 2022 ones), in the country
    # those that cover every region.
    coverage = stratifier_regions(bundled_warehouse)
    regions = {r for (r,) in query(bundled_warehouse, "select distinct region_code from marts.fct_commune_vs_region")}
    series = (sum(len(regions & covered) for covered in coverage.values())
              + sum(regions <= covered for covered in coverage.values()))
    assert len(mart) == len(expected) == len(aggregate_indicators()) * series * 3
    expected = expected.loc[mart.index, columns].astype(object)
    thin = (held["n_deaths"] < 20).to_numpy()
    expected.loc[thin, [c for c in columns if c not in ("n_years", "n_years_used", "trend", "note")]] = None
    expected.loc[thin, "trend"] = "insufficient_data"
    unconfirmed = ~thin & expected["trend"].isin(["increasing", "decreasing"]).to_numpy() & ~(
        held["count_test_p_value"].astype(float) < 0.05).to_numpy()
    expected.loc[unconfirmed, "trend"] = "not_confirmed"
    assert unconfirmed.sum() > 0  # (no region of the bundled build is thin: the rule has its unit test)
    # The notes add why (the deaths, or the count test's p); the shell's note begins them.
    assert all(m.startswith(e) for m, e in zip(mart["note"].fillna(""), expected["note"].fillna("")) if e), "note"
    columns = [c for c in columns if c != "note"]
    for c in columns:
        if c in ("trend", "note", "converged", "n_years", "n_years_used", "iterations"):
            assert [None if pd.isna(v) else v for v in mart[c].tolist()] == \
                [None if pd.isna(v) else v for v in expected[c].tolist()], c
        else:
            numbers = [pd.to_numeric(frame[c], errors="coerce").to_numpy(dtype=float) for frame in (mart, expected)]
            assert numbers[0] == pytest.approx(numbers[1], rel=1e-12, abs=1e-12, nan_ok=True), c
    mid = (mart.index.get_level_values("period_start") + mart.index.get_level_values("period_end")) / 2
    fitted = mart["fitted_log10_rii_mid"].astype(float)
    assert fitted.to_numpy() == pytest.approx(
        (mart["intercept_log10"].astype(float) + mart["slope_log10"].astype(float) * mid).to_numpy(),
        rel=1e-12, nan_ok=True)
    # No line, no fitted value: NULL exactly where the trend is not estimable or too thin to fit.
    assert (fitted.isna() == mart["trend"].isin(["not_estimable", "insufficient_data"])).all()
    assert mart["gap_change"].tolist() == [classify_gap_change(t, m) for t, m in
                                           zip(mart["trend"], mart["fitted_log10_rii_mid"])]


def test_benchmark_is_the_lowest_rate_with_twenty_deaths(bundled_warehouse):
    rows = query(bundled_warehouse, """
        with eligible as (
            select indicator, period_start, period_end, commune_code,
                   region_code,
                   row_number() over (partition by region_code, indicator, period_start, period_end
                                      order by rate_per_1000, commune_code) as k
            from marts.fct_commune_vs_region where deaths >= 20)
        select distinct b.benchmark_communes, e.commune_code, b.benchmark_rule
        from marts.fct_commune_vs_benchmark as b
        join eligible as e using (region_code, indicator, period_start, period_end)
        where e.k = 1""")
    assert rows and all(bench == code and rule == "lowest_rate_in_region" for bench, code, rule in rows)


def test_covariate_audit_matches_the_regions_in_the_build(bundled_warehouse):
    # The RM has every value; each other region present lacks the two RM-only stratifiers, and
    # Antartica (12202) is the one commune without a 2022 value.
    # Derived from the staged values: a region with no value of a stratifier is named once; in a
    # region that has values, each commune of the build without one is named.
    communes = dict(query(bundled_warehouse, "select distinct commune_code, region_code from marts.fct_commune_vs_region"))
    regions = set(communes.values())
    valued = stratifier_communes(bundled_warehouse)
    coverage = regions_of(valued)
    expected = sorted(
        [("stratifier_not_available_for_region", f"stratifier={s} region={r}")
         for s, covered in coverage.items() for r in regions - covered]
        + [("covariate_value_missing", f"stratifier={s} commune={c}")
           for s, covered in coverage.items() for c, r in communes.items() if r in covered and c not in valued[s]])
    assert ("covariate_value_missing", "stratifier=income_poverty_2022 commune=12202") in expected  # Antártica
    audit = query(bundled_warehouse, "select check_name, record_key from marts.audit_data_quality "
                                     "where source = 'covariates' order by 1, 2")
    assert audit == sorted(expected)


# --------------------------------------------------------------------------------------------
# Several regions and the country, with a damaged covariate file
# --------------------------------------------------------------------------------------------

REGIONS = THREE_REGIONS
DROPPED, UNPARSEABLE = COVARIATE_DROPPED, COVARIATE_UNPARSEABLE


@pytest.fixture(scope="module")
def national(three_regions):
    """The session's three-region build (conftest): the damaged covariate files, benchmark_communes."""
    return three_regions.path, three_regions.dbt_vars, three_regions.poverty


def test_country_and_regions_are_measured_by_the_2022_stratifiers_only(national):
    path, _, _ = national
    areas = query(path, "select distinct area_level, area_code, stratifier from marts.fct_inequality order by 1, 2, 3")
    coverage = stratifier_regions(path)
    expected = ([("country", "CL", s) for s in sorted(coverage) if set(REGIONS) <= coverage[s]]
                + [("region", r, s) for r in REGIONS for s in sorted(coverage) if r in coverage[s]])
    assert areas == expected and len(expected) >= 2 * (1 + len(REGIONS))
    audit = query(path, "select record_key, affects_results from marts.audit_data_quality "
                        "where check_name = 'stratifier_not_available_for_region' order by 1")
    assert audit == sorted((f"stratifier={s} region={r}", False)
                           for s, covered in coverage.items() for r in REGIONS if r not in covered)


def test_communes_without_a_value_are_counted_and_audited(national):
    path, _, poverty = national
    with open(poverty, encoding="utf-8", newline="") as handle:
        usable = {(row["codigo_comuna"], row["dimension"]) for row in csv.DictReader(handle)
                  if row["tasa"].replace(".", "", 1).isdigit()}
    births = dict(query(path, "select commune_code, live_births from marts.fct_commune_vs_region "
                              "where indicator = 'imr' and period_label = '2015-2019'"))
    for stratifier, dimension in (("income_poverty_2022", "ingresos"),
                                  ("multidimensional_poverty_2022", "multidimensional")):
        without = {c for c, n in births.items() if n and (c, dimension) not in usable}
        with_births = {c for c, n in births.items() if n}
        for level, code, communes in [("country", "CL", births)] + [
                ("region", r, [c for c in births if c.startswith(r)]) for r in REGIONS]:
            row = query(path, "select n_communes, n_communes_without_value, n_communes_without_births "
                              "from marts.fct_inequality where indicator = 'imr' and period_label = '2015-2019' "
                              "and measure = 'RII' and area_level = ? and area_code = ? and stratifier = ?",
                        [level, code, stratifier])
            expect_without = len(without & set(communes))
            expect_no_births = len(set(communes) - with_births)
            assert row == [(len(set(communes)) - expect_without - expect_no_births, expect_without, expect_no_births)]
        assert (DROPPED in without) == (stratifier == "income_poverty_2022")
        assert (UNPARSEABLE in without) == (stratifier == "multidimensional_poverty_2022")
    with open(poverty, encoding="utf-8", newline="") as handle:
        bad_line = next(i for i, row in enumerate(csv.reader(handle), start=1) if row[5] == "n/d")
    audit = query(path, "select check_name, commune_code, source_file, source_line from marts.audit_data_quality "
                        "where source = 'covariates' and check_name <> 'stratifier_not_available_for_region'")
    assert ("covariate_value_not_numeric", UNPARSEABLE, "poverty_2022_communes.csv", bad_line) in audit
    assert ("covariate_value_missing", DROPPED, None, None) in audit
    assert ("covariate_value_missing", UNPARSEABLE, None, None) in audit


def test_country_ranks_every_commune_of_the_three_regions(national):
    path, _, poverty = national
    with open(poverty, encoding="utf-8", newline="") as handle:
        values = {row["codigo_comuna"]: float(row["tasa"]) for row in csv.DictReader(handle)
                  if row["dimension"] == "ingresos"}
    pooled = query(path, "select commune_code, live_births from marts.fct_commune_vs_region "
                         "where indicator = 'pnmr' and period_label = '2015-2019'")
    expected = expected_membership(pooled, values)
    got = query(path, "select commune_code, ridit, quintile from marts.fct_commune_deprivation "
                      "where area_level = 'country' and indicator = 'pnmr' and period_label = '2015-2019' "
                      "and stratifier = 'income_poverty_2022' and is_ranked")
    assert {c[:2] for c, _, _ in got} == set(REGIONS)
    assert {c: q for c, _, q in got} == {c: q for c, (_, q) in expected.items()}
    totals = query(path, "select sum(deaths), sum(live_births) from marts.fct_rates_by_quintile "
                         "where area_level = 'country' and indicator = 'pnmr' and period_label = '2015-2019' "
                         "and stratifier = 'income_poverty_2022'")
    measured = query(path, "select distinct deaths, live_births from marts.fct_inequality "
                           "where area_level = 'country' and indicator = 'pnmr' and period_label = '2015-2019' "
                           "and stratifier = 'income_poverty_2022'")
    assert totals == measured


def test_listed_benchmark_applies_to_every_region(national):
    path, _, _ = national
    rows = query(path, "select distinct region_code, benchmark_rule, benchmark_communes "
                       "from marts.fct_commune_vs_benchmark order by 1")
    assert rows == [(r, "listed_communes", "12101") for r in REGIONS]
    assert query(path, "select bool_and(is_benchmark = (commune_code = '12101')) "
                       "from marts.fct_commune_vs_benchmark") == [(True,)]


@pytest.mark.e2e  # fault injection
def test_a_bad_benchmark_var_stops_the_build_naming_the_var(national, tmp_path):
    # Every rejected form is unit-tested (test_inequality.py); this checks that the var reaches
    # the model through its YAML config and that dbt reports the message.
    built, dbt_vars, _ = national
    path = tmp_path / "copy.duckdb"   # the session's build stays as it was built
    shutil.copyfile(built, path)
    result = run_dbt(["run", "-s", "int_commune_vs_benchmark"], path,
                     {**dbt_vars, "benchmark_min_deaths": 0}, check=False)
    assert result.returncode != 0
    assert "dbt var benchmark_min_deaths must be a whole number >= 1, got 0" in result.stdout
