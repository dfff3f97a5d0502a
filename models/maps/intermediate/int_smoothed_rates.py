"""Empirical Bayes smoothed commune rates (docs/methods/maps.md, "Smoothed rates").

Reads each commune's pooled counts as `fct_commune_vs_region` compares them (core's `int_commune_period_counts`) and the
neighbour pairs of `dim_commune_neighbours`; the statistics are
`infant_mortality.statistics.smoothing.smooth_commune_rates` (tested with pytest).
"""

from infant_mortality.dbt_plugins.model_inputs import ordered_frame
from infant_mortality.dbt_plugins.model_outputs import typed_frame
from infant_mortality.statistics.smoothing import smooth_commune_rates


def model(dbt, session):
    dbt.config(materialized="table")
    pooled = ordered_frame(dbt.ref("int_commune_period_counts"))  # with each indicator's multiplier
    neighbours = ordered_frame(dbt.ref("dim_commune_neighbours"))
    return typed_frame(smooth_commune_rates(pooled, neighbours))
