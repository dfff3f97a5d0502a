"""The study's abstract results (González, Alfaro & Horna-Campos 2020) checked by the build (issue 42).

marts.fct_study_findings lists every statement of seeds/study_findings.csv with its status. On
the bundled data (2010-2019, INE aggregates: no post-neonatal count) the `imr` statements are
checked over the overlap 2010-2014, with 2005-2009 named as years without deaths, and the `pnmr`
ones are not computable. The computed rates, rate ratios, ranks and verdicts are recomputed here
with pandas from fct_area_year_rates alone. A second build (generated RM deaths 2005-2019 with
the bundled births 2001-2016, `custom_period` 2005-2014) computes every statement over the study's
own period.
"""

from __future__ import annotations

import csv

import duckdb
import pandas as pd
import pytest
from scipy.stats import chi2

from conftest import REPO_ROOT, query, run_dbt

SEED = REPO_ROOT / "seeds" / "study_findings.csv"
STUDY_YEARS = range(2005, 2015)


def seed_rows() -> list[dict]:
    with SEED.open(encoding="utf-8") as f:
        return list(csv.DictReader(f))


def mart(path) -> pd.DataFrame:
    with duckdb.connect(str(path), read_only=True) as con:
        return con.sql("select * from marts.fct_study_findings order by finding_id").df()


def yearly(path) -> pd.DataFrame:
    with duckdb.connect(str(path), read_only=True) as con:
        return con.sql("""
            select area_level, area_code, area_name, region_code, year, indicator, deaths, live_births, rate_per_1000
            from marts.fct_area_year_rates""").df()


def pooled(rates: pd.DataFrame, indicator: str, start: int, end: int) -> pd.DataFrame:
    """Each RM commune's pooled rate and its rate ratio to the whole region over the years the
    commune has a rate (the region summed over the same years), the paper's definitions."""
    years = rates[rates.year.between(start, end) & (rates.indicator == indicator)]
    communes = years[(years.area_level == "commune") & (years.region_code == "13") & years.rate_per_1000.notna()]
    region = years[(years.area_level == "region") & (years.area_code == "13")].set_index("year")
    rows = []
    for code, group in communes.groupby("area_code"):
        d, n = group.deaths.sum(), group.live_births.sum()
        big_d, big_n = region.loc[group.year, "deaths"].sum(), region.loc[group.year, "live_births"].sum()
        rate = 1000 * d / n
        rows.append({"code": code, "name": group.area_name.iloc[0], "deaths": d, "rate": rate,
                     "lower": 1000 * chi2.ppf(0.025, 2 * d) / 2 / n if d else 0.0,
                     "upper": 1000 * chi2.ppf(0.975, 2 * (d + 1)) / 2 / n,
                     "ratio": rate / (1000 * big_d / big_n), "region_deaths": big_d})
    return pd.DataFrame(rows).set_index("code")


@pytest.fixture(scope="module")
def bundled(tmp_path_factory):
    path = tmp_path_factory.mktemp("study_findings") / "bundled.duckdb"
    run_dbt(["build", "--indirect-selection", "cautious", "--select", "+fct_study_findings"], path)
    return path


def test_every_statement_of_the_abstract_is_listed_with_its_status(bundled):
    findings = mart(bundled)
    seed = seed_rows()
    assert len(seed) == 24  # 2 highest, 2 ratios, 2 lowest, 7 TMI trends, 11 TMIT trends
    assert findings.finding_id.tolist() == [int(r["finding_id"]) for r in seed]
    assert findings.statement_en.tolist() == [r["statement_en"] for r in seed]
    assert findings.statement_es.notna().all() and findings.citation.str.contains("34-44").all()
    assert sorted(findings[findings.finding_kind == "trend"].commune_name[findings.indicator == "pnmr"]) == sorted(
        ["Peñalolén", "Puente Alto", "Las Condes", "Providencia", "San Bernardo", "Macul", "Pudahuel", "Talagante",
         "Pedro Aguirre Cerda", "Quilicura", "Peñaflor"])

    # TMIT: the INE aggregates hold no post-neonatal count.
    pnmr = findings[findings.indicator == "pnmr"]
    assert len(pnmr) == 14
    assert set(pnmr.status) == {"not_computable"} and set(pnmr.not_computable_reason) == {"indicator_not_in_build"}
    assert set(pnmr.period_coverage) == {"none"} and pnmr.warehouse_value.isna().all()
    assert set(pnmr.missing_years_reason) == {"2005-2009: deaths_not_in_input; 2010-2014: indicator_not_in_build"}

    # TMI: the overlap with the bundled years, named as such; 2005-2009 have no deaths in the input.
    imr = findings[findings.indicator == "imr"]
    assert len(imr) == 10
    assert set(imr.period_label) == {"2010-2014"} and set(imr.period_coverage) == {"overlap"}
    assert set(imr.missing_years) == {"2005-2009"}
    assert set(imr.missing_years_reason) == {"2005-2009: deaths_not_in_input"}
    assert set(imr.status) <= {"holds", "does_not_hold", "not_computable"}
    assert set(imr.not_computable_reason.dropna()) <= {"trend_not_estimable"}


