"""4b. The map's options from the maps room's models, read from their marts and never recomputed:
the BYM2 posterior mean rate with its 95% credible interval and its probability of exceeding the
region's rate (`marts.fct_bym2_rates`), and the local Moran's I cluster types
(`marts.fct_spatial_clusters`).

The BYM2 rate is drawn on the same sequential scale as the crude and EB rates (choropleth.py);
here are the options drawn in classes: the probability in five classes (style.EXCEEDANCE_BOUNDS,
the page's binning of the mart's value) and the cluster types, each with a discrete legend whose
entries carry the colour and the hatching of their class, so colour is never the only channel.
A commune without neighbours (an island of the neighbour graph: its BYM2 effect is the
unstructured part alone, `component_size` 1) is cross-hatched on both BYM2 options and named in
their legend, the hover and the text alternative.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
import plotly.graph_objects as go

from infant_mortality.report.formats import fmt, fmt_cri, num, nums
from infant_mortality.report.i18n import t
from infant_mortality.report.labels import cluster_label, exceedance_class_label
from infant_mortality.report.style import (
    CLUSTER_COLOURS,
    CLUSTER_DARK,
    CLUSTER_PATTERNS,
    EXCEEDANCE_BOUNDS,
    EXCEEDANCE_COLOURS,
    ISLAND_PATTERN,
    ISLAND_SYMBOL,
    NO_DATA,
    NO_DATA_PATTERN,
    PATTERN_INK,
    PATTERN_INK_ON_DARK,
    scatter,
)

# Cluster types that are not a cluster: tested and not significant, or not tested (no neighbours).
NOT_A_CLUSTER = ("not significant", "no neighbours")


@dataclass(frozen=True)
class ModelMarts:
    """The rows of `marts.fct_bym2_rates` and `marts.fct_spatial_clusters` the map shows, and the
    build's false discovery rate of the clusters (`meta_build`, var `cluster_fdr_alpha`)."""

    bym2: pd.DataFrame
    clusters: pd.DataFrame
    cluster_alpha: float

    def of_communes(self, codes) -> "ModelMarts":
        """The rows of these communes only (one region's)."""
        return ModelMarts(self.bym2[self.bym2["commune_code"].isin(codes)],
                          self.clusters[self.clusters["commune_code"].isin(codes)], self.cluster_alpha)


def _text(x) -> str | None:
    return x if isinstance(x, str) else None


def is_island(row: dict) -> bool:
    """A commune whose BYM2 effect is the unstructured part only: alone in its part of the graph."""
    return num(row.get("component_size")) == 1 and num(row.get("bym2_rate_per_1000")) is not None


def is_cluster(cluster_type: str | None) -> bool:
    return cluster_type is not None and cluster_type not in NOT_A_CLUSTER


@dataclass
class ModelValues:
    """The BYM2 and cluster values of one indicator x period at each seat (None where there is none)."""

    bym2: list
    lower: list
    upper: list
    prob: list
    island: list[bool]
    cluster: list
    q: list

    @classmethod
    def of(cls, combo, bym2_by: dict, clusters_by: dict, codes: list[str]) -> "ModelValues":
        """`bym2_by` and `clusters_by`: the marts' rows by (commune, indicator, start, end) (`combos.rows_by_combo`)."""
        keys = [(c, combo.indicator, combo.period_start, combo.period_end) for c in codes]
        b = [bym2_by.get(k) or {} for k in keys]
        k = [clusters_by.get(key) or {} for key in keys]
        return cls([num(r.get("bym2_rate_per_1000")) for r in b], [num(r.get("bym2_ci95_lower")) for r in b],
                   [num(r.get("bym2_ci95_upper")) for r in b], [num(r.get("bym2_prob_exceeds_region")) for r in b],
                   [is_island(r) for r in b], [_text(r.get("cluster_type")) for r in k],
                   [num(r.get("q_value")) for r in k])

    def customdata(self, j: int) -> list:
        """The seat's values as the hover trace carries them (CUSTOMDATA)."""
        return [self.bym2[j], self.lower[j], self.upper[j], self.prob[j], self.cluster[j], self.q[j], self.island[j]]


