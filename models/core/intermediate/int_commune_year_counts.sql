-- Commune-year counts by indicator, whichever input mode fed them: the one place the marts
-- read counts from. Every commune of every region present gets a row for every year and
-- indicator present, so a commune-year missing from the input is visible, not silently absent.
-- `deaths` is kept as derived (possibly negative or missing); `count_problem` says why a count
-- cannot give a rate, and the marts turn that into an unavailable rate. `is_poolable` says
-- whether the counts may still enter the region's and the country's sums (docs/methods/core.md, "Regions and the country"):
-- only counts that exist, with a derived count outside [0, live births] by at most
-- var('derived_count_tolerance') deaths and no implausible rate or births.
-- Births are held against the area, not only per line (issue 41): a commune-year whose births
-- lie outside [yardstick / k - m, k x yardstick + m] (k = var max_births_ratio, m = var
-- births_ratio_margin), for either yardstick, its population aged 0 (INE, stg_ine__population)
-- or the median of its own births series, is `implausible_births`: no rate, not poolable, so no
-- region, country or period is published from it.
-- The births are the denominator var births_denominator chooses (docs/methods/core.md, "Which births the rates divide
-- by: registered or DEIS-corrected"): the
-- input's registered births, or DEIS's corrected births where the bundled file has a figure for
-- the commune-year; `births_basis` says which, and every check below holds the chosen births.
with counts as (
    -- From the input mode's folder (dbt_project.yml enables one): models/inputs/<mode>/.
    select * from {{ ref('int_input__commune_year_counts') }}
),

communes as (
    select commune_code, commune_name, region_code
    from {{ ref('stg_reference__communes') }}
),

-- Every year from the first to the last: a year missing for every commune is a gap to report.
years as (
    select cast(series.year as integer) as year
    from (select min(year) as first_year, max(year) as last_year from counts) as bounds
    cross join generate_series(bounds.first_year, bounds.last_year) as series (year)
),

expected as (
    {{ commune_year_grid('counts', 'years') }}
),

-- The population aged 0 of each commune-year (a line with a problem gives none: that
-- commune-year is held to its own series only, and int_audit__count_problems reports the line).
population as (
    select commune_code, year, max(age_0_population) as age_0_population
    from {{ ref('stg_ine__population') }}
    where parse_problem is null
    group by commune_code, year
),

known_communes as (
    select
        expected.commune_code,
        expected.commune_name,
        expected.region_code,
        expected.year,
        expected.indicator,
        counts.deaths,
        counts.live_births,
        case when counts.commune_code is null then 'commune_year_missing' else counts.source_problem end
            as source_problem
    from expected
    left join counts
        on expected.commune_code = counts.commune_code
        and expected.year = counts.year
        and expected.indicator = counts.indicator
),

unknown_communes as (
    select
        counts.commune_code,
        counts.commune_name,
        cast(null as varchar) as region_code,
        counts.year,
        counts.indicator,
        counts.deaths,
        counts.live_births,
        'commune_unknown' as source_problem
    from counts
    left join communes on counts.commune_code = communes.commune_code
    where communes.commune_code is null
),

all_communes_registered as (
    select * from known_communes
    union all
    select * from unknown_communes
),

corrected_births as (
    select area_code as commune_code, year, corrected_live_births
    from {{ ref('stg_seremi_rm__corrected_births') }}
    where area_level = 'commune' and corrected_live_births is not null
),

-- A corrected figure replaces a registered one, never births the input lacks: whether a
-- commune-year has births (and so a rate) stays the input's to say.
{% set divides_by_corrected = 'true' if checked_var('births_denominator') == 'corrected' else 'false' %}
all_communes as (
    select
        registered.* exclude (live_births),
        case
            when not {{ divides_by_corrected }} then 'registered'
            when corrected.corrected_live_births is null then 'registered_no_corrected_figure'
            else 'corrected'
        end as births_basis,
        registered.live_births as registered_live_births,
        corrected.corrected_live_births,
        case when {{ divides_by_corrected }} and registered.live_births is not null
            then coalesce(corrected.corrected_live_births, registered.live_births)
            else registered.live_births
        end as live_births
    from all_communes_registered as registered
    left join corrected_births as corrected
        on registered.commune_code = corrected.commune_code
        and registered.year = corrected.year
),

-- The two yardsticks of a commune-year's births: its population aged 0 and the median of the
-- commune's births over the years read (one typo cannot move a median of three years or more).
yardsticks as (
    select
        all_communes.*,
        population.age_0_population,
        -- Only a series of 3 years or more: the median of two is their mean, which one typo moves.
        case when count(all_communes.live_births) over (partition by all_communes.commune_code, all_communes.indicator) >= 3
            then median(all_communes.live_births) over (partition by all_communes.commune_code, all_communes.indicator)
        end as series_median_births
    from all_communes
    left join population
        on all_communes.commune_code = population.commune_code
        and all_communes.year = population.year
),

{% set k = number_var('max_births_ratio') %}
{% set m = int_var('births_ratio_margin') %}
{% set outside = '(live_births > {k} * {y} + {m} or live_births < {y} / {k} - {m})' %}

checked as (
    select
        *,
        coalesce(source_problem, case
            -- No births at all says more than "implausible" (the commune is missing from the births).
            when live_births = 0 and deaths >= 0 then 'no_live_births'
            when {{ outside.format(k=k, m=m, y='age_0_population') }}
                or {{ outside.format(k=k, m=m, y='series_median_births') }}
                then 'implausible_births'
            when deaths < 0 then 'negative_derived_count'
            when live_births = 0 then 'no_live_births'
            when deaths > live_births then 'deaths_exceed_births'
            when deaths >= {{ int_var('implausible_rate_min_deaths') }}
                -- The var is a rate per 1000 live births whatever the indicator's multiplier.
                and deaths > live_births * {{ number_var('implausible_rate_per_1000') }} / 1000.0
                then 'implausible_rate'
        end) as count_problem,
        -- How far the count lies outside [0, live births] (0 inside it; null without counts).
        case when deaths is not null and live_births is not null
            then greatest(-deaths, deaths - live_births, 0) end as count_deviation
    from yardsticks
)

select
    commune_code,
    commune_name,
    region_code,
    year,
    indicator,
    deaths,
    live_births,
    births_basis,
    cast(registered_live_births as bigint) as registered_live_births,
    cast(corrected_live_births as bigint) as corrected_live_births,
    multiplier,
    input_mode.count_basis,
    count_problem,
    cast(age_0_population as bigint) as age_0_population,
    cast(series_median_births as double) as series_median_births,
    cast(count_deviation as bigint) as count_deviation,
    coalesce(source_problem is null and coalesce(count_problem, '') not in ('implausible_rate', 'implausible_births')
        and count_deviation <= {{ int_var('derived_count_tolerance') }}, false) as is_poolable
from checked
cross join (select distinct count_basis from counts) as input_mode
-- The rate multiplier travels with the counts so that every rate downstream reads it (macro rate).
left join {{ ref('indicators') }} using (indicator)
-- Unknown communes have no region: keep them whatever the region scope, so they reach the audit.
where {{ in_scope('region_code', 'year') }}
    or (region_code is null and {{ in_year_scope('year') }})