def test_computed_rates_ratios_and_ranks_match_pandas_on_fct_area_year_rates(bundled):
    findings = mart(bundled).set_index("finding_id")
    table = pooled(yearly(bundled), "imr", 2010, 2014)
    assert len(table) == 52
    highest, lowest = table.rate.idxmax(), table.rate.idxmin()

    independencia = table.loc["13108"]
    row = findings.loc[1]  # highest TMI: Independencia, 12.7
    assert row.warehouse_commune_code == highest == "13108"
    assert row.warehouse_value == pytest.approx(independencia.rate, rel=1e-12)
    assert row.warehouse_value == pytest.approx(12.745, abs=1e-3)
    assert (row.warehouse_ci95_lower, row.warehouse_ci95_upper) == pytest.approx(
        (independencia.lower, independencia.upper), rel=1e-9)
    assert row.value_within_interval and row.status == "holds"

    row = findings.loc[3]  # Independencia's TMI is 1.75 times the region's
    assert row.warehouse_value == pytest.approx(independencia.ratio, rel=1e-12)
    assert row.warehouse_value == pytest.approx(1.795, abs=1e-3)
    assert row.warehouse_ci95_lower < 1.75 < row.warehouse_ci95_upper and row.status == "holds"

    row = findings.loc[5]  # lowest TMI: Las Condes
    assert row.warehouse_commune_code == lowest
    assert row.warehouse_value == pytest.approx(table.loc["13114"].rate, rel=1e-12)
    assert row.commune_rank == int(table.rate.rank(ascending=False, method="first").loc["13114"])
    assert row.status == ("holds" if lowest == "13114" else "does_not_hold")


def test_trend_verdicts_follow_the_prais_winsten_rows_and_the_studys_rule(bundled):
    findings = mart(bundled)
    trends = pd.DataFrame(query(bundled, """
        select area_code, method, apc, p_value, slope_log10, trend from marts.fct_trends
        where area_level = 'commune' and indicator = 'imr' and period_start = 2010 and period_end = 2014"""),
        columns=["code", "method", "apc", "p_value", "slope", "trend"]).set_index(["code", "method"])
    import yaml

    headline = yaml.safe_load((REPO_ROOT / "dbt_project.yml").read_text())["vars"]["trend_method"]  # the default
    for row in findings[(findings.finding_kind == "trend") & (findings.indicator == "imr")].itertuples():
        prais = trends.loc[(row.commune_code, "prais_winsten")]
        assert row.headline_method == headline
        assert row.headline_trend == trends.loc[(row.commune_code, headline)].trend
        assert row.prais_trend == prais.trend
        if pd.isna(prais.p_value):
            assert row.status == "not_computable" and row.not_computable_reason == "trend_not_estimable"
            continue
        direction = ("stationary" if prais.p_value >= 0.05 else "increasing" if prais.slope > 0 else "decreasing")
        assert row.prais_direction == direction
        assert row.warehouse_value == pytest.approx(prais.apc, rel=1e-12)
        assert row.status == ("holds" if direction == row.study_trend else "does_not_hold")


@pytest.fixture(scope="module")
def study_years(rm_study_period):
    """Generated RM deaths 2005-2019 (synthetic) with the bundled births 2001-2016 and the study's
    period as custom_period: every statement over 2005-2014 itself (the session's build, shared
    with test_study_births.py)."""
    return rm_study_period


def test_with_deaths_2005_2019_every_statement_is_computed_over_the_study_period(study_years):
    findings = mart(study_years).set_index("finding_id")
    assert len(findings) == 24
    assert set(findings.period_label) == {"2005-2014"} and set(findings.period_coverage) == {"study_period"}
    assert findings.missing_years.isna().all() and findings.missing_years_reason.isna().all()
    # Only a Prais-Winsten fit the trend rules refuse (|rho| near 1) may leave a statement unchecked.
    assert set(findings.not_computable_reason.dropna()) <= {"trend_not_estimable"}
    rates = [k for k in ("highest_rate", "lowest_rate", "rate_ratio")]
    assert (findings[findings.finding_kind.isin(rates)].status != "not_computable").all()
    for indicator, highest_id, ratio_id, lowest_id in (("imr", 1, 3, 5), ("pnmr", 2, 4, 6)):
        table = pooled(yearly(study_years), indicator, 2005, 2014)
        assert len(table) == 52
        assert findings.loc[highest_id].warehouse_commune_code == table.rate.idxmax()
        assert findings.loc[lowest_id].warehouse_commune_code == table.rate.idxmin()
        assert findings.loc[highest_id].warehouse_value == pytest.approx(table.loc["13108"].rate, rel=1e-12)
        assert findings.loc[ratio_id].warehouse_value == pytest.approx(table.loc["13108"].ratio, rel=1e-12)
