"""Prais-Winsten trends of log10(yearly rate) per area, indicator and analysis period.

The statistics live in `infant_mortality.trends` (tested with pytest); this model only reads
the inputs, passes the configuration declared in `_trends__models.yml` (project vars
`trend_*`, which a Python model cannot read directly) and returns the frame.
"""

from infant_mortality.trends import fit_trends


def model(dbt, session):
    dbt.config(materialized="table")

    min_years = int(dbt.config.get("trend_min_years"))
    zero_rate_policy = str(dbt.config.get("trend_zero_rate_policy"))
    p_threshold = float(dbt.config.get("trend_p_threshold"))
    ci_level = float(dbt.config.get("trend_ci_level"))
    ci_critical = str(dbt.config.get("trend_ci_critical"))
    rhotype = str(dbt.config.get("trend_rhotype"))
    method = str(dbt.config.get("trend_method"))
    gaps = str(dbt.config.get("trend_gaps"))

    rates = dbt.ref("fct_rates_commune_year").df()
    periods = dbt.ref("int_analysis_periods").df()

    trends = fit_trends(
        rates,
        periods,
        min_years=min_years,
        zero_rate_policy=zero_rate_policy,
        p_threshold=p_threshold,
        ci_level=ci_level,
        ci_critical=ci_critical,
        rhotype=rhotype,
        method=method,
        gaps=gaps,
    )
    print(
        f"fct_trends: {trends.attrs['n_series']} series "
        f"({trends.attrs['n_fitted']} fitted by Prais-Winsten), "
        f"statistics {trends.attrs['fit_seconds']:.3f} s"
    )
    return trends
