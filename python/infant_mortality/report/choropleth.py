"""4. Map: a choropleth of the communes on their polygons (IDE Chile DPA 2023, through
``infant_mortality.geography.display.communes_geojson``), drawn on plain longitude/latitude axes (no tiles:
the report works offline).

One option of the dropdown per indicator x period and measure: the crude pooled rate, the
empirical Bayes smoothed rate (`marts.fct_smoothed_rates`), the BYM2 posterior mean rate
(`marts.fct_bym2_rates`; the three rates on one colour scale), RT (`marts.fct_commune_vs_region`),
the probability that the commune's rate exceeds its region's (empirical Bayes, then BYM2 in
classes), the local Moran's I clusters (`marts.fct_spatial_clusters`), and the trend class. A
thick black outline marks the communes that are significant for the measure shown (mid-p of the
comparison with the rest of the region, probability of exceeding above the build's
`exceedance_probability_threshold`, from meta_build, or a cluster). The BYM2 and cluster options
are drawn by ``bym2_clusters``.

Two panels when the region has a dense core (Santiago): the whole region with the core framed,
and the core enlarged; on a phone they are stacked. Each polygon is one trace (so it can have
its own fill); the dropdown restyles the fills and outlines of all of them at once.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
import plotly.colors as pc
import plotly.graph_objects as go

from infant_mortality.report.bym2_clusters import (
    CUSTOMDATA,
    ModelMarts,
    ModelValues,
    clusters_option,
    exceedance_option,
    hover_lines,
    island_keys,
    island_patterns,
    no_value_keys,
)
from infant_mortality.report.combos import combos_of, menu, rows_by_combo, with_rate
from infant_mortality.report.formats import fmt, fmt_apc, fmt_ci, fmt_p, num, nums, unit
from infant_mortality.report.labels import indicator_order, indicator_short, trend_label
from infant_mortality.report.style import (
    ASSUMED_WIDTH,
    NO_DATA,
    NO_DATA_PATTERN,
    PATTERN_INK,
    TREND_COLOURS,
    TREND_PATTERNS,
    base_layout,
    legend_below,
    narrow_layout,
    place_labels,
    scatter,
)
from infant_mortality.report.i18n import t

RT_TICKS = (0.25, 0.5, 0.67, 0.8, 1.0, 1.25, 1.5, 2.0, 4.0)
RT_SPAN_MAX = 2.0  # log2: the colour scale never spans more than RT 1/4 to 4
# Seats farther than this from the region's median longitude or latitude (islands such as Rapa
# Nui) would squash the map: they are listed in a note instead.
MAP_OUTLIER_DEGREES = 5.0
HEIGHT = 800
# The measures of each indicator x period, in the menu's order (the rates, RT, the probabilities, the clusters).
MEASURES = ("crude", "smoothed", "bym2", "rate_ratio", "exceedance", "bym2_exceedance", "clusters")
# Measures shown only where their mart has values for the indicator and period.
OPTIONAL_MEASURES = ("smoothed", "bym2", "exceedance", "bym2_exceedance", "clusters")
# What the hover traces carry per commune (`customdata`): the marts' columns.
MAP_CUSTOMDATA = ("commune_name", "rate_per_1000", "eb_global_rate_per_1000", "prob_exceeds_region", "rate_ratio",
                  *CUSTOMDATA)
# Type size (px) of the commune names, on a desktop and on a phone (readable: never below 11).
LABEL_FONT_PX, LABEL_FONT_PX_NARROW = 10, 11


def map_layout_boxes(lon, lat):
    """Where the map's panels look: (kept mask, overview box, zoom box or None).

    The zoom box encloses the dense core of the region (the inter-quartile box of the seats,
    widened by 0.6 times its size on each side); it is used only when it holds at least 8 seats
    and covers less than a third of the overview.
    """
    lon, lat = np.asarray(lon, float), np.asarray(lat, float)
    ok = np.isfinite(lon) & np.isfinite(lat)
    if ok.any():
        ok &= (np.abs(lon - np.nanmedian(lon[ok])) <= MAP_OUTLIER_DEGREES) & (
            np.abs(lat - np.nanmedian(lat[ok])) <= MAP_OUTLIER_DEGREES
        )
    if not ok.any():
        return ok, None, None
    x, y = lon[ok], lat[ok]
    (x1, x3), (y1, y3) = np.quantile(x, [0.25, 0.75]), np.quantile(y, [0.25, 0.75])
    wx, wy = max(x3 - x1, 0.02), max(y3 - y1, 0.02)
    zoom = (x1 - 0.6 * wx, x3 + 0.6 * wx, y1 - 0.6 * wy, y3 + 0.6 * wy)
    inside = (x >= zoom[0]) & (x <= zoom[1]) & (y >= zoom[2]) & (y <= zoom[3])
    return ok, (x.min(), x.max(), y.min(), y.max()), (zoom if inside.sum() >= 8 else None)


def _rings(geometry: dict) -> list[list]:
    """Exterior rings of a GeoJSON Polygon / MultiPolygon."""
    if geometry["type"] == "Polygon":
        return [geometry["coordinates"][0]]
    return [poly[0] for poly in geometry["coordinates"]]


def _path(rings: list[list]) -> tuple[list, list]:
    xs, ys = [], []
    for ring in rings:
        if xs:
            xs.append(None)
            ys.append(None)
        xs += [p[0] for p in ring]
        ys += [p[1] for p in ring]
    return xs, ys


def _bounds(rings_by_code: dict, codes) -> tuple | None:
    pts = [p for c in codes for ring in rings_by_code.get(c, []) for p in ring]
    if not pts:
        return None
    arr = np.asarray(pts, float)
    return arr[:, 0].min(), arr[:, 0].max(), arr[:, 1].min(), arr[:, 1].max()


# Colour scales, trimmed of their darkest ends so that black names stay readable on any fill.
SCALES = {
    "sequential": [[i / 10, c] for i, c in enumerate(pc.sample_colorscale("YlOrRd", [0.02 + 0.68 * i / 10 for i in range(11)]))],
    "diverging": [[i / 10, c] for i, c in enumerate(pc.sample_colorscale("RdBu_r", [0.12 + 0.76 * i / 10 for i in range(11)]))],
}


def _colours(values, scale: str, lo: float, hi: float) -> list[str]:
    """The fill of each value on the scale (saturating beyond lo and hi); NO_DATA for none."""
    values = nums(values)
    points = [min(1.0, max(0.0, (v - lo) / (hi - lo) if hi > lo else 0.5)) for v in values if v is not None]
    # One call for all the points: plotly validates the whole scale on every call, and samples
    # each point on its own.
    sampled = iter(pc.sample_colorscale(SCALES[scale], points) if points else [])
    return [NO_DATA if v is None else next(sampled) for v in values]


@dataclass
class MapGeometry:
    """Where the map's panels look: the seats drawn (the communes with a polygon, near the region),
    the zoom box of the dense core (or None), each panel's axes, domain and box."""

    seats: pd.DataFrame  # commune_code, commune_name, latitude, longitude of the communes drawn
    rings_by_code: dict
    not_shown: list[str]  # the compared communes left off the map
    zoom: tuple | None
    ratio: float  # degrees of longitude per degree of latitude on screen
    panels: list[tuple[str, str]]
    domains: list[tuple[float, float]]
    boxes: list[tuple | None]
    in_core: np.ndarray  # which seats the enlarged panel shows

    @property
    def codes(self) -> list[str]:
        return self.seats["commune_code"].tolist()


