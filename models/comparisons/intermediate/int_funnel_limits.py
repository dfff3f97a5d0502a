"""The funnel plot's exact Poisson control limits around each region's pooled rate, on a grid of
live births spanning the region's communes (0.7 x the smallest to 1.4 x the largest commune's
births in the period), for every indicator and analysis period. The rule is
`infant_mortality.statistics.poisson.funnel_rate_limits` (tested with pytest); the mart
`fct_funnel_limits` publishes the rows with a contract, for the report and for BI tools that
draw a funnel. Beside them, the limits adjusted for over-dispersion with the region's tau^2 of
`int_funnel_dispersion` (`infant_mortality.statistics.overdispersion.adjusted_funnel_rate_limits`)."""

import pandas as pd

from infant_mortality.dbt_plugins.model_inputs import ordered_frame
from infant_mortality.dbt_plugins.model_outputs import typed_frame
from infant_mortality.statistics.overdispersion import adjusted_funnel_rate_limits
from infant_mortality.statistics.poisson import FUNNEL_BIRTHS_SPAN, funnel_rate_limits

KEYS = ["region_code", "indicator", "period_start", "period_end"]
GRID_POINTS = 36


def model(dbt, session):
    dbt.config(materialized="table")
    communes = ordered_frame(dbt.ref("fct_commune_vs_region"))
    areas = ordered_frame(dbt.ref("fct_area_period_rates"))
    # The indicator's rate multiplier (seed `indicators`): limits are rates on its scale.
    multipliers = ordered_frame(dbt.ref("dim_indicator"))[["indicator", "multiplier"]]
    areas = areas.merge(multipliers, on="indicator")
    regions = areas[areas["area_level"] == "region"].rename(
        columns={"area_code": "region_code", "rate_per_1000": "region_rate_per_1000"})
    with_rate = communes[communes["rate_per_1000"].notna() & (communes["live_births"] > 0)]
    spans = with_rate.groupby(KEYS, as_index=False)["live_births"].agg(births_min="min", births_max="max")
    spans = spans.merge(regions[KEYS + ["region_rate_per_1000", "multiplier"]], on=KEYS)
    dispersion = ordered_frame(dbt.ref("int_funnel_dispersion"))
    spans = spans.merge(dispersion[KEYS + ["phi", "tau2"]], on=KEYS, how="left")
    rows = []
    for span in spans[spans["region_rate_per_1000"].notna()].itertuples(index=False):
        low, high = FUNNEL_BIRTHS_SPAN
        grid, limits = funnel_rate_limits(span.region_rate_per_1000, low * span.births_min, high * span.births_max,
                                          span.multiplier, points=GRID_POINTS)
        (low95, up95), (low998, up998) = limits[0.95], limits[0.998]
        # A region with fewer than two communes with births has no tau^2: no adjusted limits.
        no_limit = [None] * len(grid)
        adjusted = adjusted_funnel_rate_limits(span.region_rate_per_1000, grid, span.tau2, span.multiplier,
                                               exact=limits) \
            if pd.notna(span.tau2) \
            else {level: (no_limit, no_limit) for level in limits}
        (alow95, aup95), (alow998, aup998) = adjusted[0.95], adjusted[0.998]
        for point, births in enumerate(grid):
            rows.append({**{k: getattr(span, k) for k in KEYS}, "grid_point": point + 1, "live_births": births,
                         "region_rate_per_1000": span.region_rate_per_1000,
                         "expected_deaths": span.region_rate_per_1000 * births / span.multiplier,
                         "lower_95_per_1000": low95[point], "upper_95_per_1000": up95[point],
                         "lower_998_per_1000": low998[point], "upper_998_per_1000": up998[point],
                         "phi": span.phi, "tau2": span.tau2,
                         "adjusted_lower_95_per_1000": alow95[point], "adjusted_upper_95_per_1000": aup95[point],
                         "adjusted_lower_998_per_1000": alow998[point],
                         "adjusted_upper_998_per_1000": aup998[point]})
    columns = KEYS + ["grid_point", "live_births", "region_rate_per_1000", "expected_deaths", "lower_95_per_1000",
                      "upper_95_per_1000", "lower_998_per_1000", "upper_998_per_1000", "phi", "tau2",
                      "adjusted_lower_95_per_1000", "adjusted_upper_95_per_1000", "adjusted_lower_998_per_1000",
                      "adjusted_upper_998_per_1000"]
    return typed_frame(pd.DataFrame(rows, columns=columns))