# The names of ModelValues.customdata's values: the marts' columns, and whether the commune is an island.
CUSTOMDATA = ("bym2_rate_per_1000", "bym2_ci95_lower", "bym2_ci95_upper", "bym2_prob_exceeds_region", "cluster_type",
              "q_value", "island")


def exceedance_class(p: float | None) -> int | None:
    """The class of a probability: 0 below 0.05, 1 from 0.05, 2 from 0.2 to 0.8, 3 up to 0.95,
    4 above 0.95 (closed towards the middle, so the top class is `> 0.95` as the outline's cut)."""
    if p is None:
        return None
    low, lower_mid, upper_mid, high = EXCEEDANCE_BOUNDS
    if p < lower_mid:
        return 0 if p < low else 1
    if p <= upper_mid:
        return 2
    return 3 if p <= high else 4


def hover_lines(m: ModelValues, j: int) -> str:
    """The seat's BYM2 and cluster lines of the map's hover (each after a `<br>`)."""
    out = ""
    if m.bym2[j] is not None:
        out += "<br>" + t("map.hover.bym2", rate=fmt(m.bym2[j]), cri=fmt_cri(m.lower[j], m.upper[j]),
                          prob=fmt(m.prob[j], 3))
        if m.island[j]:
            out += "<br>" + t("map.island")
    if m.cluster[j] is not None:
        q = "" if m.q[j] is None else f", q {fmt(m.q[j], 3)}"
        out += "<br>" + t("map.hover.cluster", type=cluster_label(m.cluster[j]), q=q)
    return out


def add_key(fig: go.Figure, combo, measure: str, key: str, label: str, colour: str, pattern: str,
            ink: str = PATTERN_INK) -> int:
    """One entry of a discrete legend (an empty filled trace: its swatch shows colour and hatching); its index."""
    fig.add_trace(scatter(x=[None, None], y=[None, None], mode="lines", fill="toself", name=label,
                          line=dict(color="#777", width=1),  # a white swatch stays visible
                          fillcolor=colour, fillpattern=dict(shape=pattern, fgcolor=ink, size=7),
                          meta=dict(figure="map", kind="legend", combo=combo.key, measure=measure, key=key)))
    return len(fig.data) - 1


def island_patterns(m: ModelValues) -> list[str]:
    return [ISLAND_PATTERN if island else "" for island in m.island]


def island_keys(fig: go.Figure, geo, combo, measure: str, m: ModelValues) -> list[int]:
    """A diamond at the label point of each commune without neighbours, on every panel, named once
    in the legend; none when no such commune is drawn. `geo`: the map's `choropleth.MapGeometry`."""
    if not any(m.island):
        return []
    seats = geo.seats[m.island]
    shown = []
    for k, (xa, ya) in enumerate(geo.panels):
        shown.append(len(fig.data))
        fig.add_trace(scatter(
            x=nums(seats["longitude"]), y=nums(seats["latitude"]), xaxis=xa, yaxis=ya, mode="markers",
            marker=dict(symbol=ISLAND_SYMBOL, size=18, color="#000", line=dict(width=2)), name=t("map.island"),
            showlegend=k == 0, hoverinfo="skip", customdata=seats["commune_code"].tolist(),
            meta=dict(figure="map", kind="legend", combo=combo.key, measure=measure, key="island", panel=k)))
    return shown


def no_value_keys(fig: go.Figure, combo, measure: str, values: list, key: str = "no_estimate") -> list[int]:
    """The legend key of the communes without a value (grey and hatched, as they are drawn), when
    there are any; `key` names it: "no_estimate" on the maps of the models, "no_value" elsewhere."""
    if all(v is not None for v in values):
        return []
    return [add_key(fig, combo, measure, key, t(f"map.{key}"), NO_DATA, NO_DATA_PATTERN)]


