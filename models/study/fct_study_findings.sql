-- The study's abstract, statement by statement, against what this build computes (issue 42;
-- docs/methods/study.md). One row per statement of seeds/study_findings.csv (González,
-- Alfaro & Horna-Campos 2020: the 52 communes of region 13, 2005-2014). Each statement is
-- checked over the study's period when the build has it, else over the longest period the build
-- computed inside it (the overlap, e.g. 2010-2014 with the bundled data 2010-2019), and the
-- years left out are named with the reason. Nothing is extrapolated: a statement the build
-- cannot check says why (`not_computable_reason`).
{% set p_threshold = number_var('trend_p_threshold') %}

with findings as (
    select * from {{ ref('study_findings') }}
),

comparisons as (
    select * from {{ ref('fct_commune_vs_region') }}
),

trends as (
    select
        area_code, indicator, cast(period_start as integer) as period_start,
        cast(period_end as integer) as period_end, method, fitter, slope_log10, p_value, apc,
        apc_ci95_lower, apc_ci95_upper, trend, note
    from {{ ref('fct_trends') }}
    where area_level = 'commune'
),

-- What the input holds for the region each year (deaths and births of any indicator).
region_years as (
    select
        region_code, year,
        bool_or(deaths is not null) as has_deaths,
        bool_or(live_births is not null) as has_births
    from {{ ref('fct_area_year_rates') }}
    where area_level = 'region'
    group by region_code, year
),

built_regions as (
    select distinct region_code from region_years
),

-- The periods the build compared communes over, per region and indicator.
built_periods as (
    select distinct region_code, indicator, period_start, period_end
    from comparisons
),

built_indicators as (
    select distinct region_code, indicator from built_periods
),

-- The study's own period when built (a custom_period can add it), else the longest built
-- period inside it (earliest first on a tie).
picked as (
    select
        findings.finding_id,
        built_periods.period_start,
        built_periods.period_end,
        row_number() over (
            partition by findings.finding_id
            order by
                (built_periods.period_start = findings.study_period_start
                    and built_periods.period_end = findings.study_period_end) desc,
                built_periods.period_end - built_periods.period_start desc,
                built_periods.period_start asc
        ) as pick
    from findings
    inner join built_periods
        on findings.region_code = built_periods.region_code
        and findings.indicator = built_periods.indicator
        and findings.study_period_start <= built_periods.period_start
        and findings.study_period_end >= built_periods.period_end
),

chosen as (
    select
        findings.*,
        picked.period_start,
        picked.period_end,
        built_indicators.indicator is not null as indicator_is_built,
        built_regions.region_code is not null as region_is_built
    from findings
    left join built_regions on findings.region_code = built_regions.region_code
    left join picked on findings.finding_id = picked.finding_id and picked.pick = 1
    left join built_indicators
        on findings.region_code = built_indicators.region_code
        and findings.indicator = built_indicators.indicator
),

study_years as (
    select finding_id, region_code, region_is_built, indicator_is_built, period_start, period_end,
        unnest(generate_series(study_period_start, study_period_end)) as year
    from chosen
),

missing_years as (
    select
        study_years.finding_id,
        study_years.year,
        case
            when not study_years.region_is_built then 'region_not_in_build'
            when not coalesce(region_years.has_deaths, false) then 'deaths_not_in_input'
            when not study_years.indicator_is_built then 'indicator_not_in_build'
            when not coalesce(region_years.has_births, false) then 'births_not_in_input'
            else 'period_not_in_build'
        end as reason
    from study_years
    left join region_years
        on study_years.region_code = region_years.region_code and study_years.year = region_years.year
    where study_years.period_start is null
        or study_years.year not between study_years.period_start and study_years.period_end
),

-- Consecutive years with the same reason as one span: '2005-2009: deaths_not_in_input'.
missing_spans as (
    select finding_id, reason, min(year) as first_year, max(year) as last_year
    from (
        select *, year - row_number() over (partition by finding_id, reason order by year) as span
        from missing_years
    ) as numbered
    group by finding_id, reason, span
),

