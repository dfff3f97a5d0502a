"""The analyst's script for the bundled data, in DuckDB: one SQL statement reads data/raw and
computes the yearly and pooled counts of communes, regions and the country and each commune
against its region; exact limits and a GLSAR trend per series are then computed on its result
(SQL has no chi-squared quantile). A baseline for `make bench-compare`, not part of the warehouse;
the same figures as bundled_pandas.py.

    python benchmarks/baselines/bundled_duckdb.py data/raw OUT_FOLDER
"""

import sys
from pathlib import Path

import duckdb

from common import glsar_trends, rest_of_region_limits, with_rates

SQL = """
create temp table yearly as
with ine as (
    select codigo_comuna as area, anio as year,
           sum(cantidad) filter (where evento = 'nacimiento') as births,
           sum(cantidad) filter (where evento = 'defuncion') as all_deaths
    from read_csv('{raw}/ine_vital_statistics_chile_2010_2019.csv', types = {{'codigo_comuna': 'VARCHAR'}})
    group by all
),
aged_1 as (
    select lpad(CODIGO_COMUNA_RESIDENCIA::varchar, 5, '0') as area, "Year" as year,
           sum(Death_count_all_cause) as deaths_1
    from read_csv('{raw}/deis_deaths_by_commune_year_sex_agegroup_1990_2019.csv')
    where "Age group" = '1+'
    group by all
),
communes as (
    select 'commune' as level, ine.area, left(ine.area, 2) as region, ine.year, births,
           greatest(all_deaths - coalesce(deaths_1, 0), 0) as deaths
    from ine left join aged_1 using (area, year)
)
select * from communes
union all select 'region', region, region, year, sum(births), sum(deaths) from communes group by region, year
union all select 'country', '00', '00', year, sum(births), sum(deaths) from communes group by year;

create temp table periods as
select min(year) as period_start, max(year) as period_end from yearly
union all
select year, year + 4 from yearly, (select min(year) as first, max(year) as last from yearly)
where (year - first) % 5 = 0 and year + 4 <= last
group by year;

create temp table pooled as
select level, area, region, period_start, period_end, sum(deaths) as deaths, sum(births) as births
from yearly join periods on year between period_start and period_end
group by all;
"""

VERSUS_REGION = """
select c.*, r.deaths as deaths_region, r.births as births_region,
       (c.deaths / c.births) / (r.deaths / r.births) as rr,
       1000 * (c.deaths / c.births - r.deaths / r.births) as rap,
       100 * (1 - (r.deaths / r.births) / (c.deaths / c.births)) as rap_pct
from pooled c join pooled r on r.level = 'region' and r.area = c.region
    and r.period_start = c.period_start and r.period_end = c.period_end
where c.level = 'commune'
"""


def main(raw: Path, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    with duckdb.connect() as con:
        con.execute(SQL.format(raw=raw.as_posix()))
        yearly = with_rates(con.sql("select * from yearly").df())
        versus = con.sql(VERSUS_REGION).df()
        periods = [tuple(map(int, row)) for row in con.sql("select * from periods order by period_end - period_start desc, period_start").fetchall()]
    versus["rr_rest_lower"], versus["rr_rest_upper"] = rest_of_region_limits(versus)
    yearly.to_csv(out / "yearly_rates.csv", index=False)
    with_rates(versus).to_csv(out / "commune_vs_region.csv", index=False)
    glsar_trends(yearly, periods, ["level", "area"]).to_csv(out / "trends.csv", index=False)


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
