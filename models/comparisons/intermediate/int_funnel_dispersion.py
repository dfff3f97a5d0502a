"""Over-dispersion of each region's communes per indicator and analysis period: Spiegelhalter's
dispersion ratio phi and between-commune variance tau^2 (docs/methods/comparisons.md, "Funnel limits that allow for over-dispersion"), which widen
the adjusted funnel limits of `int_funnel_limits` and give `fct_commune_vs_region` its
`funnel_category_adjusted`. The rule is `infant_mortality.statistics.overdispersion.region_dispersion`
(tested with pytest); the winsorising fraction is var `funnel_winsor_trim` (through the YAML
`config:`). The communes and expected deaths are those of `fct_commune_vs_region`: the pool
`commune_years` of `int_period_pooled_counts`, expected = births x the region's pooled rate."""

from infant_mortality.dbt_plugins.model_inputs import ordered_frame
from infant_mortality.dbt_plugins.model_outputs import typed_frame
from infant_mortality.statistics.overdispersion import region_dispersion

KEYS = ["pool_key", "indicator", "period_start", "period_end"]


def model(dbt, session):
    dbt.config(materialized="table")
    trim = float(dbt.config.get("funnel_winsor_trim"))
    pooled = ordered_frame(dbt.ref("int_period_pooled_counts"))
    pooled = pooled[pooled["pool"] == "commune_years"]
    communes = pooled[pooled["area_level"] == "commune"]
    regions = pooled[pooled["area_level"] == "region"][KEYS + ["deaths", "live_births"]]
    paired = communes.merge(regions, on=KEYS, suffixes=("", "_region"))
    paired = paired[paired["live_births"] > 0]
    paired["expected_deaths"] = paired["live_births"] * paired["deaths_region"] / paired["live_births_region"]
    return typed_frame(region_dispersion(paired, trim))
