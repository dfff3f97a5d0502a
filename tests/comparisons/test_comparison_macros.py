"""The comparison arithmetic has one home, macros/comparisons.sql, which fct_commune_vs_region
and fct_commune_vs_benchmark both call. Checked here twice: the macros on hand vectors (run
through the real dbt CLI, `dbt show --inline`), and the benchmark mart recomputed row by row
from its own counts with the textbook formulas."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from scipy import stats

from conftest import aggregate_indicators, indicator_multipliers, query, run_dbt

Z = float(stats.norm.ppf(0.975))

# (deaths, births, reference deaths, reference births, nested): a commune against the lowest-rate
# commune of its region (10 vs 4 per 1000), and a commune inside a listed pool of two
# (30 / 6000 against 35 / 8000, the pool holding the commune).
VECTORS = [(50, 5000, 24, 6000, False), (30, 6000, 35, 8000, True)]

MACROS_SQL = """
with v (k, d, n, db, nb, nested) as (values {rows})
select
    k,
    {{{{ log_rate_ratio_se('d', 'db', 'nested') }}}} as log_se,
    {{{{ log_scale_limit('lower', '(d / n) / (db / nb)', log_rate_ratio_se('d', 'db', 'nested')) }}}} as rt_lower,
    {{{{ log_scale_limit('upper', '(d / n) / (db / nb)', log_rate_ratio_se('d', 'db', 'nested')) }}}} as rt_upper,
    {{{{ excess_rate_se('d', 'n', 'db', 'nb', 'nested', '1000') }}}} as rap_se,
    {{{{ excess_rate_se('d', 'n', 'db', 'nb', 'nested', '100000') }}}} as rap_se_per_100000,
    {{{{ attributable_percent('1000.0 * d / n', '1000.0 * db / nb') }}}} as rap_percent,
    {{{{ expected_deaths('n', '1000.0 * db / nb', '1000') }}}} as expected
from v
order by k
"""


@pytest.fixture(scope="module")
def macro_rows(tmp_path_factory):
    rows = ", ".join(f"({k}, {d}.0, {n}.0, {db}.0, {nb}.0, {str(nested).lower()})"
                     for k, (d, n, db, nb, nested) in enumerate(VECTORS))
    path = tmp_path_factory.mktemp("macros") / "macros.duckdb"
    result = run_dbt(["show", "--output", "json", "--log-format", "json", "--inline",
                      MACROS_SQL.format(rows=rows)], path)
    for line in result.stdout.splitlines():
        event = json.loads(line)
        if "preview" in event.get("data", {}):
            return json.loads(event["data"]["preview"])
    raise AssertionError(f"dbt show printed no rows:\n{result.stdout[-3000:]}")


def test_rate_ratio_interval_on_the_log_scale(macro_rows):
    independent, nested = macro_rows
    se = math.sqrt(1 / 50 + 1 / 24)
    assert independent["log_se"] == pytest.approx(se, rel=1e-12)
    assert independent["rt_lower"] == pytest.approx(2.5 * math.exp(-Z * se), rel=1e-12)
    assert independent["rt_upper"] == pytest.approx(2.5 * math.exp(Z * se), rel=1e-12)
    # Nested: the pool holds the commune, so its deaths are subtracted (1/30 - 1/35).
    se = math.sqrt(1 / 30 - 1 / 35)
    assert nested["log_se"] == pytest.approx(se, rel=1e-12)
    assert nested["rt_upper"] == pytest.approx(5 / 4.375 * math.exp(Z * se), rel=1e-12)


def test_excess_rate_interval_and_attributable_percent(macro_rows):
    independent, nested = macro_rows
    assert independent["rap_se"] == pytest.approx(1000 * math.sqrt(50 / 5000**2 + 24 / 6000**2), rel=1e-12)
    assert nested["rap_se"] == pytest.approx(
        1000 * math.sqrt(30 / 6000**2 + 35 / 8000**2 - 2 * 30 / (6000 * 8000)), rel=1e-12)
    # The multiplier scales the rates' standard error, nothing else.
    assert independent["rap_se_per_100000"] == pytest.approx(100 * independent["rap_se"], rel=1e-12)
    assert independent["rap_percent"] == pytest.approx(60.0)     # 100 (10 - 4) / 10
    assert independent["expected"] == pytest.approx(20.0)        # 5000 births at 4 per 1000
    assert nested["rap_percent"] == pytest.approx(100 * (5 - 4.375) / 5)


def test_benchmark_mart_equals_the_formulas_on_its_own_counts(bundled_warehouse):
    columns = ["deaths", "live_births", "benchmark_deaths", "benchmark_live_births", "is_benchmark",
               "rate_ratio", "rate_ratio_ci95_lower", "rate_ratio_ci95_upper", "excess_rate_per_1000",
               "excess_rate_ci95_lower", "excess_rate_ci95_upper", "attributable_percent",
               "attributable_percent_ci95_lower", "excess_deaths", "excess_deaths_ci95_upper"]
    rows = query(bundled_warehouse, f"select indicator, {', '.join(columns)} from marts.fct_commune_vs_benchmark "
                                    "where benchmark_live_births > 0 and live_births > 0 and deaths > 0")
    indicators = [r[0] for r in rows]
    assert all(indicators.count(indicator) > 900 for indicator in aggregate_indicators())
    m = {c: np.array([r[i + 1] for r in rows], dtype=float) for i, c in enumerate(columns)}
    d, n, db, nb = m["deaths"], m["live_births"], m["benchmark_deaths"], m["benchmark_live_births"]
    nested = m["is_benchmark"] == 1
    # Each rate on its indicator's scale (seeds/indicators.csv: per 1000, per 100,000, ...).
    k = np.array([indicator_multipliers()[indicator] for indicator in indicators], dtype=float)
    r, rb = k * d / n, k * db / nb
    rt = r / rb
    se_log = np.sqrt(1 / d + np.where(nested, -1, 1) / db)
    se_rap = k * np.sqrt(d / n**2 + db / nb**2 - np.where(nested, 2 * d / (n * nb), 0))
    np.testing.assert_allclose(m["rate_ratio"], rt, rtol=1e-12)
    np.testing.assert_allclose(m["rate_ratio_ci95_lower"], rt * np.exp(-Z * se_log), rtol=1e-12)
    np.testing.assert_allclose(m["rate_ratio_ci95_upper"], rt * np.exp(Z * se_log), rtol=1e-12)
    np.testing.assert_allclose(m["excess_rate_per_1000"], r - rb, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(m["excess_rate_ci95_lower"], r - rb - Z * se_rap, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(m["excess_rate_ci95_upper"], r - rb + Z * se_rap, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(m["attributable_percent"], 100 * (r - rb) / r, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(m["attributable_percent_ci95_lower"], 100 * (1 - 1 / (rt * np.exp(-Z * se_log))),
                               rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(m["excess_deaths"], d - n * rb / k, rtol=1e-12, atol=1e-9)
    np.testing.assert_allclose(m["excess_deaths_ci95_upper"], (r - rb + Z * se_rap) * n / k, rtol=1e-12, atol=1e-9)
    # The benchmark against itself: RT 1 with no uncertainty.
    assert nested.any() and np.allclose(m["rate_ratio_ci95_lower"][nested], 1.0)