PLOT_W, PLOT_H = ASSUMED_WIDTH - 150, HEIGHT - 200


def _fill_box(box, domain, ratio: float, pad: float) -> tuple:
    """Pad the box, then widen its shorter side so that, at equal distances, it fills its panel."""
    x0, x1, y0, y1 = box
    px, py = pad * (x1 - x0) + 0.005, pad * (y1 - y0) + 0.005
    x0, x1, y0, y1 = x0 - px, x1 + px, y0 - py, y1 + py
    w_px = (domain[1] - domain[0]) * PLOT_W
    need_w = (y1 - y0) * ratio * w_px / PLOT_H
    if need_w > x1 - x0:
        c = (x0 + x1) / 2
        return (c - need_w / 2, c + need_w / 2, y0, y1)
    need_h = (x1 - x0) * PLOT_H / w_px / ratio
    c = (y0 + y1) / 2
    return (x0, x1, c - need_h / 2, c + need_h / 2)


def map_geometry(comparison: pd.DataFrame, communes: pd.DataFrame, geojson: dict) -> MapGeometry:
    """The seats of the compared communes on their polygons, and the one or two panels showing them."""
    rings_by_code = {f["properties"]["commune_code"]: _rings(f["geometry"]) for f in geojson["features"]}
    seats = comparison[["commune_code", "commune_name"]].drop_duplicates("commune_code").merge(
        communes[["commune_code", "latitude", "longitude"]], on="commune_code", how="left")
    kept, _, zoom = map_layout_boxes(seats["longitude"], seats["latitude"])
    seats = seats[kept.tolist()]
    seats = seats[seats["commune_code"].isin(rings_by_code)]
    not_shown = sorted(set(comparison["commune_name"].dropna()) - set(seats["commune_name"]))
    overview = _bounds(rings_by_code, seats["commune_code"].tolist())
    mean_lat = float(seats["latitude"].mean()) if len(seats) else 0.0
    ratio = 1.0 / max(0.2, math.cos(math.radians(mean_lat)))
    panels = [("x", "y")] + ([("x2", "y2")] if zoom is not None else [])
    domains = [(0.0, 0.47), (0.53, 0.95)] if zoom is not None else [(0.0, 0.9)]
    boxes = [_fill_box(overview, domains[0], ratio, 0.04)] if overview else [None]
    in_core = np.zeros(len(seats), bool)
    if zoom is not None:
        lon, lat = seats["longitude"].to_numpy(float), seats["latitude"].to_numpy(float)
        in_core = (lon >= zoom[0]) & (lon <= zoom[1]) & (lat >= zoom[2]) & (lat <= zoom[3])
        # The enlarged panel frames the seats of the core with a margin (names are not cut).
        core = seats[in_core]
        boxes.append(_fill_box((core["longitude"].min(), core["longitude"].max(), core["latitude"].min(),
                                core["latitude"].max()), domains[1], ratio, 0.10))
    return MapGeometry(seats, rings_by_code, not_shown, zoom, ratio, panels, domains, boxes, in_core)


