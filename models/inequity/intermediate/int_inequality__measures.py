"""D, R, PAR, PAF, avoidable deaths, SII, RII, CIX and the Poisson gradient (a, b) of every
area, indicator, period and stratifier, computed by
`infant_mortality.statistics.inequality.inequality_measures` from the ranked communes."""

import time

from infant_mortality.dbt_plugins.model_inputs import ordered_frame
from infant_mortality.dbt_plugins.model_outputs import typed_frame
from infant_mortality.statistics.inequality import GROUP_KEYS, inequality_measures

KEYS = GROUP_KEYS + ["area_name", "period_label", "period_kind"]


def model(dbt, session):
    dbt.config(materialized="table")
    membership = ordered_frame(dbt.ref("int_inequality__membership"))
    start = time.perf_counter()
    measures = inequality_measures(membership, KEYS)
    print(f"int_inequality__measures: {len(measures)} rows in {time.perf_counter() - start:.2f} s")
    return typed_frame(measures)
