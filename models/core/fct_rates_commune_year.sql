-- Deprecated alias of fct_area_year_rates, the mart's name until it was renamed (the rows were
-- never only communes: regions and the country too). A view, so it holds no copy of the data
-- and is not exported as Parquet; existing queries keep working. Read fct_area_year_rates.

select * from {{ ref('fct_area_year_rates') }}
