"""MINSAL's official rates below the country (fct_official_anchors), recomputed with pandas.

A second reader: MINSAL's CSV is read with pandas, and our side is derived again from the
bundled INE and DEIS files (INE deaths of all ages - DEIS deaths aged 1+, the publication rule of
docs/methods/core.md, "Which commune-years have a rate (bundled aggregates)": a commune's own rate needs births > 0 and 0 <= deaths <= births; a region
or the country sums every commune-year, signed). The acceptance figures of issue 42 part 4:
Chile 2017-2019 MINSAL 6.62 against the derived 6.80; regions derived / MINSAL median 1.024
(0.971 Los Ríos to 1.128 Magallanes); RM 6.24 against 6.07; every commune against MINSAL's
2011-2020 with ours over 2011-2019, the mismatch named.
"""

from __future__ import annotations

import shutil

import duckdb
import pandas as pd
import pytest
from scipy.stats import chi2

from conftest import REPO_ROOT, query, run_dbt
from raw_counts import derived_commune_years

RAW = REPO_ROOT / "data" / "raw"
MINSAL_FILE = "minsal_drdss_2023_infant_mortality_rates.csv"


@pytest.fixture(scope="module")
def minsal() -> pd.DataFrame:
    """MINSAL's both-sexes rows keyed like the warehouse: CL, region code, commune code."""
    frame = pd.read_csv(RAW / MINSAL_FILE, dtype=str, keep_default_na=False)
    frame = frame[~frame["unidad_territorial"].isin(["Chile - hombres", "Chile - mujeres"])]
    frame["area_level"] = ["country" if c == "0" else "region" if not cc else "commune"
                           for c, cc in zip(frame["codigo"], frame["codigo_comuna"])]
    frame["area_code"] = [("CL" if lvl == "country" else c.zfill(2) if lvl == "region" else cc)
                          for lvl, c, cc in zip(frame["area_level"], frame["codigo"], frame["codigo_comuna"])]
    for column in ("tmi_total_2017_2019", "tmi_total_2011_2020"):
        frame[column] = pd.to_numeric(frame[column].replace("", None))
    return frame.set_index(["area_level", "area_code"])


@pytest.fixture(scope="module")
def commune_years() -> pd.DataFrame:
    return derived_commune_years(RAW)


@pytest.fixture(scope="module")
def anchors(bundled_warehouse) -> pd.DataFrame:
    with duckdb.connect(str(bundled_warehouse), read_only=True) as con:
        frame = con.execute("select * from marts.fct_official_anchors").df()
    return frame.set_index(["area_level", "area_code", "minsal_period_label"])


def exact_limits(deaths: int, births: int) -> tuple[float, float]:
    """Garwood's exact Poisson 95% limits of a rate per 1000."""
    lower = chi2.ppf(0.025, 2 * deaths) / 2 if deaths > 0 else 0.0
    upper = chi2.ppf(0.975, 2 * (deaths + 1)) / 2
    return 1000 * lower / births, 1000 * upper / births


def test_chile_2017_2019_minsal_6_62_beside_the_derived_6_80(anchors, minsal, commune_years):
    years = commune_years[commune_years["year"].between(2017, 2019)]
    deaths, births = int(years["deaths"].sum()), int(years["births"].sum())
    row = anchors.loc[("country", "CL", "2017-2019")]
    ours = 1000 * deaths / births
    official = minsal.loc[("country", "CL"), "tmi_total_2017_2019"]
    assert (row["deaths"], row["live_births"], row["n_years"]) == (deaths, births, 3)
    assert row["rate_per_1000"] == pytest.approx(ours, rel=1e-12)
    assert round(official, 2) == 6.62
    # The derived 6.80: the country sums every commune-year signed (4,424 deaths: 6.795); the sum of
    # the published commune rows leaves out the unpublished commune-years (net -1 in 2017 and in
    # 2018: 4,426 deaths, 6.798). Both are "6.80" to the acceptance's precision.
    assert (deaths, births, round(ours, 3)) == (4424, 651105, 6.795)
    own = years[years["published"]]
    assert round(1000 * own["deaths"].sum() / births, 2) == 6.80
    assert row["unavailable_reason"] is None or pd.isna(row["unavailable_reason"])
    assert row["minsal_rate_per_1000"] == pytest.approx(official, rel=1e-12)
    assert row["rate_ratio"] == pytest.approx(ours / official, rel=1e-12)
    assert round(row["rate_ratio"], 3) == 1.027
    assert row["rate_difference_per_1000"] == pytest.approx(ours - official, rel=1e-9)
    lower, upper = exact_limits(deaths, births)
    assert (row["ci95_lower"], row["ci95_upper"]) == (pytest.approx(lower, rel=1e-6), pytest.approx(upper, rel=1e-6))
    assert row["is_minsal_within_ci"] == (lower <= official <= upper)
    assert row["period_mismatch"] == "same_period" and pd.isna(row["years_not_in_build"])
    assert row["count_basis"].startswith("derived: INE deaths all ages - DEIS deaths aged 1+")
    assert "fct_official_anchors" in row["count_basis"]


