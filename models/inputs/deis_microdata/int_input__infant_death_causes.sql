-- Microdata mode's infant deaths by underlying cause, per commune of residence and year: the
-- port the causes room reads (the bundled aggregates carry no causes: an empty table there).
select
    commune_code,
    year,
    icd_revision,
    cause_status,
    cause_group,
    reducible_group,
    is_reducible,
    count(*) as deaths
from {{ ref('int_deis__infant_deaths') }}
group by all
