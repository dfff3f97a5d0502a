-- Every commune against the best-off commune(s) (Chilean studies' comparison, docs/methods/inequity.md,
-- "Benchmark comparisons"): int_commune_vs_benchmark chooses the benchmark (vars benchmark_min_deaths /
-- benchmark_communes); the comparison is the same arithmetic as fct_commune_vs_region's
-- (macros/comparisons.sql), nested when the commune is (part of) its benchmark.
with pairs as (
    select
        pairs.*,
        indicators.multiplier,
        {{ rate('pairs.deaths', 'pairs.live_births', 'indicators.multiplier') }} as rate_per_1000,
        {{ rate('pairs.benchmark_deaths', 'pairs.benchmark_live_births', 'indicators.multiplier') }}
            as benchmark_rate_per_1000,
        pairs.live_births > 0 and pairs.benchmark_live_births > 0 as is_comparable
    from {{ ref('int_commune_vs_benchmark') }} as pairs
    inner join {{ ref('dim_indicator') }} as indicators on pairs.indicator = indicators.indicator
),

compared as (
    select
        *,
        case when is_comparable then rate_per_1000 / nullif(benchmark_rate_per_1000, 0) end as rate_ratio,
        {{ log_rate_ratio_se('deaths', 'benchmark_deaths', 'is_benchmark') }} as log_rate_ratio_se,
        case when is_comparable then rate_per_1000 - benchmark_rate_per_1000 end as excess_rate,
        case when is_comparable then {{ excess_rate_se(
            'deaths', 'live_births', 'benchmark_deaths', 'benchmark_live_births', 'is_benchmark', 'multiplier'
        ) }} end as excess_rate_se
    from pairs
),

bounded as (
    select
        *,
        {{ log_scale_limit('lower', 'rate_ratio', 'log_rate_ratio_se') }} as rate_ratio_lower,
        {{ log_scale_limit('upper', 'rate_ratio', 'log_rate_ratio_se') }} as rate_ratio_upper,
        excess_rate - {{ z95() }} * excess_rate_se as excess_rate_lower,
        excess_rate + {{ z95() }} * excess_rate_se as excess_rate_upper
    from compared
)

select
    commune_code,
    commune_name,
    region_code,
    region_name,
    indicator,
    cast(period_start as integer) as period_start,
    cast(period_end as integer) as period_end,
    period_label,
    cast(n_years as integer) as n_years,
    cast(deaths as bigint) as deaths,
    cast(live_births as bigint) as live_births,
    cast(rate_per_1000 as double) as rate_per_1000,
    benchmark_rule,
    benchmark_communes,
    benchmark_names,
    cast(benchmark_deaths as bigint) as benchmark_deaths,
    cast(benchmark_live_births as bigint) as benchmark_live_births,
    cast(benchmark_rate_per_1000 as double) as benchmark_rate_per_1000,
    cast(is_benchmark as boolean) as is_benchmark,
    cast(rate_ratio as double) as rate_ratio,
    cast(rate_ratio_lower as double) as rate_ratio_ci95_lower,
    cast(rate_ratio_upper as double) as rate_ratio_ci95_upper,
    cast(excess_rate as double) as excess_rate_per_1000,
    cast(excess_rate_lower as double) as excess_rate_ci95_lower,
    cast(excess_rate_upper as double) as excess_rate_ci95_upper,
    cast(case when is_comparable then {{ attributable_percent('rate_per_1000', 'benchmark_rate_per_1000') }} end as double)
        as attributable_percent,
    -- From RT's interval: RAP% = 100 (1 - 1/RT).
    cast(case when is_comparable and deaths > 0 then 100 * (1 - 1 / rate_ratio_lower) end as double)
        as attributable_percent_ci95_lower,
    cast(case when is_comparable and deaths > 0 then 100 * (1 - 1 / rate_ratio_upper) end as double)
        as attributable_percent_ci95_upper,
    -- Excess deaths = RAP x births / multiplier = deaths - the deaths expected at the benchmark's rate.
    cast(case when is_comparable
        then deaths - {{ expected_deaths('live_births', 'benchmark_rate_per_1000', 'multiplier') }} end as double)
        as excess_deaths,
    cast({{ expected_deaths('live_births', 'excess_rate_lower', 'multiplier') }} as double) as excess_deaths_ci95_lower,
    cast({{ expected_deaths('live_births', 'excess_rate_upper', 'multiplier') }} as double) as excess_deaths_ci95_upper,
    note
from bounded
