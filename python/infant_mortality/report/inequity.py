"""6. Desigualdad / Inequity: rates by deprivation quintile, commune rates against the
deprivation stratifier with the fitted Poisson gradient, and the yearly RII with its trend,
all from the inequity marts (`fct_rates_by_quintile`, `fct_commune_deprivation`,
`fct_inequality`, `fct_inequality_trends`); the summary measures as an HTML table.

Three panels laid out by report.js (``layout.meta.grid``): side by side on a desktop, stacked
on a phone. One dropdown option per indicator and stratifier (the full window of the data).
"""

from __future__ import annotations

import pandas as pd

from infant_mortality.report.combos import menu, visibility
from infant_mortality.report.formats import fmt, fmt_apc_short, nums, to_int, unit
from infant_mortality.report.labels import indicator_order, indicator_short, trend_label
from infant_mortality.report.style import TREND_COLOURS, TREND_DASHES, base_layout, narrow_layout
from infant_mortality.report.i18n import t
from infant_mortality.report.tables import esc

GRID = dict(max_cols=3, min_panel_px=300, row_px=320, row_px_narrow=300, gap_px=90, hspace=0.08)
MEASURES = ("D", "R", "PAR", "PAF", "avoidable_deaths", "SII", "RII", "CIX")


def _select(df: pd.DataFrame, level: str, code: str, **eq) -> pd.DataFrame:
    out = df[(df["area_level"] == level) & (df["area_code"] == code)]
    for k, v in eq.items():
        out = out[out[k] == v]
    return out


def full_window(inequality: pd.DataFrame) -> tuple[int, int] | None:
    rows = inequality[inequality["period_kind"] == "full_window"]
    if rows.empty:
        return None
    r = rows.iloc[0]
    return int(r["period_start"]), int(r["period_end"])


def quintile_trace(quintiles, level: str, code: str, ind: str, strat: str, start: int, end: int) -> dict:
    """Left panel: the pooled rate of each quintile with its exact 95% CI."""
    q = _select(quintiles, level, code, indicator=ind, stratifier=strat, period_start=start,
                period_end=end).sort_values("quintile")
    rate = pd.to_numeric(q["rate_per_1000"], errors="coerce").astype(float)
    return dict(type="scatter", x=[to_int(v) for v in q["quintile"]], y=nums(rate), xaxis="x", yaxis="y",
                mode="markers+lines", line=dict(color="#b0bec5", width=1),
                marker=dict(size=9, color="#6a1b9a"),
                error_y=dict(type="data", symmetric=False, array=nums(q["ci95_upper"].astype(float) - rate),
                             arrayminus=nums(rate - q["ci95_lower"].astype(float)), color="#6a1b9a", width=4),
                customdata=[[to_int(n), to_int(d), to_int(b)] for n, d, b in
                            zip(q["n_communes"], q["deaths"], q["live_births"])],
                hovertemplate=t("inequity.hover.quintile", unit=unit(ind)),
                showlegend=False, meta=dict(figure="inequity", kind="quintiles", indicator=ind, stratifier=strat))


def commune_traces(deprivation, level: str, code: str, ind: str, strat: str, start: int, end: int) -> list[dict]:
    """Middle panel: each ranked commune's rate against its deprivation, and the fitted gradient."""
    dep = _select(deprivation, level, code, indicator=ind, stratifier=strat, period_start=start, period_end=end)
    dep = dep[dep["is_ranked"].astype(bool)].sort_values("value")
    return [
        dict(type="scatter", x=nums(dep["value"]), y=nums(dep["rate_per_1000"]), xaxis="x2",
             yaxis="y2", mode="markers", marker=dict(size=7, color="#455a64", opacity=0.8),
             text=dep["commune_name"].tolist(), hovertemplate=t("inequity.hover.commune", unit=unit(ind)),
             showlegend=False, meta=dict(figure="inequity", kind="communes", indicator=ind, stratifier=strat)),
        dict(type="scatter", x=nums(dep["value"]), y=nums(dep["fitted_rate_per_1000"]), xaxis="x2",
             yaxis="y2", mode="lines", line=dict(color="#c62828", width=2.2),
             hovertemplate=t("inequity.hover.gradient", unit=unit(ind)), showlegend=False,
             meta=dict(figure="inequity", kind="gradient", indicator=ind, stratifier=strat)),
    ]


