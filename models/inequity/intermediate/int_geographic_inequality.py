"""Between-commune inequality per region and the country, year and analysis period, on the crude
rates (HEAT's BGV and index of disparity) and net of Poisson noise (the true-rate variance of the
Poisson-gamma model, with a parametric bootstrap interval and its trend over the years); docs/methods/inequity.md,
"Geographic inequality net of chance". The rules are `infant_mortality.statistics.geographic_inequality` (tested with pytest);
replicates (vars `inequality_bootstrap_replicates`, `inequality_bootstrap_replicates_yearly`),
the deaths floor of an interval (`inequality_min_deaths`) and the trend settings come through the
YAML `config:`. The communes of an area enter over the years in which the area's own rate is
available and theirs is published, with births > 0 (core's int_area_commune_years, the one
availability rule of every aggregate of communes: an area-year without a rate has no row, and a
period pools the years fct_area_period_rates pools)."""

from infant_mortality.dbt_plugins.model_inputs import ordered_frame
from infant_mortality.dbt_plugins.model_outputs import typed_frame
from infant_mortality.statistics.geographic_inequality import geographic_inequality


def model(dbt, session):
    dbt.config(materialized="table")
    members = ordered_frame(dbt.ref("int_area_commune_years"))
    periods = ordered_frame(dbt.ref("int_analysis_periods"))
    # In commune order within each area and span, as the statistics expect their input ordered.
    columns = ["area_level", "area_code", "region_code", "commune_code", "indicator", "multiplier", "year",
               "deaths", "live_births"]
    yearly = members[members["area_is_available"].astype(bool) & members["is_published"].astype(bool)
                     & (members["live_births"] > 0)][columns]
    yearly = yearly.sort_values(["commune_code", "year"], kind="stable", ignore_index=True)
    spans = yearly.merge(periods[["period_start", "period_end"]], how="cross")
    spans = spans[(spans["year"] >= spans["period_start"]) & (spans["year"] <= spans["period_end"])]
    pooled = (spans.groupby(["area_level", "area_code", "region_code", "commune_code", "indicator", "multiplier",
                             "period_start", "period_end"], sort=True, as_index=False)[["deaths", "live_births"]].sum())
    pooled = pooled.sort_values(["commune_code", "period_start", "period_end"], kind="stable", ignore_index=True)
    return typed_frame(geographic_inequality(
        yearly, pooled,
        replicates=int(dbt.config.get("inequality_bootstrap_replicates")),
        yearly_replicates=int(dbt.config.get("inequality_bootstrap_replicates_yearly")),
        min_deaths=int(dbt.config.get("inequality_min_deaths")),
        min_years=int(dbt.config.get("trend_min_years")),
        p_threshold=float(dbt.config.get("trend_p_threshold")),
    ))
