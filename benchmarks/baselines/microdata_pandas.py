"""The analyst's script for the DEIS microdata, in pandas: reads only the columns it needs
(`usecols`), counts infant and neonatal deaths and live births per commune of residence and year,
and writes the rates with exact limits. A baseline for `make bench-compare`, not the warehouse:
no checks, no audit, no line numbers.

    python benchmarks/baselines/microdata_pandas.py DEATHS.zip BIRTHS_FOLDER OUT_FOLDER
"""

import sys
from pathlib import Path

import pandas as pd

from common import with_rates

# Positions in the published deaths file (no header): ANO_DEF, EDAD_TIPO, EDAD_CANT, CODIGO_COMUNA_RESIDENCIA.
DEATH_COLUMNS = {0: "year", 3: "age_unit", 4: "age_amount", 5: "commune"}


def infant_deaths(deaths_zip: Path) -> pd.DataFrame:
    deaths = pd.read_csv(deaths_zip, sep=";", header=None, usecols=list(DEATH_COLUMNS), encoding="latin-1",
                         compression="zip").rename(columns=DEATH_COLUMNS)
    unit, amount = deaths["age_unit"], deaths["age_amount"]
    # Months 1-11, days, hours, or years 0 (units: 1 years, 2 months, 3 days, 4 hours).
    infant = ((unit == 1) & (amount == 0)) | ((unit == 2) & (amount <= 11)) | unit.isin([3, 4])
    neonatal = ((unit == 3) & (amount < 28)) | (unit == 4)
    counted = deaths.assign(imr=infant, nmr=neonatal)[infant]
    return counted.groupby(["commune", "year"])[["imr", "nmr"]].sum()


def births(folder: Path) -> pd.Series:
    frames = [pd.read_csv(path, sep=";", usecols=["ANO_NAC", "COMUNA"], encoding="latin-1")
              for path in sorted(folder.glob("*.csv"))]
    both = pd.concat(frames, ignore_index=True).rename(columns={"ANO_NAC": "year", "COMUNA": "commune"})
    return both.groupby(["commune", "year"]).size().rename("births")


def main(deaths_zip: Path, births_folder: Path, out: Path) -> None:
    counts = births(births_folder).to_frame().join(infant_deaths(deaths_zip), how="outer").fillna(0).reset_index()
    long = counts.melt(id_vars=["commune", "year", "births"], value_vars=["imr", "nmr"],
                       var_name="indicator", value_name="deaths")
    out.mkdir(parents=True, exist_ok=True)
    with_rates(long).to_csv(out / "commune_year_rates.csv", index=False)


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3]))
