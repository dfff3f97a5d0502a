-- Audit rows (columns of audit_data_quality): a unit whose rate over the same period as MINSAL's
-- (country and regions, 2017-2019) is neither within our exact 95% interval of MINSAL's official
-- rate nor within var official_anchor_tolerance_percent of it. The rate stands (the derived count
-- is what the bundled data give): the row says how far the derivation is from the official
-- figure there. Rows with a period mismatch (ours 2011-2019 against MINSAL's 2011-2020) are
-- never audited: they do not measure the same thing.
select
    'official_anchors' as source,
    cast(null as varchar) as source_file,
    cast(null as bigint) as source_line,
    area_level || '=' || area_code || ' period=' || minsal_period_label || ' indicator=' || indicator as record_key,
    case when area_level = 'commune' then area_code end as commune_code,
    cast(null as integer) as year,
    indicator,
    'minsal_rate_outside_interval_and_tolerance' as check_name,
    'rate=' || cast(round(rate_per_1000, 2) as varchar)
        || ' ci95=[' || cast(round(ci95_lower, 2) as varchar) || ', ' || cast(round(ci95_upper, 2) as varchar) || ']'
        || ' minsal=' || cast(round(minsal_rate_per_1000, 2) as varchar)
        || ' ratio=' || cast(round(rate_ratio, 3) as varchar) as observed_value,
    cast(1 as bigint) as records_affected,
    'none: the rate is published; the derived count differs from MINSAL''s official rate there (fct_official_anchors)'
        as consequence,
    false as affects_results
from {{ ref('fct_official_anchors') }}
where period_mismatch = 'same_period'
    and not is_minsal_within_ci
    and not is_within_tolerance
