{#- The completeness grid: every commune of every region that has counts, for every year of
    `years` (a relation with a `year` column) and every indicator of `counts`. Both input
    ports' counts meet it: the microdata port fills it with zeros where no record occurred (a
    register of events has no row for a zero), core's counts mark a cell without a row as
    missing (an aggregate file must have one). -#}
{% macro commune_year_grid(counts, years) -%}
    select communes.commune_code, communes.commune_name, communes.region_code, years.year, indicators.indicator
    from {{ ref('stg_reference__communes') }} as communes
    cross join {{ years }} as years
    cross join (select distinct indicator from {{ counts }}) as indicators
    where communes.region_code in (
        select reference.region_code
        from {{ counts }} as counted
        inner join {{ ref('stg_reference__communes') }} as reference on counted.commune_code = reference.commune_code
    )
{%- endmacro %}
