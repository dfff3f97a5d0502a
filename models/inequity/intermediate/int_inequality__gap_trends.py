"""Is the gap closing? Trend of the yearly log10(RII) per area, indicator, stratifier and
analysis period (`infant_mortality.statistics.inequality.gap_trends`: fct_trends' shell
`infant_mortality.statistics.trends.fit_series_trends` with the RII as the rate, plus the gap's own
`gap_change`). The trend vars `trend_*` arrive as the one config mapping `trend_settings` that
int_trends also reads (declared once, models/trends/intermediate/_trend_settings.yml), so the two
trend marts cannot be configured differently."""

from infant_mortality.dbt_plugins.model_inputs import ordered_frame
from infant_mortality.dbt_plugins.model_outputs import typed_frame
from infant_mortality.statistics.inequality import gap_trends, gradient_change_tests
from infant_mortality.statistics.trends import trend_settings


def model(dbt, session):
    dbt.config(materialized="table")
    measures = ordered_frame(dbt.ref("int_inequality__measures"))
    periods = ordered_frame(dbt.ref("int_analysis_periods"))
    # Single years; a one-year custom period is a single year too (it is not repeated).
    yearly = measures[(measures["period_start"] == measures["period_end"]) & (measures["measure"] == "RII")]
    # A year whose RII is not estimable has a NULL rate; the measure's note says why.
    yearly = yearly.assign(year=yearly["period_start"], rii=yearly["estimate"], rii_note=yearly["note"])
    # The count model of the gradient's change over each window, from the ranked commune-years:
    # it confirms the log RII's class and carries the deaths rule, as the count model does for
    # fct_trends.
    membership = ordered_frame(dbt.ref("int_inequality__membership"))
    trends = gap_trends(
        yearly,
        periods,
        reason="rii_note",
        change_tests=gradient_change_tests(membership, periods),
        **trend_settings(dbt.config.get("trend_settings")),
    )
    print(
        f"int_inequality__gap_trends: {trends.attrs['n_series']} series "
        f"({trends.attrs['n_fitted']} fitted by {trends.attrs['method_label']}), "
        f"statistics {trends.attrs['fit_seconds']:.3f} s"
    )
    return typed_frame(trends)
