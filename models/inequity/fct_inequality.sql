-- The summary measures of the socio-economic gradient (WHO HEAT's D, R, PAR, PAF, SII, RII,
-- concentration index; avoidable deaths; the Poisson gradient's a and b), long form, computed
-- in int_inequality__measures (docs/methods/inequity.md).
select
    area_level,
    area_code,
    area_name,
    indicator,
    cast(period_start as integer) as period_start,
    cast(period_end as integer) as period_end,
    period_label,
    period_kind,
    stratifier,
    measure,
    cast(estimate as double) as estimate,
    cast(ci95_lower as double) as ci95_lower,
    cast(ci95_upper as double) as ci95_upper,
    cast(n_communes as integer) as n_communes,
    cast(n_communes_without_value as integer) as n_communes_without_value,
    cast(n_communes_without_births as integer) as n_communes_without_births,
    cast(deaths as bigint) as deaths,
    cast(live_births as bigint) as live_births,
    ci_method,
    note
from {{ ref('int_inequality__measures') }}