-- The same years as spans whatever their reason: '2005-2014'.
missing_year_spans as (
    select
        finding_id,
        string_agg(
            {{ year_span_label('first_year', 'last_year') }},
            ', ' order by first_year
        ) as missing_years
    from (
        select finding_id, min(year) as first_year, max(year) as last_year
        from (
            select *, year - row_number() over (partition by finding_id order by year) as span
            from missing_years
        ) as numbered
        group by finding_id, span
    ) as spans
    group by finding_id
),

missing as (
    select
        missing_spans.finding_id,
        any_value(missing_year_spans.missing_years) as missing_years,
        string_agg(
            {{ year_span_label('first_year', 'last_year') }} || ': ' || reason,
            '; ' order by first_year
        ) as missing_years_reason
    from missing_spans
    inner join missing_year_spans on missing_spans.finding_id = missing_year_spans.finding_id
    group by missing_spans.finding_id
),

ranked as (
    select
        *,
        count(rate_per_1000) over (partition by region_code, indicator, period_start, period_end) as n_communes_ranked,
        max(rate_per_1000) over (partition by region_code, indicator, period_start, period_end) as highest_rate,
        min(rate_per_1000) over (partition by region_code, indicator, period_start, period_end) as lowest_rate,
        row_number() over (
            partition by region_code, indicator, period_start, period_end
            order by rate_per_1000 asc nulls last, commune_code asc
        ) as rank_from_lowest
    from comparisons
),

extremes as (
    select
        region_code, indicator, period_start, period_end,
        max(case when rank_in_region = 1 then commune_code end) as highest_code,
        max(case when rank_in_region = 1 then commune_name end) as highest_name,
        max(case when rank_from_lowest = 1 then commune_code end) as lowest_code,
        max(case when rank_from_lowest = 1 then commune_name end) as lowest_name
    from ranked
    group by region_code, indicator, period_start, period_end
),

joined as (
    select
        chosen.*,
        ranked.rate_per_1000,
        ranked.ci95_lower,
        ranked.ci95_upper,
        ranked.rate_ratio,
        ranked.rate_ratio_ci95_lower,
        ranked.rate_ratio_ci95_upper,
        ranked.rank_in_region,
        ranked.n_communes_ranked,
        ranked.highest_rate,
        ranked.lowest_rate,
        extremes.highest_code,
        extremes.highest_name,
        extremes.lowest_code,
        extremes.lowest_name,
        prais.fitter as prais_fitter,
        prais.apc,
        prais.apc_ci95_lower,
        prais.apc_ci95_upper,
        prais.p_value as prais_p_value,
        prais.trend as prais_trend,
        prais.note as prais_note,
        case
            when prais.p_value is null or prais.slope_log10 is null then null
            when prais.p_value < {{ p_threshold }} and prais.slope_log10 > 0 then 'increasing'
            when prais.p_value < {{ p_threshold }} and prais.slope_log10 < 0 then 'decreasing'
            else 'stationary'
        end as prais_direction,
        headline.method as headline_method,
        headline.trend as headline_trend,
        missing.missing_years,
        missing.missing_years_reason
    from chosen
    left join ranked
        on chosen.commune_code = ranked.commune_code
        and chosen.indicator = ranked.indicator
        and chosen.period_start = ranked.period_start
        and chosen.period_end = ranked.period_end
    left join extremes
        on chosen.region_code = extremes.region_code
        and chosen.indicator = extremes.indicator
        and chosen.period_start = extremes.period_start
        and chosen.period_end = extremes.period_end
    left join trends as prais
        on chosen.commune_code = prais.area_code
        and chosen.indicator = prais.indicator
        and chosen.period_start = prais.period_start
        and chosen.period_end = prais.period_end
        and prais.method = 'prais_winsten'
    left join trends as headline
        on chosen.commune_code = headline.area_code
        and chosen.indicator = headline.indicator
        and chosen.period_start = headline.period_start
        and chosen.period_end = headline.period_end
        and headline.method = {{ string_var('trend_method') }}
    left join missing on chosen.finding_id = missing.finding_id
),

