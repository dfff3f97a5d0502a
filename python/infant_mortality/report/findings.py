"""The text alternative of each figure: one or two sentences stating what it shows for its default
option (the region's rate and trend, the highest communes, those outside the funnel), written from
the marts' values and classes as they are (nothing is recomputed; the communes are ordered by the
mart's `rank_in_region`). The page puts each in the figure's caption, where screen readers and
everyone else read it."""

from __future__ import annotations

import pandas as pd

from infant_mortality.report.bym2_clusters import NOT_A_CLUSTER, is_island
from infant_mortality.report.combos import Combo, with_rate
from infant_mortality.report.formats import fmt, fmt_apc, fmt_ci, fmt_cri, unit
from infant_mortality.report.labels import cluster_label, indicator_short, trend_has_class, trend_label
from infant_mortality.report.style import CLUSTER_COLOURS
from infant_mortality.report.i18n import t

TOP_N = 3  # communes named as the highest


def _names(df: pd.DataFrame) -> str:
    return ", ".join(df["commune_name"]) if len(df) else t("finding.none")


def _area_rate(reg: dict | None) -> str:
    if reg is None:
        return t("finding.no_rate")
    return t("finding.rate", rate=fmt(reg["rate_per_1000"]), ci=fmt_ci(reg["ci95_lower"], reg["ci95_upper"]),
             unit=unit(reg["indicator"]))


def ranking_finding(comparison: pd.DataFrame, combo: Combo, region_name: str, reg: dict | None) -> str:
    df = with_rate(combo.select(comparison)).sort_values("rank_in_region")
    top = ", ".join(f"{r.commune_name} ({fmt(r.rate_per_1000)})" for r in df.head(TOP_N).itertuples())
    return t("finding.ranking", combo=combo.label, region=region_name, rate=_area_rate(reg), top=top or t("finding.none"),
             n_hi=int((df["comparison"] == "higher").sum()), n_lo=int((df["comparison"] == "lower").sum()),
             n=len(df))


def trends_finding(area_name: str, indicator: str, area_trend: dict | None, member_trends: pd.DataFrame,
                   members: str) -> str:
    """The reference area's trend, and how many of its members (communes, regions) are in each class."""
    counts = member_trends["trend"].fillna("not_estimable").value_counts()
    classes = "; ".join(f"{trend_label(cls).lower()}: {int(counts[cls])}" for cls in
                        ("increasing", "decreasing", "stationary", "not_estimable", "insufficient_data")
                        if cls in counts)
    if area_trend is None:
        head = t("finding.trend_none", area=area_name, ind=indicator_short(indicator))
    else:
        head = t("finding.trend", area=area_name, ind=indicator_short(indicator),
                 period=f"{int(area_trend['period_start'])}-{int(area_trend['period_end'])}",
                 cls=trend_label(area_trend["trend"]).lower(),
                 apc=fmt_apc(area_trend) if trend_has_class(area_trend) else t("apc.none"))
    return head + " " + t("finding.trend_members", members=members, classes=classes or t("finding.none"))


def funnel_finding(comparison: pd.DataFrame, combo: Combo, region_name: str, reg: dict | None) -> str:
    df = with_rate(combo.select(comparison)).sort_values("rank_in_region")
    by = {cat: df[df["funnel_category"] == cat] for cat in ("above_99_8", "above_95", "below_95", "below_99_8")}
    return t("finding.funnel", combo=combo.label, region=region_name, rate=_area_rate(reg),
             above_998=_names(by["above_99_8"]), above_95=_names(by["above_95"]),
             below_95=_names(by["below_95"]), below_998=_names(by["below_99_8"]))


def map_finding(comparison: pd.DataFrame, combo: Combo, region_name: str, significant: list[str],
                exceeding: list[str] | None, cut: float) -> str:
    df = with_rate(combo.select(comparison)).sort_values("rank_in_region")
    text = t("finding.map", combo=combo.label, region=region_name, top=_names(df.head(TOP_N)),
             outlined=", ".join(significant) or t("finding.none"))
    if exceeding is not None:
        text += " " + t("finding.map_exceeding", cut=fmt(cut), names=", ".join(exceeding) or t("finding.none"))
    return text


def bym2_finding(bym2: pd.DataFrame, combo: Combo, cut: float) -> str:
    """The highest BYM2 rates with their credible intervals, the communes whose BYM2 probability of
    exceeding the region's rate is above the cut-off, and the communes without neighbours."""
    df = combo.select(bym2).dropna(subset=["bym2_rate_per_1000"])
    df = df.sort_values(["bym2_rate_per_1000", "commune_name"], ascending=[False, True])
    top = ", ".join(f"{r.commune_name} {fmt(r.bym2_rate_per_1000)} ({fmt_cri(r.bym2_ci95_lower, r.bym2_ci95_upper)})"
                    for r in df.head(TOP_N).itertuples())
    text = t("finding.map_bym2", combo=combo.label, top=top or t("finding.none"), cut=fmt(cut, 2),
             names=_names(df[df["bym2_prob_exceeds_region"] > cut].sort_values("commune_name")))
    islands = df[[is_island(r) for r in df.to_dict("records")]]
    if len(islands):
        text += " " + t("finding.map_islands", names=_names(islands.sort_values("commune_name")))
    return text


def cluster_finding(clusters: pd.DataFrame, combo: Combo, alpha: float) -> str:
    """The communes of each cluster type (hot and cold spots, outliers) in the combo, or none; how
    many are not significant, and which have no neighbours to be tested with."""
    df = combo.select(clusters).sort_values("commune_name")
    by_type = {ty: g for ty, g in df.groupby("cluster_type")}
    for ty in by_type:
        cluster_label(ty)  # an unknown type stops the report, named
    found = "; ".join(f"{cluster_label(ty)}: {_names(by_type[ty])}" for ty in CLUSTER_COLOURS
                      if ty in by_type and ty not in NOT_A_CLUSTER)
    text = t("finding.map_clusters", alpha=fmt(alpha, 2), clusters=found or t("finding.none"),
             n=len(by_type.get("not significant", ())))
    if "no neighbours" in by_type:
        text += " " + t("finding.map_no_neighbours", names=_names(by_type["no neighbours"]))
    return text


def inequity_finding(inequality: pd.DataFrame, level: str, code: str, area_name: str, indicator: str,
                     stratifier: str, stratifier_label: str, gap: str) -> str:
    rows = inequality[(inequality["area_level"] == level) & (inequality["area_code"] == code)
                      & (inequality["indicator"] == indicator) & (inequality["stratifier"] == stratifier)
                      & (inequality["period_kind"] == "full_window")].set_index("measure")
    parts = []
    for m in ("RII", "SII"):
        if m in rows.index:
            r = rows.loc[m]
            parts.append(f"{m} {fmt(r['estimate'])} ({fmt_ci(r['ci95_lower'], r['ci95_upper'])})")
    return t("finding.inequity", area=area_name, ind=indicator_short(indicator), strat=stratifier_label,
             measures="; ".join(parts) or t("finding.none"), gap=gap or t("finding.none"))
