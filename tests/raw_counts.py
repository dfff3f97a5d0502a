"""Derived infant deaths and births per commune-year, computed with pandas from the bundled raw
files (INE deaths of all ages - DEIS deaths aged 1+): the tests' independent second computation
of what the warehouse counts (docs/methods/core.md, "Which commune-years have a rate (bundled aggregates)")."""

from __future__ import annotations

from pathlib import Path

import pandas as pd


def derived_commune_years(raw: Path) -> pd.DataFrame:
    """commune, year, deaths, births, region, and whether the count is published (births > 0 and
    0 <= deaths <= births)."""
    ine = pd.read_csv(raw / "ine_vital_statistics_chile_2010_2019.csv", dtype={"codigo_comuna": str})
    ine = ine[ine["sexo"] == "total"].pivot_table(index=["codigo_comuna", "anio"], columns="evento",
                                                  values="cantidad", aggfunc="sum")
    deis = pd.read_csv(raw / "deis_deaths_by_commune_year_sex_agegroup_1990_2019.csv")
    deis = deis[deis["Age group"] == "1+"].assign(
        codigo_comuna=lambda f: f["CODIGO_COMUNA_RESIDENCIA"].astype(str).str.zfill(5))
    aged_1_plus = deis.groupby(["codigo_comuna", "Year"])["Death_count_all_cause"].sum()
    aged_1_plus.index = aged_1_plus.index.set_names(["codigo_comuna", "anio"])
    frame = ine.join(aged_1_plus.rename("aged_1_plus"), how="left").fillna({"aged_1_plus": 0}).reset_index()
    frame["deaths"] = (frame["defuncion"] - frame["aged_1_plus"]).astype(int)
    frame["births"] = frame["nacimiento"].astype(int)
    frame["region"] = frame["codigo_comuna"].str[:2]
    frame["published"] = (frame["births"] > 0) & frame["deaths"].between(0, frame["births"])
    return frame.rename(columns={"codigo_comuna": "commune", "anio": "year"})