def yearly_rii_trace(inequality, level: str, code: str, ind: str, strat: str) -> dict:
    """Right panel: the RII of each single year with its 95% CI."""
    yearly = _select(inequality, level, code, indicator=ind, stratifier=strat, measure="RII",
                     period_kind="single_year").sort_values("period_start")
    est = pd.to_numeric(yearly["estimate"], errors="coerce").astype(float)
    return dict(type="scatter", x=[int(v) for v in yearly["period_start"]], y=nums(est), xaxis="x3",
                yaxis="y3", mode="markers", marker=dict(size=7, color="#000"),
                error_y=dict(type="data", symmetric=False, array=nums(yearly["ci95_upper"].astype(float) - est),
                             arrayminus=nums(est - yearly["ci95_lower"].astype(float)), color="#9e9e9e", width=3),
                hovertemplate=t("inequity.hover.rii"), showlegend=False,
                meta=dict(figure="inequity", kind="yearly_rii", indicator=ind, stratifier=strat))


def rii_trend(gap_trends, level: str, code: str, ind: str, strat: str, start: int, end: int) -> tuple[dict | None, str]:
    """The fitted trend of the yearly RII (a line, or None without a fit) and its text."""
    tr = _select(gap_trends, level, code, indicator=ind, stratifier=strat, period_start=start, period_end=end)
    if tr.empty or not pd.notna(tr.iloc[0]["intercept_log10"]) or not pd.notna(tr.iloc[0]["slope_log10"]):
        return None, t("inequity.no_trend")
    row = tr.iloc[0]
    years = list(range(start, end + 1))
    cls = row["trend"]
    line = dict(type="scatter", x=years, y=[10 ** (row["intercept_log10"] + row["slope_log10"] * y) for y in years],
                xaxis="x3", yaxis="y3", mode="lines",
                line=dict(color=TREND_COLOURS.get(cls, "#555"), width=2.2, dash=TREND_DASHES.get(cls, "solid")),
                hoverinfo="skip", showlegend=False,
                meta=dict(figure="inequity", kind="rii_trend", indicator=ind, stratifier=strat,
                          gap_change=row["gap_change"]))
    return line, t("inequity.trend", cls=trend_label(cls).lower(), apc=fmt_apc_short(row["apc"]),
                   gap=gap_label(row["gap_change"]))


def panel_titles(rii_title: str) -> list[dict]:
    return [dict(text=text, xref=f"{ax} domain", yref=f"{ay} domain", x=0.5, y=1.0, xanchor="center",
                 yanchor="bottom", showarrow=False, font=dict(size=12))
            for text, ax, ay in ((t("inequity.panel.quintiles"), "x", "y"),
                                 (t("inequity.panel.communes"), "x2", "y2"),
                                 (rii_title, "x3", "y3"))]


def lay_out(options: list[dict], vis: list[list[bool]], inds: list[str]) -> dict:
    """The figure's layout (drawn with its first option) and its menu."""
    layouts = [{"title.text": o["title"], "annotations": panel_titles(o["rii"])} for o in options]
    layout = base_layout(
        margin=dict(l=55, r=20, t=130, b=60), showlegend=False,
        title=dict(text=options[0]["title"], x=0, xref="paper", xanchor="left", y=0.98, yanchor="top",
                   font=dict(size=15)),
        annotations=panel_titles(options[0]["rii"]),
        xaxis=dict(anchor="y", dtick=1, title=dict(text=t("inequity.axis.quintile")), showline=True, linecolor="#bbb"),
        yaxis=dict(anchor="x", rangemode="tozero", title=dict(text=t("per_1000.short", unit=unit(inds)))),
        xaxis2=dict(anchor="y2", title=dict(text=t("inequity.axis.deprivation")), showline=True,
                    linecolor="#bbb"),
        yaxis2=dict(anchor="x2", rangemode="tozero"),
        xaxis3=dict(anchor="y3", dtick=2, showline=True, linecolor="#bbb"),
        yaxis3=dict(anchor="x3", type="log", title=dict(text="RII")),
    )
    layout["meta"] = dict(grid=dict(GRID, n=3), narrow=narrow_layout({"margin.l": 45}),
                          options=[o["label"] for o in options], menu_label=t("menu.inequity"),
                          menu=menu([o["label"] for o in options], vis, layouts))
    return layout


