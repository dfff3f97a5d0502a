"""Ridit and quintile of every commune per area, indicator, period and stratifier.

The rule (docs/methods/inequity.md) is `infant_mortality.statistics.inequality.rank_communes`; this model
only reads the commune rows and returns the ranked frame.
"""

from infant_mortality.dbt_plugins.model_inputs import ordered_frame
from infant_mortality.dbt_plugins.model_outputs import typed_frame
from infant_mortality.statistics.inequality import GROUP_KEYS, rank_communes

# Descriptive columns constant within a group, carried along with the keys.
KEYS = GROUP_KEYS + ["area_name", "period_label", "period_kind"]


def model(dbt, session):
    dbt.config(materialized="table")
    communes = ordered_frame(dbt.ref("int_inequality__commune_inputs"))
    return typed_frame(rank_communes(communes, KEYS))