def test_regions_2017_2019_ratio_median_1_024_from_los_rios_to_magallanes(bundled_warehouse, anchors, minsal,
                                                                          commune_years):
    years = commune_years[commune_years["year"].between(2017, 2019)]
    sums = years.groupby("region")[["deaths", "births"]].sum()
    ratios = {}
    for region, (deaths, births) in sums.iterrows():
        row = anchors.loc[("region", region, "2017-2019")]
        official = minsal.loc[("region", region), "tmi_total_2017_2019"]
        assert (row["deaths"], row["live_births"]) == (deaths, births), region
        ratios[region] = (1000 * deaths / births) / official
        assert row["rate_ratio"] == pytest.approx(ratios[region], rel=1e-12), region
        lower, upper = exact_limits(int(deaths), int(births))
        assert bool(row["is_minsal_within_ci"]) == (lower <= official <= upper), region
    assert len(ratios) == 16
    ratios = pd.Series(ratios)
    assert round(ratios.median(), 3) == 1.024
    assert (ratios.idxmin(), round(ratios.min(), 3)) == ("14", 0.971)   # Los Ríos
    assert (ratios.idxmax(), round(ratios.max(), 3)) == ("12", 1.128)   # Magallanes
    rm = anchors.loc[("region", "13", "2017-2019")]
    assert (round(rm["rate_per_1000"], 2), round(rm["minsal_rate_per_1000"], 2)) == (6.24, 6.07)
    # The bundled data: every MINSAL rate lies inside our exact interval, so no audit row.
    assert query(bundled_warehouse, "select count(*) from marts.audit_data_quality "
                 "where check_name = 'minsal_rate_outside_interval_and_tolerance'") == [(0,)]


def test_every_commune_against_minsal_2011_2020_with_the_period_mismatch_named(anchors, minsal, commune_years):
    communes = anchors.xs("commune", level="area_level")
    assert len(communes) == 346
    assert set(communes.index.get_level_values("minsal_period_label")) == {"2011-2020"}
    assert set(communes["period_mismatch"]) == {"build_lacks_years"}
    assert set(communes["years_not_in_build"]) == {"2020"}
    assert set(zip(communes["period_start"], communes["period_end"])) == {(2011, 2019)}
    published = commune_years[commune_years["year"].between(2011, 2019) & commune_years["published"]]
    sums = published.groupby("commune")[["deaths", "births"]].sum()
    assert len(sums) == 346
    for commune, (deaths, births) in sums.iterrows():
        row = communes.loc[(commune, "2011-2020")]
        assert (row["deaths"], row["live_births"]) == (deaths, births), commune
        assert row["minsal_rate_per_1000"] == pytest.approx(minsal.loc[("commune", commune), "tmi_total_2011_2020"])
    # The correlation of the provenance note: 0.93 over the communes with 5,000 births or more.
    big = communes[communes["live_births"] >= 5000]
    assert len(big) == 97
    assert round(big["rate_per_1000"].astype(float).corr(big["minsal_rate_per_1000"].astype(float)), 2) == 0.93
    # Regions 2011-2020 carry the same mismatch; 2020 has MINSAL's figure and none of ours.
    assert set(anchors.xs("2011-2020", level="minsal_period_label")["period_mismatch"]) == {"build_lacks_years"}
    year_2020 = anchors.xs("2020", level="minsal_period_label")
    assert len(year_2020) == 17 and year_2020["rate_per_1000"].isna().all()
    assert set(year_2020["unavailable_reason"]) == {"period_not_in_build"}


MALFORMED = [
    ("unknown commune code", lambda line: line.replace("01101", "01199", 1).replace("1101,", "1199,", 1),
     "Unknown territorial unit in {path} line {line}"),
    ("rate that is not a number", lambda line: line.replace("6.2367544656373", "6.2x", 1),
     "Not a number in {path} line {line}"),
]


@pytest.mark.e2e  # fault injection
@pytest.mark.parametrize("case, mutate, message", MALFORMED, ids=[case for case, *_ in MALFORMED])
def test_a_malformed_line_stops_the_build_naming_file_and_line(tmp_path, case, mutate, message):
    raw = tmp_path / "raw"
    shutil.copytree(RAW, raw)
    path = raw / MINSAL_FILE
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    number = next(i for i, text in enumerate(lines, 1) if text.startswith("1101,Iquique"))
    lines[number - 1] = mutate(lines[number - 1])
    path.write_text("".join(lines), encoding="utf-8")
    result = run_dbt(["build", "--indirect-selection", "cautious", "--select", "+stg_minsal__drdss_2023_infant_mortality_rates"],
                     tmp_path / "db.duckdb",
                     {"raw_data_dir": str(raw)}, check=False)
    assert result.returncode != 0
    assert message.format(path=path, line=number) in result.stdout, result.stdout[-3000:]