def inequity_figure(quintiles, deprivation, inequality, gap_trends, stratifier_labels: dict, level: str,
                    code: str, area_name: str) -> dict | None:
    """Plain plotly dict (data, layout) or None when the area has no inequity rows."""
    window = full_window(_select(inequality, level, code))
    if window is None:
        return None
    start, end = window
    data, options = [], []
    inds = indicator_order(_select(inequality, level, code)["indicator"].unique())
    for ind in inds:
        for strat in sorted(_select(inequality, level, code, indicator=ind)["stratifier"].unique()):
            traces = [quintile_trace(quintiles, level, code, ind, strat, start, end),
                      *commune_traces(deprivation, level, code, ind, strat, start, end),
                      yearly_rii_trace(inequality, level, code, ind, strat)]
            line, trend_txt = rii_trend(gap_trends, level, code, ind, strat, start, end)
            traces += [line] if line is not None else []
            idx = list(range(len(data), len(data) + len(traces)))
            data += traces
            label = stratifier_labels.get(strat, strat)
            options.append(dict(idx=idx, label=t("inequity.option", ind=indicator_short(ind), strat=label),
                                title=t("inequity.title", ind=indicator_short(ind), period=f"{start}-{end}",
                                        strat=label, area=area_name),
                                rii=t("inequity.rii_title", trend=trend_txt)))
    if not options:
        return None
    vis = visibility([o["idx"] for o in options], len(data))
    for trace, v in zip(data, vis[0]):
        trace["visible"] = v
    return dict(data=data, layout=lay_out(options, vis, inds))


def gap_label(gap: str | None) -> str:
    return t(f"gap.{gap}") if gap else ""


def measures_table(inequality: pd.DataFrame, gap_trends: pd.DataFrame, stratifier_labels: dict, level: str,
                   code: str, area_name: str) -> str:
    """The summary measures of the full window, first indicator, every stratifier."""
    rows = _select(inequality, level, code, period_kind="full_window")
    if rows.empty:
        return ""
    ind = indicator_order(rows["indicator"].unique())[0]
    rows = rows[rows["indicator"] == ind]
    strats = sorted(rows["stratifier"].unique())
    head = "".join(f"<th>{esc(stratifier_labels.get(s, s))}</th>" for s in strats)
    body = []
    for m in MEASURES:
        cells = []
        for s in strats:
            r = rows[(rows["stratifier"] == s) & (rows["measure"] == m)]
            if r.empty:
                cells.append("<td></td>")
                continue
            r = r.iloc[0]
            digits = 3 if m == "CIX" else (1 if m in ("PAF", "avoidable_deaths") else 2)
            text = t("inequity.estimate", est=fmt(r["estimate"], digits), lo=fmt(r["ci95_lower"], digits),
                     hi=fmt(r["ci95_upper"], digits))
            cells.append(f'<td class="num">{text}</td>')
        body.append(f"<tr><th scope=\"row\">{esc(t(f'inequity.measure.{m}', unit=unit(ind)))}</th>{''.join(cells)}</tr>")
    gap = []
    for s in strats:
        g = gap_trends[(gap_trends["area_level"] == level) & (gap_trends["area_code"] == code)
                       & (gap_trends["indicator"] == ind) & (gap_trends["stratifier"] == s)]
        g = g.sort_values("period_end", ascending=False).assign(span=g["period_end"] - g["period_start"])
        g = g.sort_values("span", ascending=False)
        gap.append(f"<td>{esc(gap_label(g.iloc[0]['gap_change'])) if not g.empty else ''}</td>")
    body.append(f"<tr><th scope=\"row\">{esc(t('inequity.table.gap'))}</th>{''.join(gap)}</tr>")
    period = f"{int(rows.iloc[0]['period_start'])}-{int(rows.iloc[0]['period_end'])}"
    return (f"<p>{t('inequity.table.intro', ind=esc(indicator_short(ind)), period=period)}</p>"
            f'<div class="table-wrap" tabindex="0" role="region" aria-label="{esc(t("inequity.table.label", area=area_name))}">'
            f'<table class="data" id="inequality-{esc(code)}"><thead><tr><th scope="col">'
            f"{esc(t('inequity.table.measure'))}</th>{head}</tr></thead><tbody>{''.join(body)}</tbody></table></div>")
