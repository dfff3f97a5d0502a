"""The analyst's script for the DEIS microdata, in DuckDB: unpacks the deaths ZIP, then one SQL
statement counts infant and neonatal deaths and live births per commune of residence and year;
the rates get exact limits. With `--load-all-as-text` it instead only loads every column of every
file into tables as text (the raw-load reference). A baseline for `make bench-compare`, not the
warehouse: no checks, no audit, no line numbers.

    python benchmarks/baselines/microdata_duckdb.py DEATHS.zip BIRTHS_FOLDER OUT_FOLDER [--load-all-as-text]
"""

import sys
import zipfile
from pathlib import Path

import duckdb

COUNTS = """
with deaths as (
    select column05 as commune, column00 as year,
           count(*) filter (where (column03 = 1 and column04 = 0) or (column03 = 2 and column04 <= 11)
                                  or column03 in (3, 4)) as imr,
           count(*) filter (where (column03 = 3 and column04 < 28) or column03 = 4) as nmr
    from read_csv('{deaths}', delim = ';', header = false, encoding = 'latin-1')
    group by all
),
births as (
    select COMUNA as commune, ANO_NAC as year, count(*) as births
    from read_csv('{births}/*.csv', delim = ';', header = true, encoding = 'latin-1')
    group by all
)
select commune, year, coalesce(births, 0) as births, indicator, deaths
from (select * from births full join deaths using (commune, year))
unpivot (deaths for indicator in (coalesce(imr, 0) as imr, coalesce(nmr, 0) as nmr))
"""

LOAD_ALL = """
create table deaths as select * from read_csv('{deaths}', delim = ';', header = false, encoding = 'latin-1',
                                              all_varchar = true);
create table births as select * from read_csv('{births}/*.csv', delim = ';', header = true, encoding = 'latin-1',
                                              all_varchar = true);
"""


def main(deaths_zip: Path, births_folder: Path, out: Path, load_all: bool) -> None:
    out.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(deaths_zip) as archive:
        member = archive.extract(archive.namelist()[0], out)
    paths = {"deaths": Path(member).as_posix(), "births": births_folder.as_posix()}
    if load_all:
        with duckdb.connect(str(out / "raw.duckdb")) as con:
            con.execute(LOAD_ALL.format(**paths))
        return
    from common import with_rates  # only the counting run computes limits (scipy)

    with duckdb.connect() as con:
        counts = con.sql(COUNTS.format(**paths)).df()
    with_rates(counts).to_csv(out / "commune_year_rates.csv", index=False)


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3]), "--load-all-as-text" in sys.argv[4:])