def _panel_name(k: int) -> str:
    return "overview" if k == 0 else "zoom"


def add_polygons(fig: go.Figure, geo: MapGeometry) -> list[int]:
    """One trace per commune and panel (the menu restyles their fill and outline); their indexes."""
    poly_idx = []
    for k, (xa, ya) in enumerate(geo.panels):
        for code in geo.seats["commune_code"]:
            xs, ys = _path(geo.rings_by_code[code])
            poly_idx.append(len(fig.data))
            fig.add_trace(scatter(x=xs, y=ys, xaxis=xa, yaxis=ya, mode="lines", fill="toself", fillcolor=NO_DATA,
                                  line=dict(color="#777", width=0.6), hoverinfo="skip", showlegend=False,
                                  meta=dict(figure="map", kind="polygon", commune_code=code, panel=_panel_name(k))))
    return poly_idx


def _label_positions(geo: MapGeometry, k: int, df: pd.DataFrame) -> list[str]:
    x0, x1, y0, y1 = geo.boxes[k]
    w_dom = (geo.domains[k][1] - geo.domains[k][0]) * PLOT_W
    scale = min(w_dom / (x1 - x0), PLOT_H / ((y1 - y0) * geo.ratio))
    xs = ((df["longitude"].to_numpy(float) - x0) * scale).tolist()
    ys = ((df["latitude"].to_numpy(float) - y0) * scale * geo.ratio).tolist()
    return place_labels(xs, ys, df["commune_name"].tolist(), [5.0] * len(df),
                        (0, (x1 - x0) * scale, 0, (y1 - y0) * scale * geo.ratio), font_px=LABEL_FONT_PX)


