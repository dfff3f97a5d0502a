-- Audit rows (columns of audit_data_quality) for the bundled corrected births of the RM
-- (stg_seremi_rm__corrected_births), whose broken lines have already stopped the build: what a
-- line-level check cannot see. A commune of the region without a line in a year the file covers
-- keeps its registered births when var births_denominator is corrected; the region's own line
-- differing from the sum of its communes' (or missing) changes nothing, since the warehouse sums
-- communes, but says the copy is not the source's (a line deleted or two communes swapped).
with corrected as (
    select * from {{ ref('stg_seremi_rm__corrected_births') }}
),

communes as (
    select commune_code, commune_name, region_code
    from {{ ref('stg_reference__communes') }}
    where region_code in (select region_code from corrected)
),

years as (
    select region_code, year, max(source_file) as source_file
    from corrected
    group by region_code, year
),

missing_communes as (
    select
        years.source_file,
        communes.commune_code,
        years.year
    from years
    inner join communes on years.region_code = communes.region_code
    left join corrected
        on communes.commune_code = corrected.area_code
        and years.year = corrected.year
        and corrected.area_level = 'commune'
    where corrected.area_code is null
),

region_totals as (
    select
        years.source_file,
        years.region_code,
        years.year,
        region_line.source_line,
        region_line.corrected_live_births as region_births,
        sum(commune_lines.corrected_live_births) as communes_births
    from years
    left join corrected as region_line
        on years.region_code = region_line.area_code
        and years.year = region_line.year
        and region_line.area_level = 'region'
    left join corrected as commune_lines
        on years.region_code = commune_lines.region_code
        and years.year = commune_lines.year
        and commune_lines.area_level = 'commune'
    group by all
)

select
    'seremi_rm_corrected_births' as source,
    source_file,
    cast(null as bigint) as source_line,
    'corrected_births commune=' || commune_code || ' year=' || cast(year as varchar) as record_key,
    commune_code,
    year,
    cast(null as varchar) as indicator,
    'corrected_births_commune_year_missing' as check_name,
    'no line for the commune-year' as observed_value,
    cast(1 as bigint) as records_affected,
    'no corrected figure: with births_denominator corrected the commune-year keeps its registered births '
    || '(births_basis registered_no_corrected_figure)' as consequence,
    {{ 'true' if checked_var('births_denominator') == 'corrected' else 'false' }} as affects_results
from missing_communes
union all
select
    'seremi_rm_corrected_births',
    source_file,
    source_line,
    'corrected_births region=' || region_code || ' year=' || cast(year as varchar),
    cast(null as varchar),
    year,
    cast(null as varchar),
    case when source_line is null then 'corrected_births_region_line_missing'
        else 'corrected_births_region_differs_from_communes' end,
    'region=' || coalesce(cast(region_births as varchar), 'no line') || ' sum_of_communes=' || cast(communes_births as varchar),
    cast(1 as bigint),
    'none: a region''s corrected births are the sum of its communes'' (fct_births_denominators), '
    || 'as every region count of the warehouse',
    false
from region_totals
where region_births is distinct from communes_births
