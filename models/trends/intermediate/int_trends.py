"""Trend of log10(yearly rate) per area, indicator and analysis period (read, call, return).

The statistics live in `infant_mortality.statistics.trends` (the shell) and
`infant_mortality.statistics.trend_fitters` (the method, var `trend_method`), tested with pytest. This
model passes the config mapping `trend_settings` declared in `_trend_settings.yml` beside it (the
project vars `trend_*`, which a Python model cannot read directly) and returns the frame; the mart `fct_trends`
publishes it with a contract.
"""

from infant_mortality.dbt_plugins.model_inputs import ordered_frame
from infant_mortality.dbt_plugins.model_outputs import typed_frame
from infant_mortality.statistics.trends import fit_trends, trend_settings


def model(dbt, session):
    dbt.config(materialized="table")

    # Each rate with its indicator's multiplier (the count fitters' intercept is on its scale).
    multipliers = ordered_frame(dbt.ref("dim_indicator"))[["indicator", "multiplier"]]
    rates = ordered_frame(dbt.ref("fct_area_year_rates")).merge(multipliers, on="indicator", how="left")
    periods = ordered_frame(dbt.ref("int_analysis_periods"))

    trends = fit_trends(rates, periods, **trend_settings(dbt.config.get("trend_settings")))
    print(
        f"int_trends: {trends.attrs['n_series']} series "
        f"({trends.attrs['n_fitted']} fitted by {trends.attrs['method_label']}), "
        f"statistics {trends.attrs['fit_seconds']:.3f} s"
    )
    return typed_frame(trends)