def add_names(fig: go.Figure, geo: MapGeometry, comparison: pd.DataFrame) -> None:
    """Names at the seats: outside the core in the overview, inside it in the enlarged panel. The
    communes with the most live births first: report.js hides a name that would overlap an earlier one."""
    births = comparison.groupby("commune_code")["live_births"].max()
    seats = geo.seats.assign(_births=geo.seats["commune_code"].map(births).fillna(0))
    for k, (xa, ya) in enumerate(geo.panels):
        df = (seats[geo.in_core] if k else seats[~geo.in_core]).sort_values("_births", ascending=False)
        if df.empty:
            continue
        fig.add_trace(scatter(
            x=nums(df["longitude"]), y=nums(df["latitude"]), xaxis=xa, yaxis=ya, mode="text",
            text=df["commune_name"].tolist(), textposition=_label_positions(geo, k, df),
            textfont=dict(size=LABEL_FONT_PX, color="#222"), hoverinfo="skip", showlegend=False,
            meta=dict(figure="map", kind="labels", panel=_panel_name(k), collide=True,
                      narrow={"textfont.size": LABEL_FONT_PX_NARROW})))


@dataclass
class ComboValues:
    """The values of one indicator x period at each seat (None where there is none)."""

    rows: pd.DataFrame  # the combo's rows with a rate, by commune_code
    crude: list
    eb: list
    prob: list
    rt: list
    significant: list[bool]

    @classmethod
    def of(cls, combo, comparison: pd.DataFrame, smooth_by: dict, codes: list[str]) -> "ComboValues":
        df = with_rate(combo.select(comparison)).set_index("commune_code")
        sm = [smooth_by.get((c, combo.indicator, combo.period_start, combo.period_end)) or {} for c in codes]
        return cls(df, [num(df["rate_per_1000"].get(c)) for c in codes],
                   [num(s.get("eb_global_rate_per_1000")) for s in sm],
                   [num(s.get("prob_exceeds_region")) for s in sm],
                   [num(df["rate_ratio"].get(c)) for c in codes],
                   [df["comparison"].get(c) in ("higher", "lower") for c in codes])


def _hover_text(combo, name: str, r, e, p, trend: dict | None) -> str:
    return t(
        "map.hover", name=name, combo=combo.label, rate=fmt(r.rate_per_1000), unit=unit(combo.indicator),
        ci=fmt_ci(r.ci95_lower, r.ci95_upper), eb=fmt(e), prob=fmt(p, 3), rt=fmt(r.rate_ratio),
        rt_ci=fmt_ci(r.rate_ratio_ci95_lower, r.rate_ratio_ci95_upper),
        comparison=t(f"comparison.short.{r.comparison}") if isinstance(r.comparison, str) else "",
        p=fmt_p(r.p_value),
        trend=t("map.hover.trend_none") if trend is None else t("map.hover.trend", cls=trend_label(trend["trend"]),
                                                                 apc=fmt_apc(trend)))


def add_hover(fig: go.Figure, geo: MapGeometry, combo, v: ComboValues, m: ModelValues, trend_by: dict) -> list[int]:
    """One invisible marker per seat and panel carrying the combo's numbers; the traces' indexes."""
    hover = []
    for j, (c, name, e, p) in enumerate(zip(geo.codes, geo.seats["commune_name"], v.eb, v.prob)):
        if c not in v.rows.index:
            hover.append(t("map.hover.no_rate", name=name, period=combo.period_label))
        else:
            hover.append(_hover_text(combo, name, v.rows.loc[c], e, p, trend_by.get((combo.indicator, c)))
                         + hover_lines(m, j))
    hover_idx = []
    for k, (xa, ya) in enumerate(geo.panels):
        hover_idx.append(len(fig.data))
        fig.add_trace(scatter(
            x=nums(geo.seats["longitude"]), y=nums(geo.seats["latitude"]), xaxis=xa, yaxis=ya, mode="markers",
            marker=dict(size=14, opacity=0), hovertext=hover, hovertemplate="%{hovertext}<extra></extra>",
            customdata=[[n, cr, e, p, r, *m.customdata(j)] for j, (n, cr, e, p, r) in
                        enumerate(zip(geo.seats["commune_name"], v.crude, v.eb, v.prob, v.rt))],
            showlegend=False, meta=dict(figure="map", kind="hover", combo=combo.key, panel=_panel_name(k))))
    return hover_idx