def exceedance_option(fig: go.Figure, geo, combo, m: ModelValues, cut: float) -> dict | None:
    """The BYM2 probability of exceeding the region's rate in its five classes (all five in the
    legend, as a scale), islands hatched, above the build's cut-off outlined; None without values."""
    classes = [exceedance_class(p) for p in m.prob]
    if all(c is None for c in classes):
        return None
    shown = [add_key(fig, combo, "bym2_exceedance", f"class_{k}", exceedance_class_label(k), colour, "")
             for k, colour in enumerate(EXCEEDANCE_COLOURS)]
    shown += island_keys(fig, geo, combo, "bym2_exceedance", m) + no_value_keys(fig, combo, "bym2_exceedance",
                                                                                   classes)
    patterns = [NO_DATA_PATTERN if c is None else island for c, island in zip(classes, island_patterns(m))]
    return dict(fills=[NO_DATA if c is None else EXCEEDANCE_COLOURS[c] for c in classes], patterns=patterns,
                outline=[p is not None and p > cut for p in m.prob], shown=shown,
                what=t("map.what.bym2", cut=fmt(cut, 2)))


def clusters_option(fig: go.Figure, combo, m: ModelValues, alpha: float) -> dict | None:
    """The cluster type of each commune, by colour and hatching; the legend lists exactly the types
    drawn; the communes in a cluster are outlined. None when no commune has a type."""
    if all(c is None for c in m.cluster):
        return None
    drawn = {c for c in m.cluster if c is not None}
    shown = [add_key(fig, combo, "clusters", ty, cluster_label(ty), CLUSTER_COLOURS[ty], CLUSTER_PATTERNS[ty],
                     _ink(ty)) for ty in sorted(drawn, key=_legend_order)]
    shown += no_value_keys(fig, combo, "clusters", m.cluster)
    return dict(fills=[CLUSTER_COLOURS[c] if c else NO_DATA for c in m.cluster],
                patterns=[CLUSTER_PATTERNS[c] if c else NO_DATA_PATTERN for c in m.cluster],
                inks=[_ink(c) for c in m.cluster],
                outline=[is_cluster(c) for c in m.cluster], shown=shown,
                what=t("map.what.clusters", alpha=fmt(alpha, 2)))


def _ink(cluster_type: str | None) -> str:
    return PATTERN_INK_ON_DARK if cluster_type in CLUSTER_DARK else PATTERN_INK


def _legend_order(cluster_type: str) -> int:
    """The legend's order (style.CLUSTER_COLOURS'); an unknown type stops the report with its name."""
    cluster_label(cluster_type)
    return list(CLUSTER_COLOURS).index(cluster_type)


def model_table_rows(models: ModelMarts, combos) -> list[list]:
    """The data of the BYM2 and cluster maps, one row per commune and indicator x period (highest
    BYM2 rate first): the figure's text alternative as a sortable table."""
    clusters = models.clusters.set_index(["commune_code", "indicator", "period_start", "period_end"])
    rows = []
    for combo in combos:
        df = combo.select(models.bym2).sort_values(["bym2_rate_per_1000", "commune_name"],
                                                   ascending=[False, True], na_position="last")
        for r in df.to_dict("records"):
            key = (r["commune_code"], combo.indicator, combo.period_start, combo.period_end)
            c = clusters.loc[key].to_dict() if key in clusters.index else {}
            p, k = num(r["bym2_prob_exceeds_region"]), exceedance_class(num(r["bym2_prob_exceeds_region"]))
            cluster_type = _text(c.get("cluster_type"))
            rows.append([r["commune_name"], combo.label, [fmt(r["bym2_rate_per_1000"]), num(r["bym2_rate_per_1000"])],
                         fmt_cri(r["bym2_ci95_lower"], r["bym2_ci95_upper"]) if p is not None else t("missing"),
                         [fmt(p, 3), p], exceedance_class_label(k) if k is not None else t("missing"),
                         t("map.island") if is_island(r) else "",
                         cluster_label(cluster_type) if cluster_type else t("missing"),
                         [fmt(c.get("q_value"), 3), num(c.get("q_value"))]])
    return rows


MODEL_TABLE_HEADERS = ("col.commune_name", "col.combo", "col.bym2", "col.cri", "col.bym2_prob", "col.bym2_class",
                       "col.spatial_part", "col.cluster_type", "col.q_value")
