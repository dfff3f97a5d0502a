"""2. Trends: small multiples of yearly rates with the fitted line of the headline method of `marts.fct_trends`.

The panels are laid out by ``static/report.js`` (``layout.meta.grid``): four columns on a
desktop, one on a phone. Each panel's title is anchored to its own axes, so it follows them.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from infant_mortality.report.formats import fmt, fmt_apc, fmt_apc_short, fmt_p, num, nums, to_int, unit
from infant_mortality.report.labels import indicator_short, method_label, trend_has_class, trend_label
from infant_mortality.report.style import FONT, TREND_COLOURS, TREND_DASHES, base_layout, narrow_layout
from infant_mortality.report.i18n import t
from infant_mortality.report.mart_text import localised

# Panel geometry (px) handed to report.js, which picks the number of columns from the width.
GRID = dict(max_cols=4, min_panel_px=250, row_px=190, row_px_narrow=160, gap_px=84, hspace=0.045)


def fitted_line(trend: dict | None):
    """The mart's fitted line, log10(rate) = intercept_log10 + slope_log10 * year, over the
    trend's window on a quarter-year grid: (years, rates, method) or (None, None, None)."""
    if trend is None or num(trend.get("slope_log10")) is None:
        return None, None, None
    a, b = num(trend.get("intercept_log10")), float(trend["slope_log10"])
    if a is None:
        return None, None, None
    start, end = int(trend["period_start"]), int(trend["period_end"])
    grid = np.linspace(start, end, 4 * (end - start) + 1)
    return grid, 10 ** (a + b * grid), "mart"


def _trend_title(name: str, trend: dict | None, other: dict | None, joinpoints: list[int], min_deaths: int) -> str:
    """The panel's title: the area, then the headline method's class and APC (only for a valid fit;
    otherwise why there is none), the second method's APC (and its class where it differs), and
    the joinpoint years if any (fct_trend_segments holds none for a series without a class)."""
    head = f"<b>{name}</b>"
    if trend is None:
        return head
    cls = trend.get("trend") or "not_estimable"
    if trend_has_class(trend):
        detail = f"{trend_label(cls).lower()} · {fmt_apc_short(trend.get('apc'))}"
    elif cls == "insufficient_data":
        detail = f"{trend_label(cls).lower()}: {t('trend.reason.insufficient_data', n=min_deaths)}"
    elif cls == "not_confirmed":
        detail = f"{trend_label(cls).lower()}: {t('trend.reason.not_confirmed')}"
    else:
        detail = f"{trend_label(cls).lower()}: {t('trend.reason.not_estimable')}"
    colour = TREND_COLOURS.get(cls, "#555") if trend_has_class(trend) else "#555"  # readable, not a class colour
    lines = [head, f"<span style='color:{colour};font-size:11px'>{detail}</span>"]
    if trend_has_class(other) or (other or {}).get("trend") == "not_confirmed":
        # The other method's own class, when it differs from the headline's (or has none here).
        agree = "" if other.get("trend") == cls else t("trends.disagree", cls=trend_label(other.get("trend")).lower())
        lines.append(f"<span style='font-size:10px'>{t('trends.other', method=method_label(other['method'], other['method_label']), apc=fmt_apc_short(other.get('apc')))}{agree}</span>")
    if joinpoints:
        lines.append(f"<span style='font-size:10px'>{t('trends.joinpoints', years=', '.join(map(str, joinpoints)))}</span>")
    return "<br>".join(lines)


