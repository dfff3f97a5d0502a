"""4. Map: the communes at their seats on plain longitude/latitude axes (no tiles: the report
works offline), coloured by RT or by trend class."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from infant_mortality.report.common import (
    ASSUMED_WIDTH,
    TREND_COLOURS,
    TREND_LABELS,
    apply_default_visibility,
    base_layout,
    combos_of,
    dropdown,
    fmt,
    fmt_apc,
    fmt_p,
    indicator_order,
    indicator_short,
    legend_below,
    narrow_layout,
    num,
    nums,
    place_labels,
    visibility,
    with_rate,
)

RT_TICKS = (0.25, 0.5, 0.67, 0.8, 1.0, 1.25, 1.5, 2.0, 4.0)
RT_SPAN_MAX = 2.0  # log2: the colour scale never spans more than RT 1/4 to 4
# Seats farther than this from the region's median longitude or latitude (islands such as Rapa
# Nui, placeholder coordinates) would squash the map: they are listed in a note instead.
MAP_OUTLIER_DEGREES = 5.0


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
    pad_x, pad_y = 0.10 * np.ptp(x) + 0.04, 0.10 * np.ptp(y) + 0.04
    overview = (x.min() - pad_x, x.max() + pad_x, y.min() - pad_y, y.max() + pad_y)
    (x1, x3), (y1, y3) = np.quantile(x, [0.25, 0.75]), np.quantile(y, [0.25, 0.75])
    wx, wy = max(x3 - x1, 0.02), max(y3 - y1, 0.02)
    zoom = (x1 - 0.6 * wx, x3 + 0.6 * wx, y1 - 0.6 * wy, y3 + 0.6 * wy)
    inside = (x >= zoom[0]) & (x <= zoom[1]) & (y >= zoom[2]) & (y <= zoom[3])
    area = lambda b: (b[1] - b[0]) * (b[3] - b[2])  # noqa: E731
    if inside.sum() < 8 or area(zoom) > area(overview) / 3:
        zoom = None
    return ok, overview, zoom


def map_figure(
    comparison: pd.DataFrame,
    communes: pd.DataFrame,
    trends: pd.DataFrame | None,
    region_name: str,
    region_code: str,
    trend_windows: dict | None = None,
) -> go.Figure:
    """Commune seats on plain longitude/latitude axes (equal distances), no tiles.

    Two panels when the region has a dense core: the whole region (left, the core framed) and
    the core enlarged (right). Options of the dropdown: coloured by RT (log scale, diverging,
    centred at 1) per indicator and period, or by trend class per indicator; marker area
    proportional to live births; significant differences from the rest of the region outlined
    in black.
    """
    combos = combos_of(comparison)
    geo = communes[["commune_code", "latitude", "longitude"]]
    comp = comparison.merge(geo, on="commune_code", how="left")
    seats = comp.drop_duplicates("commune_code")
    kept, overview, zoom = map_layout_boxes(seats["longitude"], seats["latitude"])
    kept_codes = set(seats.loc[kept, "commune_code"])
    not_shown = sorted(seats.loc[~kept, "commune_name"].tolist())
    comp = comp[comp["commune_code"].isin(kept_codes)]
    trend_by = {}
    if trends is not None and len(trends):
        for rec in trends.to_dict("records"):
            trend_by[(rec["indicator"], rec["area_code"])] = rec
    births_max = float(comp["live_births"].max()) if len(comp) else 1.0
    max_px = 30.0 if zoom is not None else 36.0
    size_ref = 2.0 * births_max / (max_px**2)
    mean_lat = float(comp["latitude"].mean()) if len(comp) else 0.0
    panels = [("x", "y")] + ([("x2", "y2")] if zoom is not None else [])

    def in_zoom(df):
        if zoom is None:
            return np.zeros(len(df), bool)
        return (
            df["longitude"].between(zoom[0], zoom[1]) & df["latitude"].between(zoom[2], zoom[3])
        ).to_numpy()

    fig = go.Figure()
    groups, labels, layouts = [], [], []

    def hover_rows(df, indicator):
        out = []
        for r in df.itertuples():
            tr = trend_by.get((indicator, r.commune_code))
            trend_txt = "trend: not available" if tr is None else (
                f"trend {tr.get('period_start')}-{tr.get('period_end')}: "
                f"{TREND_LABELS.get(tr.get('trend'), tr.get('trend'))}, {fmt_apc(tr)}"
            )
            out.append(
                f"<b>{r.commune_name}</b> · {indicator_short(indicator)} {r.period_label}<br>"
                f"rate {fmt(r.rate_per_1000)} per 1000 (95% CI {fmt(r.ci95_lower)} to {fmt(r.ci95_upper)})"
                f"<br>live births {fmt(r.live_births, 0, thousands=True)}, deaths {fmt(r.deaths, 0, thousands=True)}"
                f"<br>RT {fmt(r.rate_ratio)} (95% CI {fmt(r.rate_ratio_ci95_lower)} to {fmt(r.rate_ratio_ci95_upper)})"
                f"<br>RAP {fmt(r.excess_rate_per_1000, 2, signed=True)} per 1000 · RAP% "
                f"{fmt(r.attributable_percent, 1, signed=True)}%<br>vs rest of region: {r.comparison} "
                f"(mid-p {fmt_p(r.p_value)})<br>{trend_txt}"
            )
        return out

    ratio = 1.0 / max(0.2, math.cos(math.radians(mean_lat)))
    # Pixel geometry of the panels at the report's usual width, for the label placement.
    plot_w, plot_h = ASSUMED_WIDTH - 150, 780 - 200
    domains = [(0.0, 0.47), (0.53, 0.95)] if zoom is not None else [(0.0, 0.93)]
    boxes = [overview] + ([zoom] if zoom is not None else [])

    def fill(box, k):
        """Widen the box's shorter side so that, at equal distances, it fills its panel."""
        if box is None:
            return None
        x0, x1, y0, y1 = box
        w_px, h_px = (domains[k][1] - domains[k][0]) * plot_w, plot_h
        need_w = (y1 - y0) * ratio * w_px / h_px  # lon degrees that fill the width at this height
        if need_w > x1 - x0:
            c = (x0 + x1) / 2
            return (c - need_w / 2, c + need_w / 2, y0, y1)
        need_h = (x1 - x0) * h_px / w_px / ratio
        c = (y0 + y1) / 2
        return (x0, x1, c - need_h / 2, c + need_h / 2)

    boxes = [fill(b, k) for k, b in enumerate(boxes)]
    overview = boxes[0]
    if zoom is not None:
        # Every seat drawn in the enlarged panel keeps a margin from its frame, so that its
        # marker and its label are not cut (Lo Barnechea, Pirque).
        zoom = boxes[1]
        inside = in_zoom(seats)
        xs, ys = seats["longitude"][inside], seats["latitude"][inside]
        px, py = 0.08 * (zoom[1] - zoom[0]), 0.06 * (zoom[3] - zoom[2])
        zoom = fill((min(zoom[0], xs.min() - px), max(zoom[1], xs.max() + px),
                     min(zoom[2], ys.min() - py), max(zoom[3], ys.max() + py)), 1)
        boxes[1] = zoom

    def positions(k, df, text):
        if boxes[k] is None:
            return "top center"
        x0, x1, y0, y1 = boxes[k]
        w_dom = (domains[k][1] - domains[k][0]) * plot_w
        scale = min(w_dom / (x1 - x0), plot_h / ((y1 - y0) * ratio))
        xs = ((df["longitude"].to_numpy(float) - x0) * scale).tolist()
        ys = ((df["latitude"].to_numpy(float) - y0) * scale * ratio).tolist()
        diam = np.maximum(4.0, np.sqrt(df["live_births"].to_numpy(float).clip(min=0) / size_ref)).tolist()
        all_text = [t if t else "" for t in text]
        return place_labels(xs, ys, all_text, diam, (0, (x1 - x0) * scale, 0, (y1 - y0) * scale * ratio),
                            font_px=10 if k > 0 else 9)

    def add(df, meta, marker, name=None, showlegend=False):
        """The same points in every panel; the overview labels only the seats outside the zoom."""
        idx = []
        inside = in_zoom(df)
        for k, (xa, ya) in enumerate(panels):
            text = df["commune_name"].tolist()
            if zoom is not None:  # each seat is labelled in one panel only
                text = [t if (z if k > 0 else not z) else "" for t, z in zip(text, inside)]
            textpos = positions(k, df, text)
            m = dict(marker)
            narrow = {}
            if k > 0 and "colorbar" in m:
                m = {key: v for key, v in m.items() if key != "colorbar"}
                m["showscale"] = False
            elif "colorbar" in m:  # on a phone the colour bar lies under the map
                narrow.update({"marker.colorbar.orientation": "h", "marker.colorbar.x": 0,
                               "marker.colorbar.xanchor": "left", "marker.colorbar.y": -0.06,
                               "marker.colorbar.yanchor": "top", "marker.colorbar.len": 0.7,
                               "marker.colorbar.thickness": 12})
            # On a phone the whole region is too small for names when the core is enlarged.
            narrow.update({"mode": "markers"} if (k == 0 and zoom is not None) else {"textfont.size": 8})
            idx.append(len(fig.data))
            fig.add_trace(
                go.Scatter(
                    x=nums(df["longitude"]),
                    y=nums(df["latitude"]),
                    xaxis=xa,
                    yaxis=ya,
                    mode="markers+text",
                    text=text,
                    textposition=textpos,
                    textfont=dict(size=10 if k > 0 else 9, color="#333"),
                    cliponaxis=True,
                    hovertext=hover_rows(df, meta.get("indicator") or meta["combo"].split("|")[0]),
                    hovertemplate="%{hovertext}<extra></extra>",
                    customdata=[[r.commune_name, num(r.rate_per_1000), num(r.ci95_lower), num(r.ci95_upper),
                                 num(r.rate_ratio), num(r.excess_rate_per_1000), num(r.attributable_percent)]
                                for r in df.itertuples()],
                    marker=m,
                    name=name or "",
                    legendgroup=name,
                    showlegend=showlegend and k == 0,
                    meta=dict(meta, panel="overview" if k == 0 else "zoom", narrow=narrow),
                )
            )
        return idx

    for combo in combos:
        df_all = with_rate(combo.select(comp))
        # A commune without an RT (its region had no death in the period) is drawn grey.
        df, no_rt = df_all[df_all["rate_ratio"].notna()], df_all[df_all["rate_ratio"].isna()]
        if df_all.empty:
            continue
        rt = df["rate_ratio"].to_numpy(float)
        # The colour scale spans the observed RTs up to 4 (or 1/4); beyond it, and RT = 0 (no
        # death), the colour saturates.
        positive = np.abs(np.log2(rt[rt > 0])) if (rt > 0).any() else np.array([0.0])
        span = min(RT_SPAN_MAX, max(math.log2(1.5), float(positive.max())))
        log_rt = np.where(rt > 0, np.log2(np.where(rt > 0, rt, 1.0)), -span)
        ticks = [t for t in RT_TICKS if abs(math.log2(t)) <= span + 1e-9]
        sig = df["comparison"].isin(["higher", "lower"]).to_numpy()
        marker = dict(
            size=nums(df["live_births"]), sizemode="area", sizeref=size_ref, sizemin=4,
            color=nums(log_rt), colorscale="RdBu_r", cmin=-span, cmax=span, cmid=0, opacity=0.92,
            line=dict(width=[2.4 if s else 0.6 for s in sig], color=["#000" if s else "#777" for s in sig]),
            colorbar=dict(title=dict(text="RT", font=dict(size=13)), tickvals=[math.log2(t) for t in ticks],
                          ticktext=[f"{t:g}" for t in ticks], len=0.7, thickness=16, x=1.0, xanchor="left"),
        )
        idx = add(df, dict(figure="map", region_code=region_code, combo=combo.key, colour="rate_ratio"), marker,
                  name="RT")
        if not no_rt.empty:
            idx += add(no_rt, dict(figure="map", region_code=region_code, combo=combo.key, colour="no_rate_ratio"),
                       dict(size=nums(no_rt["live_births"]), sizemode="area", sizeref=size_ref, sizemin=4,
                            color="#bdbdbd", line=dict(width=0.6, color="#777")),
                       name="No RT (no death in the region)", showlegend=True)
        groups.append(idx)
        labels.append(f"RT: {combo.label}")
        layouts.append({"title.text": f"RT (commune rate / region rate), {combo.label}<br>{region_name}"})
    if trend_by:
        for ind in indicator_order(comparison["indicator"].unique()):
            window = (trend_windows or {}).get(ind)
            ind_combos = [c for c in combos if c.indicator == ind]
            if not ind_combos:
                continue
            base = ind_combos[0]
            if window is not None:
                base = next((c for c in ind_combos if (c.period_start, c.period_end) == tuple(window)), base)
            df = with_rate(base.select(comp))
            classes = [(trend_by.get((ind, code)) or {}).get("trend") or "not_estimable" for code in df["commune_code"]]
            df = df.assign(_trend=classes)
            idx = []
            for cls in TREND_COLOURS:
                sub = df[df["_trend"] == cls]
                if sub.empty:
                    continue
                marker = dict(size=nums(sub["live_births"]), sizemode="area", sizeref=size_ref, sizemin=4,
                              color=TREND_COLOURS[cls], opacity=0.9, line=dict(width=0.8, color="#333"))
                idx += add(sub, dict(figure="map", region_code=region_code, indicator=ind, colour="trend", trend=cls),
                           marker, name=f"{TREND_LABELS[cls]} trend", showlegend=True)
            if idx:
                win = f" {window[0]}-{window[1]}" if window else ""
                groups.append(idx)
                labels.append(f"Trend: {indicator_short(ind)}{win}")
                layouts.append({"title.text": f"Trend class{win} (Prais-Winsten), {indicator_short(ind)}<br>"
                                              f"{region_name}"})
    visibilities = visibility(groups, len(fig.data))
    if visibilities:
        apply_default_visibility(fig, visibilities[0])
    axis = dict(showgrid=True, gridcolor="#e6e6e6", zeroline=False, constrain="domain", ticks="outside",
                showline=True, linecolor="#999", mirror=True)
    layout = dict(
        xaxis=dict(axis, title=dict(text="Longitude (°)"), domain=[0, 0.47] if zoom is not None else [0, 0.93],
                   range=list(overview[:2]) if overview else None),
        yaxis=dict(axis, title=dict(text="Latitude (°)"), scaleanchor="x", scaleratio=ratio,
                   range=list(overview[2:]) if overview else None),
    )
    annotations, shapes = [], []
    if zoom is not None:
        layout["xaxis2"] = dict(axis, title=dict(text="Longitude (°)"), domain=[0.53, 0.95], range=list(zoom[:2]),
                                anchor="y2")
        layout["yaxis2"] = dict(axis, scaleanchor="x2", scaleratio=ratio, range=list(zoom[2:]), anchor="x2")
        shapes.append(dict(type="rect", xref="x", yref="y", x0=zoom[0], x1=zoom[1], y0=zoom[2], y1=zoom[3],
                           line=dict(color="#555", width=1, dash="dot")))
        annotations.append(dict(xref="x", yref="y", x=zoom[1], y=zoom[3], xanchor="right", yanchor="bottom",
                                text="enlarged at right", showarrow=False, font=dict(size=10, color="#555")))
        annotations.append(dict(xref="x2 domain", yref="y2 domain", x=0, y=1, xanchor="left", yanchor="bottom",
                                text="Dense core, enlarged", showarrow=False, font=dict(size=12)))
        annotations.append(dict(xref="x domain", yref="y domain", x=0, y=1, xanchor="left", yanchor="bottom",
                                text="Whole region", showarrow=False, font=dict(size=12)))
    fig.update_layout(
        **base_layout(
            height=780,
            margin=dict(l=70, r=80, t=110, b=90),
            title=dict(text=layouts[0]["title.text"] if layouts else region_name, xref="paper", x=0, xanchor="left",
                       y=1 - 16 / 780, yanchor="top", font=dict(size=15)),
            updatemenus=dropdown(labels, visibilities, layouts),
            plot_bgcolor="#fafafa",
            shapes=shapes,
            annotations=annotations,
            **layout,
        )
    )
    for menu in fig.layout.updatemenus:
        menu.y, menu.yanchor, menu.pad = 1.06, "bottom", dict(b=0)
    legend_below(fig)
    narrow = {"margin.l": 45, "margin.b": 150, "margin.t": 150, "updatemenus[0].y": 1.0,
              "updatemenus[0].pad.b": 24}
    if zoom is not None:  # stacked: the whole region above, the enlarged core below
        narrow.update({"height": 1150, "xaxis.domain": [0, 1], "yaxis.domain": [0.55, 1], "xaxis2.domain": [0, 1],
                       "yaxis2.domain": [0, 0.45], "annotations[0].text": "enlarged below"})
    fig.layout.meta = dict(not_on_map=not_shown, narrow=narrow_layout(fig, narrow))
    return fig
