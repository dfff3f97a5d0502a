"""Trend of log10(yearly rate) per area, indicator and analysis period (read, call, return).

The statistics live in `infant_mortality.trends` (the shell) and
`infant_mortality.trend_fitters` (the method, var `trend_method`), tested with pytest. This
model passes the configuration declared in `_int_trends__models.yml` (project vars `trend_*`,
which a Python model cannot read directly) and returns the frame; the mart `fct_trends`
publishes it with a contract.
"""

from infant_mortality.trends import fit_trends
from infant_mortality.model_inputs import ordered_frame


def model(dbt, session):
    dbt.config(materialized="table")

    rates = ordered_frame(dbt.ref("fct_rates_commune_year"))
    periods = ordered_frame(dbt.ref("int_analysis_periods"))

    trends = fit_trends(
        rates,
        periods,
        min_years=int(dbt.config.get("trend_min_years")),
        zero_rate_policy=str(dbt.config.get("trend_zero_rate_policy")),
        p_threshold=float(dbt.config.get("trend_p_threshold")),
        ci_level=float(dbt.config.get("trend_ci_level")),
        ci_critical=str(dbt.config.get("trend_ci_critical")),
        method=str(dbt.config.get("trend_method")),
        rhotype=str(dbt.config.get("trend_rhotype")),
        gaps=str(dbt.config.get("trend_gaps")),
    )
    print(
        f"int_trends: {trends.attrs['n_series']} series "
        f"({trends.attrs['n_fitted']} fitted by {trends.attrs['method_label']}), "
        f"statistics {trends.attrs['fit_seconds']:.3f} s"
    )
    return trends