def trends_figure(
    series: list[tuple],
    indicator: str,
    region_code: str,
    method_name: str,
    min_deaths: int,
) -> dict:
    """Small multiples of yearly rates (points, 95% CI whiskers) with the fitted trend line.

    `series` is a list of (area_code, area_name, yearly rows of `fct_area_year_rates`, the
    headline method's `fct_trends` row or None, the second method's row or None, the area's
    `fct_trend_segments` rows), the reference area (region or country) first; `method_name` names
    the headline method, `min_deaths` is the build's `trend_min_deaths`. The line is drawn only for
    a valid fit; a joinpoint is a dotted vertical line at its year, with the segments' APCs in its
    tooltip. Returns the
    figure as a plain plotly dict (data, layout): with a country's worth of panels, plotly's
    Python objects would take most of the report's build time validating them.
    """
    data: list[dict] = []
    all_years = pd.concat([s[2]["year"] for s in series]) if series else pd.Series([2000])
    x_range = [float(all_years.min()) - 0.6, float(all_years.max()) + 0.6]
    layout: dict = {}
    annotations, shapes = [], []
    for i, (code, name, rows, trend, other, segments) in enumerate(series):
        suffix = "" if i == 0 else str(i + 1)
        xa, ya = f"x{suffix}", f"y{suffix}"
        layout[f"xaxis{suffix}"] = dict(anchor=ya, range=x_range, dtick=2, tickfont=dict(size=10), showgrid=False,
                                        showline=True, linecolor="#bbb")
        layout[f"yaxis{suffix}"] = dict(anchor=xa, rangemode="tozero", tickfont=dict(size=10), gridcolor="#eee",
                                        zeroline=False)
        segments = segments.sort_values("segment")
        joinpoints = [int(y) for y in segments["segment_start"].iloc[1:]] if len(segments) > 1 else []
        # The title's tooltip: why there is no class (the mart's note), the joinpoint segments' APCs.
        why = [localised((trend or {}).get("note"))] + ([t("trends.segment", start=int(r.segment_start), end=int(r.segment_end),
                                                apc=fmt_apc_short(r.apc)) for r in segments.itertuples()]
                                              if joinpoints else [])
        annotations.append(dict(text=_trend_title(name, trend, other, joinpoints, min_deaths), xref=f"{xa} domain",
                                yref=f"{ya} domain", x=0.5, y=1.0, xanchor="center", yanchor="bottom",
                                showarrow=False, font=dict(size=12),
                                hovertext="<br>".join(w for w in why if isinstance(w, str) and w) or None))
        for year in joinpoints:
            shapes.append(dict(type="line", xref=xa, yref=f"{ya} domain", x0=year, x1=year, y0=0, y1=1,
                               line=dict(color="#7a5195", width=1.2, dash="dot"),
                               name=f"joinpoint {code} {year}"))
        rows = rows.sort_values("year")
        rate = rows["rate_per_1000"].to_numpy(float)
        data.append(
            dict(
                type="scatter",
                x=[int(y) for y in rows["year"]],
                y=nums(rate),
                xaxis=xa,
                yaxis=ya,
                mode="markers",
                marker=dict(size=5, color="#000" if i == 0 else "#444"),
                error_y=dict(
                    type="data",
                    symmetric=False,
                    array=nums(rows["ci95_upper"].to_numpy(float) - rate),
                    arrayminus=nums(rate - rows["ci95_lower"].to_numpy(float)),
                    thickness=1,
                    width=2,
                    color="#9e9e9e",
                ),
                customdata=[[num(a), num(b), to_int(d), to_int(nb)] for a, b, d, nb in
                            zip(rows["ci95_lower"], rows["ci95_upper"], rows["deaths"], rows["live_births"])],
                hovertemplate=t("trends.hover.rate", name=name, ind=indicator_short(indicator), unit=unit(indicator)),
                showlegend=False,
                meta=dict(figure="trends", region_code=region_code, area_code=code, indicator=indicator, kind="rates"),
            )
        )
        grid, fitted, method = fitted_line(trend) if trend_has_class(trend) else (None, None, None)
        if grid is not None:
            cls = trend.get("trend") or "stationary"
            data.append(
                dict(
                    type="scatter",
                    x=nums(grid),
                    y=nums(fitted),
                    xaxis=xa,
                    yaxis=ya,
                    mode="lines",
                    line=dict(color=TREND_COLOURS.get(cls, "#555"), width=2.2, dash=TREND_DASHES.get(cls, "solid")),
                    hovertemplate=t("trends.hover.fit", name=name, method=method_name, cls=trend_label(cls).lower(),
                                    apc=fmt_apc(trend), p=fmt_p(trend.get("p_value")), rho=fmt(trend.get("rho"), 2)),
                    showlegend=False,
                    meta=dict(figure="trends", region_code=region_code, area_code=code, indicator=indicator,
                              kind="fit", line_method=method, slope_log10=num(trend.get("slope_log10")),
                              apc=num(trend.get("apc")), trend=cls),
                )
            )
    layout = base_layout(margin=dict(l=50, r=20, t=80, b=40), showlegend=False, font=FONT, annotations=annotations,
                         shapes=shapes, **layout)
    layout["meta"] = dict(grid=dict(GRID, n=len(series)), narrow=narrow_layout({"margin.l": 40, "margin.r": 12}))
    return dict(data=data, layout=layout)
