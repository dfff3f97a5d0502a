"""Every commune beside the best-off commune(s), as Chilean studies compare them (docs/methods/inequity.md,
"Benchmark comparisons"): `infant_mortality.statistics.inequality.benchmark_pairs` on the pooled counts of
fct_commune_vs_region chooses the benchmark; fct_commune_vs_benchmark compares (SQL). The vars `benchmark_min_deaths` and `benchmark_communes` arrive through
the YAML `config:` and are validated by `parse_benchmark_vars` (errors name the var)."""

from infant_mortality.dbt_plugins.model_inputs import ordered_frame
from infant_mortality.dbt_plugins.model_outputs import typed_frame
from infant_mortality.statistics.inequality import benchmark_pairs, parse_benchmark_vars

COLUMNS = ["commune_code", "commune_name", "region_code", "region_name", "indicator",
           "period_start", "period_end", "period_label", "n_years", "deaths", "live_births"]


def model(dbt, session):
    dbt.config(materialized="table")
    min_deaths, listed = parse_benchmark_vars(dbt.config.get("benchmark_min_deaths"),
                                              dbt.config.get("benchmark_communes"))
    communes = ordered_frame(dbt.ref("fct_commune_vs_region"))[COLUMNS]
    return typed_frame(benchmark_pairs(communes, min_deaths, listed))
