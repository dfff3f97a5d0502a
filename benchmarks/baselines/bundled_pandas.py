"""The analyst's script for the bundled data, in pandas: what the warehouse publishes from
data/raw, written the direct way (a baseline for `make bench-compare`, not part of the warehouse).

Infant deaths per commune and year = INE deaths of all ages - DEIS deaths aged 1+ (negatives
written as 0); births from INE. Yearly rates with exact limits for communes, regions and the
country; for the full window and each 5-year block, pooled rates, each commune against its region
(RR with the exact conditional limits against the rest of the region, RAP, RAP%), and a GLSAR
trend per area and period.

    python benchmarks/baselines/bundled_pandas.py data/raw OUT_FOLDER
"""

import sys
from pathlib import Path

import pandas as pd
from common import glsar_trends, rest_of_region_limits, with_rates


def commune_years(raw: Path) -> pd.DataFrame:
    ine = pd.read_csv(raw / "ine_vital_statistics_chile_2010_2019.csv",
                      usecols=["anio", "codigo_comuna", "evento", "cantidad"], dtype={"codigo_comuna": str})
    ine = ine.pivot_table(index=["codigo_comuna", "anio"], columns="evento", values="cantidad", aggfunc="sum")
    deis = pd.read_csv(raw / "deis_deaths_by_commune_year_sex_agegroup_1990_2019.csv",
                       usecols=["CODIGO_COMUNA_RESIDENCIA", "Year", "Death_count_all_cause", "Age group"])
    aged_1 = deis[deis["Age group"] == "1+"].assign(
        codigo_comuna=lambda f: f["CODIGO_COMUNA_RESIDENCIA"].astype(str).str.zfill(5), anio=lambda f: f["Year"])
    aged_1 = aged_1.groupby(["codigo_comuna", "anio"])["Death_count_all_cause"].sum()
    frame = ine.join(aged_1, how="left").fillna({"Death_count_all_cause": 0}).reset_index()
    return pd.DataFrame({"area": frame["codigo_comuna"], "region": frame["codigo_comuna"].str[:2],
                         "year": frame["anio"], "births": frame["nacimiento"],
                         "deaths": (frame["defuncion"] - frame["Death_count_all_cause"]).clip(lower=0)})


def all_levels(communes: pd.DataFrame) -> pd.DataFrame:
    regions = communes.groupby(["region", "year"], as_index=False)[["deaths", "births"]].sum()
    country = communes.groupby("year", as_index=False)[["deaths", "births"]].sum()
    return pd.concat([communes.assign(level="commune"), regions.assign(level="region", area=regions["region"]),
                      country.assign(level="country", area="00", region="00")], ignore_index=True)


def against_region(pooled: pd.DataFrame) -> pd.DataFrame:
    communes = pooled[pooled["level"] == "commune"]
    regions = pooled[pooled["level"] == "region"][["area", "period_start", "period_end", "deaths", "births", "rate"]]
    both = communes.merge(regions, left_on=["region", "period_start", "period_end"],
                          right_on=["area", "period_start", "period_end"], suffixes=("", "_region"))
    both["rr"] = both["rate"] / both["rate_region"]
    both["rap"] = both["rate"] - both["rate_region"]
    both["rap_pct"] = 100 * (both["rr"] - 1) / both["rr"]
    both["rr_rest_lower"], both["rr_rest_upper"] = rest_of_region_limits(both)
    return both


def main(raw: Path, out: Path) -> None:
    yearly = with_rates(all_levels(commune_years(raw)))
    first, last = int(yearly["year"].min()), int(yearly["year"].max())
    periods = [(first, last)] + [(y, y + 4) for y in range(first, last - 3, 5)]
    pooled = pd.concat([
        yearly[(yearly["year"] >= start) & (yearly["year"] <= end)]
        .groupby(["level", "area", "region"], as_index=False)[["deaths", "births"]].sum()
        .assign(period_start=start, period_end=end)
        for start, end in periods], ignore_index=True)
    pooled = with_rates(pooled)
    out.mkdir(parents=True, exist_ok=True)
    yearly.to_csv(out / "yearly_rates.csv", index=False)
    against_region(pooled).to_csv(out / "commune_vs_region.csv", index=False)
    glsar_trends(yearly, periods, ["level", "area"]).to_csv(out / "trends.csv", index=False)


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
