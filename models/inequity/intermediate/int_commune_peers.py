"""Each commune's k nearest communes nationally on the covariates of int_commune_peer_covariates
(docs/methods/inequity.md, "Peers"). The rule is `infant_mortality.statistics.peers.nearest_peers`
(tested with pytest); k is var `peer_count` (through the YAML `config:`). Communes without
every covariate are left out here and named in the mart's description."""

from infant_mortality.dbt_plugins.model_inputs import ordered_frame
from infant_mortality.dbt_plugins.model_outputs import typed_frame
from infant_mortality.statistics.peers import nearest_peers

COVARIATES = ["income_poverty_2022", "multidimensional_poverty_2022", "log10_population"]


def model(dbt, session):
    dbt.config(materialized="table")
    k = int(dbt.config.get("peer_count"))
    covariates = ordered_frame(dbt.ref("int_commune_peer_covariates"))
    complete = covariates[covariates["has_all_covariates"]].set_index("commune_code")[COVARIATES]
    return typed_frame(nearest_peers(complete, k))