def measure_scales(combo, v: ComboValues, m: ModelValues, exceedance_cut: float) -> dict:
    """Per measure drawn on a colour scale: (values, colour scale, low, high, outlined, colour bar
    settings). The three rates share one scale, from the 10th to the 90th percentile of them all."""
    rates = [x for x in v.crude + v.eb + m.bym2 if x is not None]
    lo_rate, hi_rate = (float(np.quantile(rates, 0.1)), float(np.quantile(rates, 0.9))) if rates else (0.0, 1.0)
    positive = [abs(math.log2(x)) for x in v.rt if x is not None and x > 0]
    span = min(RT_SPAN_MAX, max(math.log2(1.5), max(positive, default=0.0)))
    log_rt = [None if x is None else (math.log2(x) if x > 0 else -span) for x in v.rt]
    sig_p = [p is not None and p > exceedance_cut for p in v.prob]
    rt_ticks = [tick for tick in RT_TICKS if abs(math.log2(tick)) <= span + 1e-9]
    rate_bar = t("map.bar.rate", unit=unit(combo.indicator))
    return {
        "crude": (v.crude, "sequential", lo_rate, hi_rate, v.significant, dict(title=rate_bar)),
        "smoothed": (v.eb, "sequential", lo_rate, hi_rate, v.significant, dict(title=rate_bar)),
        "bym2": (m.bym2, "sequential", lo_rate, hi_rate, [p is not None and p > exceedance_cut for p in m.prob],
                 dict(title=rate_bar)),
        "rate_ratio": (log_rt, "diverging", -span, span, v.significant,
                       dict(title="RT", tickvals=[math.log2(tick) for tick in rt_ticks],
                            ticktext=[fmt(tick, 2).rstrip("0").rstrip(",.") for tick in rt_ticks])),
        "exceedance": (v.prob, "diverging", 0.0, 1.0, sig_p, dict(title=t("map.bar.exceedance"))),
    }


COLOURBAR_NARROW = {"marker.colorbar.orientation": "h", "marker.colorbar.x": 0, "marker.colorbar.xanchor": "left",
                    "marker.colorbar.y": -0.05, "marker.colorbar.yanchor": "top", "marker.colorbar.len": 0.8,
                    "marker.colorbar.thickness": 10}


def add_colourbar(fig: go.Figure, combo, measure: str, scale: str, lo: float, hi: float, bar: dict) -> int:
    """The colour bar of a measure (an empty trace showing only its scale); its index."""
    bar = dict(bar)
    fig.add_trace(scatter(
        x=[None], y=[None], mode="markers", hoverinfo="skip", showlegend=False,
        marker=dict(color=[lo], colorscale=SCALES[scale], cmin=lo, cmax=hi, showscale=True,
                    colorbar=dict(title=dict(text=bar.pop("title"), font=dict(size=12)), len=0.6,
                                  thickness=14, x=1.0, xanchor="left", **bar)),
        meta=dict(figure="map", kind="colourbar", combo=combo.key, measure=measure, narrow=dict(COLOURBAR_NARROW))))
    return len(fig.data) - 1


