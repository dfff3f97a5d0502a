"""Is the gap closing? Prais-Winsten trend of the yearly log10(RII) per area, indicator,
stratifier and analysis period (`infant_mortality.inequality.gap_trends`, which calls
`prais_winsten.prais_winsten_trend`). The trend options are fct_trends' (vars `trend_*`),
passed through the YAML `config:` because a Python model cannot read project vars."""

from infant_mortality.inequality import gap_trends


def model(dbt, session):
    dbt.config(materialized="table")
    measures = dbt.ref("int_inequality__measures").df()
    periods = dbt.ref("int_analysis_periods").df()
    # Single years; a one-year custom period is a single year too (it is not repeated).
    yearly = measures[(measures["period_start"] == measures["period_end"]) & (measures["measure"] == "RII")]
    yearly = yearly.assign(year=yearly["period_start"], rii=yearly["estimate"])
    return gap_trends(
        yearly,
        periods,
        min_years=int(dbt.config.get("trend_min_years")),
        p_threshold=float(dbt.config.get("trend_p_threshold")),
        ci_level=float(dbt.config.get("trend_ci_level")),
        ci_critical=str(dbt.config.get("trend_ci_critical")),
        method=str(dbt.config.get("trend_method")),
        rhotype=str(dbt.config.get("trend_rhotype")),
        gaps=str(dbt.config.get("trend_gaps")),
    )
