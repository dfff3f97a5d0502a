"""fct_commune_screening against its two inputs joined by hand and the rule as a lookup table."""

from conftest import query

CLASSES = ("increasing", "decreasing", "stationary")
# (comparison, trend) -> category: docs/methods/screening.md, written out pair by pair.
RULE = {
    ("higher", "increasing"): "worse_and_worsening", ("higher", "stationary"): "worse",
    ("higher", "decreasing"): "worse", ("similar", "increasing"): "worsening",
    ("similar", "stationary"): "similar_no_trend", ("similar", "decreasing"): "improving",
    ("lower", "increasing"): "better", ("lower", "stationary"): "better",
    ("lower", "decreasing"): "better_and_improving",
}


def test_every_commune_period_and_method_is_screened_by_the_rule(bundled_warehouse):
    comparisons = {
        (c, i, s, e): comparison
        for c, i, s, e, comparison in query(bundled_warehouse, "select commune_code, indicator, period_start, "
                                            "period_end, comparison from marts.fct_commune_vs_region")
    }
    trends = query(bundled_warehouse, "select area_code, indicator, period_start, period_end, method, trend "
                   "from marts.fct_trends where area_level = 'commune'")
    expected = {}
    for code, indicator, start, end, method, trend in trends:
        comparison = comparisons[(code, indicator, start, end)]
        expected[(code, indicator, start, end, method)] = RULE.get((comparison, trend), "not_classifiable")
    got = {tuple(r[:5]): r[5] for r in query(
        bundled_warehouse, "select commune_code, indicator, period_start, period_end, method, screening_category "
        "from marts.fct_commune_screening")}
    assert got == expected
    assert {m for *_, m in got} == {m for *_, m, _ in trends}  # both methods screened
    assert "not_classifiable" in got.values() and "worse" in got.values()