valued as (
    select
        *,
        case finding_kind
            when 'rate_ratio' then rate_ratio
            when 'trend' then apc
            else rate_per_1000
        end as warehouse_value,
        case finding_kind
            when 'rate_ratio' then rate_ratio_ci95_lower
            when 'trend' then apc_ci95_lower
            else ci95_lower
        end as warehouse_ci95_lower,
        case finding_kind
            when 'rate_ratio' then rate_ratio_ci95_upper
            when 'trend' then apc_ci95_upper
            else ci95_upper
        end as warehouse_ci95_upper,
        case
            when period_start is null and not region_is_built then 'region_not_in_build'
            when period_start is null and not indicator_is_built then 'indicator_not_in_build'
            when period_start is null then 'deaths_not_in_input'
            when rate_per_1000 is null then 'commune_rate_unavailable'
            when finding_kind = 'trend' and prais_direction is null then 'trend_not_estimable'
        end as not_computable_reason
    from joined
),

judged as (
    select
        *,
        study_value between warehouse_ci95_lower and warehouse_ci95_upper as value_within_interval,
        case
            when not_computable_reason is not null then null
            when finding_kind = 'highest_rate'
                then rate_per_1000 = highest_rate and coalesce(study_value between ci95_lower and ci95_upper, true)
            when finding_kind = 'lowest_rate' then rate_per_1000 = lowest_rate
            when finding_kind = 'rate_ratio' then study_value between rate_ratio_ci95_lower and rate_ratio_ci95_upper
            when finding_kind = 'trend' then prais_direction = study_trend
        end as finding_holds
    from valued
)

select
    cast(finding_id as integer) as finding_id,
    indicator,
    finding_kind,
    region_code,
    commune_code,
    commune_name,
    statement_en,
    statement_es,
    citation,
    cast(study_period_start as integer) as study_period_start,
    cast(study_period_end as integer) as study_period_end,
    cast(study_value as double) as study_value,
    nullif(study_trend, '') as study_trend,
    cast(period_start as integer) as period_start,
    cast(period_end as integer) as period_end,
    case when period_start is not null then cast(period_start as varchar) || '-' || cast(period_end as varchar) end
        as period_label,
    case
        when period_start is null then 'none'
        when period_start = study_period_start and period_end = study_period_end then 'study_period'
        else 'overlap'
    end as period_coverage,
    missing_years,
    missing_years_reason,
    case finding_kind
        when 'highest_rate' then highest_code
        when 'lowest_rate' then lowest_code
        else commune_code
    end as warehouse_commune_code,
    case finding_kind
        when 'highest_rate' then highest_name
        when 'lowest_rate' then lowest_name
        else commune_name
    end as warehouse_commune_name,
    case finding_kind
        when 'rate_ratio' then 'rate ratio to the region'
        when 'trend' then 'annual percent change'
        else 'per 1000 live births'
    end as value_unit,
    warehouse_value,
    warehouse_ci95_lower,
    warehouse_ci95_upper,
    value_within_interval,
    cast(rank_in_region as integer) as commune_rank,
    cast(n_communes_ranked as integer) as n_communes_ranked,
    -- The trend columns describe a trend statement only (null on the other kinds' rows).
    case when finding_kind = 'trend' then prais_fitter end as prais_fitter,
    case when finding_kind = 'trend' then prais_p_value end as prais_p_value,
    case when finding_kind = 'trend' then prais_trend end as prais_trend,
    case when finding_kind = 'trend' then prais_direction end as prais_direction,
    case when finding_kind = 'trend' then prais_note end as prais_note,
    case when finding_kind = 'trend' then {{ string_var('trend_method') }} end as headline_method,
    case when finding_kind = 'trend' then headline_trend end as headline_trend,
    finding_holds,
    case
        when not_computable_reason is not null then 'not_computable'
        when finding_holds then 'holds'
        else 'does_not_hold'
    end as status,
    not_computable_reason
from judged
