"""Between-commune inequality per region and the country, year and analysis period, on the crude
rates (HEAT's BGV and index of disparity) and net of Poisson noise (the true-rate variance of the
Poisson-gamma model, with a parametric bootstrap interval and its trend over the years); docs/methods.md
section 11. The rules are `infant_mortality.statistics.geographic_inequality` (tested with pytest);
replicates (var `inequality_bootstrap_replicates`) and the trend settings come through the YAML
`config:`. Communes enter over the years their rate is published (fct_area_year_rates; pooled
over a period as in fct_area_period_rates), with births > 0."""

from infant_mortality.dbt_plugins.model_inputs import ordered_frame
from infant_mortality.statistics.geographic_inequality import geographic_inequality


def model(dbt, session):
    dbt.config(materialized="table")
    multipliers = ordered_frame(dbt.ref("dim_indicator"))[["indicator", "multiplier"]]
    yearly = ordered_frame(dbt.ref("fct_area_year_rates")).merge(multipliers, on="indicator")
    yearly = yearly[(yearly["area_level"] == "commune") & yearly["rate_per_1000"].notna() & (yearly["live_births"] > 0)]
    pooled = ordered_frame(dbt.ref("int_period_pooled_counts"))
    pooled = pooled[(pooled["pool"] == "area_years") & (pooled["area_level"] == "commune")
                    & pooled["rate_per_1000"].notna() & (pooled["live_births"] > 0)]
    return geographic_inequality(
        yearly, pooled,
        replicates=int(dbt.config.get("inequality_bootstrap_replicates")),
        min_years=int(dbt.config.get("trend_min_years")),
        p_threshold=float(dbt.config.get("trend_p_threshold")),
    )