def scale_option(fig: go.Figure, geo: MapGeometry, combo, measure: str, scale_spec: tuple, m: ModelValues,
                 exceedance_cut: float) -> dict | None:
    """A measure drawn on a colour scale with its colour bar (the BYM2 rate with its islands
    hatched and named in the legend); None when its mart has no value for the combo."""
    values, scale, lo, hi, outline, bar = scale_spec
    if measure in OPTIONAL_MEASURES and all(x is None for x in values):
        return None
    shown = [add_colourbar(fig, combo, measure, scale, lo, hi, bar)]
    patterns = [""] * len(values)
    if measure == "bym2":
        patterns, shown = island_patterns(m), shown + island_keys(fig, geo, combo, measure, m)
    # Without a value a commune is grey and hatched: a bare grey would read as the scale's middle
    # (RT 1 on the diverging scale).
    present = nums(values)
    patterns = [NO_DATA_PATTERN if v is None else p for v, p in zip(present, patterns)]
    shown += no_value_keys(fig, combo, measure, present, "no_value")
    cut = fmt(exceedance_cut, 2)
    what = {"exceedance": t("map.what.exceedance", cut=cut), "bym2": t("map.what.bym2", cut=cut)}
    return dict(fills=_colours(present, scale, lo, hi), patterns=patterns, outline=outline, shown=shown,
                what=what.get(measure, t("map.what.significant")))


def combo_options(fig: go.Figure, geo: MapGeometry, combo, v: ComboValues, m: ModelValues, hover_idx: list[int],
                  region_name: str, exceedance_cut: float, cluster_alpha: float) -> list[dict]:
    """The menu options of one indicator x period: one per measure it has values for."""
    options = []
    scales = measure_scales(combo, v, m, exceedance_cut)
    for measure in MEASURES:
        if measure == "bym2_exceedance":
            drawn = exceedance_option(fig, geo, combo, m, exceedance_cut)
        elif measure == "clusters":
            drawn = clusters_option(fig, combo, m, cluster_alpha)
        else:
            drawn = scale_option(fig, geo, combo, measure, scales[measure], m, exceedance_cut)
        if drawn is None:
            continue
        name = t(f"map.{measure}")
        options.append(dict(
            label=t("map.option", measure=name, combo=combo.label), combo=combo.key, measure=measure,
            title=t("map.title", measure=name, combo=combo.label, region=region_name, what=drawn["what"]),
            fills=drawn["fills"], patterns=drawn["patterns"], inks=drawn.get("inks"), outline=drawn["outline"],
            shown=[*drawn["shown"], *hover_idx],
            significant=[n for n, sig in zip(geo.seats["commune_name"], drawn["outline"]) if sig]))
    return options


def trend_option(fig: go.Figure, geo: MapGeometry, ind: str, window, combos, trend_by: dict, region_name: str,
                 method_name: str) -> dict | None:
    """The menu option of an indicator's trend class (its widest window), with its legend keys;
    None when no commune has a class."""
    classes = [(trend_by.get((ind, c)) or {}).get("trend") for c in geo.codes]
    if all(c is None for c in classes):
        return None
    legend_idx = []
    # Each class drawn, then a commune with no trend row (no rate in the window): grey and hatched.
    keys = [(t("map.trend.legend", cls=trend_label(cls)), TREND_COLOURS[cls], TREND_PATTERNS[cls], {})
            for cls in TREND_COLOURS if cls in classes]
    if None in classes:
        keys.append((t("map.no_value"), NO_DATA, NO_DATA_PATTERN, {"key": "no_value"}))
    for name, colour, pattern, extra in keys:
        legend_idx.append(len(fig.data))
        fig.add_trace(scatter(x=[None, None], y=[None, None], mode="none", fill="toself", name=name,
                              fillcolor=colour, fillpattern=dict(shape=pattern, fgcolor="#222", size=7),
                              meta=dict(figure="map", kind="trend_legend", indicator=ind, **extra)))
    base = next((c for c in combos if c.indicator == ind and (c.period_start, c.period_end) == tuple(window)), None)
    hover_idx = [] if base is None else [i for i, tr in enumerate(fig.data)
                                         if (tr.meta or {}).get("kind") == "hover" and tr.meta["combo"] == base.key]
    period = f"{window[0]}-{window[1]}"
    return dict(
        label=t("map.trend.option", period=period, ind=indicator_short(ind)), combo=None, measure="trend",
        title=t("map.trend.title", period=period, method=method_name, ind=indicator_short(ind), region=region_name),
        fills=[TREND_COLOURS.get(c, NO_DATA) if c else NO_DATA for c in classes],
        patterns=[TREND_PATTERNS.get(c, "") if c else NO_DATA_PATTERN for c in classes],
        outline=[False] * len(geo.codes), shown=legend_idx + hover_idx, significant=[])


