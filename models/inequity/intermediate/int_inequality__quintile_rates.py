"""Pooled deaths, births and rate of each deprivation quintile (docs/methods/inequity.md),
computed by `infant_mortality.statistics.inequality.quintile_rates` from the ranked communes."""

from infant_mortality.dbt_plugins.model_inputs import ordered_frame
from infant_mortality.dbt_plugins.model_outputs import typed_frame
from infant_mortality.statistics.inequality import GROUP_KEYS, quintile_rates

KEYS = GROUP_KEYS + ["area_name", "period_label", "period_kind"]


def model(dbt, session):
    dbt.config(materialized="table")
    membership = ordered_frame(dbt.ref("int_inequality__membership"))
    return typed_frame(quintile_rates(membership, KEYS))
