"""Local Moran's I clusters of the EB-standardised commune rates (docs/methods/maps.md, "BYM2 smoothing and spatial clusters").

Reads the pooled counts of core's `int_commune_period_counts` (as `fct_commune_vs_region` compares them) and the neighbour pairs of
`dim_commune_neighbours`; the statistics are
`infant_mortality.statistics.clusters.commune_clusters` (tested with pytest).
"""

from infant_mortality.dbt_plugins.model_inputs import ordered_frame
from infant_mortality.dbt_plugins.model_outputs import typed_frame
from infant_mortality.statistics.clusters import commune_clusters


def model(dbt, session):
    dbt.config(materialized="table")
    pooled = ordered_frame(dbt.ref("int_commune_period_counts"))
    neighbours = ordered_frame(dbt.ref("dim_commune_neighbours"))
    alpha = float(dbt.config.get("cluster_fdr_alpha"))
    permutations = int(dbt.config.get("cluster_permutations"))
    return typed_frame(commune_clusters(pooled, neighbours, alpha, permutations))