def with_restyles(fig: go.Figure, options: list[dict], poly_idx: list[int], n_panels: int) -> list[dict]:
    """Each option with its plotly restyle: the traces shown and every polygon's fill and outline."""
    n, n_codes = len(fig.data), len(poly_idx) // max(n_panels, 1)
    labels_idx = [i for i, tr in enumerate(fig.data) if (tr.meta or {}).get("kind") == "labels"]
    for opt in options:
        visible = [False] * n
        for i in poly_idx + labels_idx + opt["shown"]:
            visible[i] = True
        fills, patterns, inks, widths, colours = [None] * n, [None] * n, [None] * n, [None] * n, [None] * n
        for p in range(n_panels):
            for j in range(n_codes):
                i = poly_idx[p * n_codes + j]
                fills[i] = opt["fills"][j]
                patterns[i] = opt["patterns"][j]
                inks[i] = (opt.get("inks") or [PATTERN_INK] * n_codes)[j]
                widths[i] = 2.6 if opt["outline"][j] else 0.6
                colours[i] = "#000" if opt["outline"][j] else "#777"
        opt["restyle"] = {"visible": visible, "fillcolor": fills, "fillpattern.shape": patterns,
                          "fillpattern.fgcolor": inks, "line.width": widths, "line.color": colours}
    return options


def draw_default(fig: go.Figure, buttons: list[dict], poly_idx: list[int]) -> None:
    """The default option (the first) drawn as built."""
    if not buttons:
        return
    first = buttons[0]["restyle"]
    for i, tr in enumerate(fig.data):
        tr.visible = first["visible"][i]
        if i in poly_idx:
            tr.fillcolor, tr.line.width, tr.line.color = (first["fillcolor"][i], first["line.width"][i],
                                                          first["line.color"][i])
            tr.fillpattern = dict(shape=first["fillpattern.shape"][i], fgcolor=first["fillpattern.fgcolor"][i], size=7)


AXIS = dict(showgrid=False, zeroline=False, constrain="domain", showticklabels=False, showline=True,
            linecolor="#bbb", mirror=True, ticks="")


def panel_axes(geo: MapGeometry) -> tuple[dict, list, list]:
    """(the axes of the panels, the frame of the core on the overview, the panels' captions)."""
    box = geo.boxes[0]
    axes = dict(xaxis=dict(AXIS, domain=list(geo.domains[0]), range=list(box[:2]) if box else None),
                yaxis=dict(AXIS, scaleanchor="x", scaleratio=geo.ratio, range=list(box[2:]) if box else None))
    if geo.zoom is None:
        return axes, [], []
    z = geo.boxes[1]
    axes["xaxis2"] = dict(AXIS, domain=list(geo.domains[1]), range=list(z[:2]), anchor="y2")
    axes["yaxis2"] = dict(AXIS, scaleanchor="x2", scaleratio=geo.ratio, range=list(z[2:]), anchor="x2")
    shapes = [dict(type="rect", xref="x", yref="y", x0=z[0], x1=z[1], y0=z[2], y1=z[3],
                   line=dict(color="#333", width=1, dash="dot"))]
    annotations = [
        dict(xref="x", yref="y", x=z[1], y=z[3], xanchor="right", yanchor="bottom", text=t("map.enlarged_right"),
             showarrow=False, font=dict(size=10, color="#333")),
        dict(xref="x2 domain", yref="y2 domain", x=0, y=1, xanchor="left", yanchor="bottom",
             text=t("map.core"), showarrow=False, font=dict(size=12)),
        dict(xref="x domain", yref="y domain", x=0, y=1, xanchor="left", yanchor="bottom", text=t("map.whole"),
             showarrow=False, font=dict(size=12)),
    ]
    return axes, shapes, annotations


def lay_out(fig: go.Figure, geo: MapGeometry, buttons: list[dict], region_name: str) -> None:
    """The figure's layout, its menu and its narrow-screen changes (stacked panels on a phone)."""
    options_menu = menu([b["label"] for b in buttons], [b["restyle"] for b in buttons],
                        [{"title.text": b["title"]} for b in buttons])
    axes, shapes, annotations = panel_axes(geo)
    fig.update_layout(**base_layout(
        height=HEIGHT, margin=dict(l=20, r=90, t=90, b=70),
        title=dict(text=buttons[0]["title"] if buttons else region_name, xref="paper", x=0, xanchor="left",
                   y=1 - 12 / HEIGHT, yanchor="top", font=dict(size=15)),
        plot_bgcolor="#fff", shapes=shapes, annotations=annotations, **axes))
    legend_below(fig, px=20)
    # The legends are keys, not switches: a click would hide the key, not the communes.
    fig.update_layout(legend=dict(itemclick=False, itemdoubleclick=False))
    narrow = {"margin.l": 8, "margin.b": 110, "margin.t": 130}
    if geo.zoom is not None:  # stacked: the whole region above, the enlarged core below
        narrow.update({"height": 1150, "xaxis.domain": [0, 1], "yaxis.domain": [0.55, 1], "xaxis2.domain": [0, 1],
                       "yaxis2.domain": [0, 0.45], "annotations[0].text": t("map.enlarged_below")})
    fig.layout.meta = dict(not_on_map=geo.not_shown, narrow=narrow_layout(narrow), menu=options_menu,
                           menu_label=t("menu.map"),
                           options=[dict(label=b["label"], combo=b["combo"], measure=b["measure"],
                                         significant=b["significant"]) for b in buttons])


def choropleth_figure(comparison: pd.DataFrame, smoothed: pd.DataFrame, communes: pd.DataFrame, geojson: dict,
                      trends: pd.DataFrame, region_name: str, region_code: str, method_name: str,
                      exceedance_cut: float, trend_windows: dict | None = None, *, models: ModelMarts) -> go.Figure:
    """The region's communes on their polygons: one menu option per indicator x period and
    measure (crude, EB and BYM2 smoothed rates, RT, probabilities of exceeding, clusters; `models`:
    the BYM2 and cluster rows), then per indicator its trend class."""
    combos = combos_of(comparison)
    geo = map_geometry(comparison, communes, geojson)
    fig = go.Figure()
    poly_idx = add_polygons(fig, geo)
    add_names(fig, geo, comparison)
    trend_by = {(r["indicator"], r["area_code"]): r for r in trends.to_dict("records")} if len(trends) else {}
    smooth_by, bym2_by, clusters_by = (rows_by_combo(smoothed), rows_by_combo(models.bym2),
                                       rows_by_combo(models.clusters))
    options = []
    for combo in combos:
        values = ComboValues.of(combo, comparison, smooth_by, geo.codes)
        model = ModelValues.of(combo, bym2_by, clusters_by, geo.codes)
        hover_idx = add_hover(fig, geo, combo, values, model, trend_by)
        options += combo_options(fig, geo, combo, values, model, hover_idx, region_name, exceedance_cut,
                                 models.cluster_alpha)
    for ind in indicator_order(comparison["indicator"].unique()):
        window = (trend_windows or {}).get(ind)
        option = None if window is None else trend_option(fig, geo, ind, window, combos, trend_by, region_name,
                                                          method_name)
        if option is not None:
            options.append(option)
    buttons = with_restyles(fig, options, poly_idx, len(geo.panels))
    draw_default(fig, buttons, poly_idx)
    lay_out(fig, geo, buttons, region_name)
    return fig
