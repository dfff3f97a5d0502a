"""The report page: the country's headline and trends, a region selector, and per region the
headline, ranking, trends, funnel plot, map and comparison table; then the study reproduced,
definitions and data quality. One self-contained HTML file: plotly.js, the style sheet, the script and every
figure's data are inlined."""

from __future__ import annotations

import base64
import datetime as _dt
import gzip
import json
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path

import pandas as pd
import plotly.io as pio
from plotly.offline import get_plotlyjs

from infant_mortality.report.benchmarks import (
    BENCHMARK_HEADERS,
    benchmark_figure,
    benchmark_finding,
    benchmark_rows,
    benchmark_table_rows,
)
from infant_mortality.report.bym2_clusters import MODEL_TABLE_HEADERS, ModelMarts, model_table_rows
from infant_mortality.report.choropleth import choropleth_figure
from infant_mortality.report.combos import combos_of
from infant_mortality.report.context import RenderContext
from infant_mortality.report.formats import fmt, fmt_apc, fmt_ci, num, unit
from infant_mortality.report.labels import (
    indicator_ages,
    indicator_long,
    indicator_order,
    indicator_short,
    method_label,
    trend_has_class,
    trend_label,
)
from infant_mortality.report.findings import (
    bym2_finding,
    cluster_finding,
    funnel_finding,
    inequity_finding,
    map_finding,
    ranking_finding,
    trends_finding,
)
from infant_mortality.report.funnel import funnel_figure
from infant_mortality.report.i18n import DEFAULT_LANGUAGE, js_messages, pick, t
from infant_mortality.report.inequity import gap_label, inequity_figure, measures_table
from infant_mortality.report.marts import (
    Marts,
    Settings,
    pooled_rate,
    RowsByArea,
    trend_row,
    trend_windows,
    trends_in_window,
)
from infant_mortality.report.mart_text import localised, reason
from infant_mortality.report.ranking import ranking_figure
from infant_mortality.report.study import study_html
from infant_mortality.report.tables import audit_html, comparison_table, esc, table_box
from infant_mortality.report.trends import trends_figure

# The region shown first: the Metropolitan Region, the study's.
DEFAULT_REGION = "13"


def static_text(name: str) -> str:
    """A file of the package's `static/` folder (CSS, JavaScript)."""
    return files("infant_mortality.report").joinpath("static", name).read_text(encoding="utf-8")


def figure_json(fig) -> str:
    """A figure's JSON; plain dicts (built without plotly's objects) are written as they are."""
    if isinstance(fig, dict):
        return json.dumps(fig, separators=(",", ":"), allow_nan=False)
    return pio.to_json(fig, validate=True, pretty=False, remove_uids=True)


def encode_spec(text: str) -> str:
    """A figure's JSON, gzip-compressed and base64-encoded (decoded by report.js)."""
    return base64.b64encode(gzip.compress(text.encode("utf-8"), compresslevel=9, mtime=0)).decode("ascii")


class FigureStore:
    """Collects the figures' and tables' data; `figure()` returns a figure's block (its menu, its
    placeholder and its text alternative), `scripts()` the data elements (`<id>-data`)."""

    def __init__(self):
        self.specs: dict[str, str] = {}

    def add(self, data_id: str, value) -> None:
        self.specs[data_id] = encode_spec(figure_json(value))

    def figure(self, fig_id: str, fig, finding: str, data_note: str = "") -> str:
        """The figure in a <figure>: its menu (an HTML select, reachable by keyboard), the plot, and
        as caption the finding (its text alternative) and where its data table is."""
        self.add(fig_id, fig)
        # The layout's meta as it is (a go.Layout's to_plotly_json copies the whole layout).
        meta = (fig["layout"].get("meta") if isinstance(fig, dict) else fig.layout.meta) or {}
        options = meta.get("menu") or []
        select = ""
        if options:
            opts = "".join(f'<option value="{i}">{esc(o["label"])}</option>' for i, o in enumerate(options))
            select = (f'<p class="figure-menu"><label for="{fig_id}-menu">{esc(meta.get("menu_label", ""))}:</label> '
                      f'<select id="{fig_id}-menu" class="figure-select" data-figure="{fig_id}">{opts}</select></p>')
        return (f'<figure class="chart" aria-labelledby="{fig_id}-finding">{select}'
                f'<div class="figure" id="{fig_id}" data-fig="{fig_id}-data"></div>'
                f'<figcaption class="finding" id="{fig_id}-finding"><b>{esc(t("finding.label"))}</b> {esc(finding)}'
                f"{(' ' + data_note) if data_note else ''}</figcaption></figure>")

    def data_table(self, table_id: str, summary: str, headers: list[str], rows: list[list], opened: bool = False) -> str:
        """A figure's data as a sortable table in a <details> (closed unless `opened`), filled by
        report.js when shown."""
        self.add(table_id, {"rows": [["", cells] for cells in rows]})
        head = "".join(f'<th scope="col" title="{esc(t("table.sort"))}">{esc(h)}</th>' for h in headers)
        table = (f'<table class="data sortable" id="{table_id}" data-rows="{table_id}-data">'
                 f"<thead><tr>{head}</tr></thead><tbody></tbody></table>")
        return (f'<details class="figure-data"{" open" if opened else ""}><summary>{esc(summary)}</summary>'
                f"{table_box(table_id, summary, table)}</details>")

    def scripts(self) -> str:
        return "\n".join(
            f'<script type="application/octet-stream" id="{fid}-data">{spec}</script>'
            for fid, spec in self.specs.items()
        )


# --------------------------------------------------------------------------------------------
# Text
# --------------------------------------------------------------------------------------------


def method_name(s: Settings) -> str:
    """The headline trend method as the page names it (the build's, from meta_build)."""
    return method_label(s.trend_method, s.trend_method_label)


def glossary_html(present: list[str], s: Settings, ctx: RenderContext) -> str:
    rows = [
        (indicator_long(ind.code), t("glossary.indicator", ages=indicator_ages(ind), unit=unit(ind.code))
         + ("" if ind.code in present else t("glossary.absent")))
        for ind in ctx.indicators
    ]
    every = [ind.code for ind in ctx.indicators]
    rows += [
        (t("glossary.pooled"), t("glossary.pooled.text", unit=unit(present or every))),
        (t("glossary.rt"), t("glossary.rt.text")),
        (t("glossary.rap"), t("glossary.rap.text", unit=unit(present or every))),
        (t("glossary.rap_pct"), t("glossary.rap_pct.text")),
        (t("glossary.significant"), t("glossary.significant.text", alpha=fmt(s.comparison_alpha, 2))),
        (t("glossary.unreliable"), t("glossary.unreliable.text", n=s.unreliable_below_deaths)),
        (t("glossary.trend"), t("glossary.trend.text", method=method_name(s), p=fmt(s.trend_p_threshold, 2))),
    ]
    body = "".join(f'<tr><th scope="row">{esc(k)}</th><td>{esc(v)}</td></tr>' for k, v in rows)
    return f'<table class="glossary">{body}</table>'


def _trend_text(tr: dict | None) -> str:
    if tr is None:
        return t("headline.no_trend")
    period = f"{int(tr['period_start'])}-{int(tr['period_end'])}"
    if not trend_has_class(tr):
        return t("headline.trend_none", period=period, cls=esc(trend_label(tr["trend"]).lower()))
    return t("headline.trend", period=period, cls=esc(trend_label(tr["trend"]).lower()), apc=esc(fmt_apc(tr)))


def _rate_text(label: str, reg: dict | None) -> str:
    if reg is None:
        return t("headline.no_rate", label=label)
    return t("headline.rate", label=label, rate=fmt(reg["rate_per_1000"]), ci=fmt_ci(reg["ci95_lower"], reg["ci95_upper"]),
             unit=unit(reg["indicator"]),
             deaths=fmt(reg["deaths"], 0, thousands=True), births=fmt(reg["live_births"], 0, thousands=True))


def headline_html(name: str, level: str, code: str, comparison: pd.DataFrame, area_periods: pd.DataFrame,
                  trends_w: pd.DataFrame) -> str:
    """The area's pooled rate and trend per indicator (widest period), and how many communes
    differ significantly from the rest of their region."""
    combos = combos_of(comparison)
    items = []
    for ind in indicator_order(comparison["indicator"].unique()):
        combo = next(c for c in combos if c.indicator == ind)
        df = combo.select(comparison)
        n_hi, n_lo = int((df.comparison == "higher").sum()), int((df.comparison == "lower").sum())
        items.append(
            f"<li><b>{esc(indicator_short(ind))} {combo.period_label}</b>: "
            f"{_rate_text(t('headline.' + level), pooled_rate(area_periods, combo))}; "
            f"{_trend_text(trend_row(trends_w, level, code, ind))}. "
            + t("headline.counts" if level == "region" else "headline.counts_country", n_hi=n_hi, n=len(df), n_lo=n_lo)
            + "</li>"
        )
    return f'<div class="headline"><b>{esc(name)}</b><ul>{"".join(items)}</ul></div>'


# --------------------------------------------------------------------------------------------
# Figures of an area
# --------------------------------------------------------------------------------------------


@dataclass
class RegionFigures:
    region_code: str
    region_name: str
    ranking: object
    funnel: object
    map: object
    trends: dict  # indicator -> figure
    trend_series: dict  # indicator -> the series drawn (see `_series`)


@dataclass
class TrendMarts:
    """The trend rows the figures show: the headline method's and the second method's (each in the
    window the report shows) and the joinpoint segments; and the yearly rates."""

    headline: pd.DataFrame
    other: pd.DataFrame
    segments: pd.DataFrame
    rates: pd.DataFrame

    @classmethod
    def of(cls, marts: Marts) -> "TrendMarts":
        windows = trend_windows(marts.trends)
        return cls(trends_in_window(marts.trends, windows), trends_in_window(marts.other_trends, windows),
                   trends_in_window(marts.segments, windows), marts.rates)

    def __post_init__(self):
        # Each area's rows, looked up per area in `_series`.
        self.headline_by, self.other_by = RowsByArea(self.headline), RowsByArea(self.other)
        self.segments_by, self.rates_by = RowsByArea(self.segments), RowsByArea(self.rates)


def _series(tm: TrendMarts, level: str, areas, ind: str):
    """(code, name, yearly rows, headline trend row, second method's row, joinpoint segments) of
    each area, in the order given."""
    out = []
    no_segments = tm.segments.iloc[:0]
    for code, name in areas:
        key = (level, code, ind)
        rows = tm.rates_by.get(key)
        if rows is not None:
            out.append((code, name, rows, tm.headline_by.first(key), tm.other_by.first(key),
                        tm.segments_by.get(key, no_segments)))
    return out


def region_figures(marts: Marts, region_code: str, ctx: RenderContext | None = None) -> RegionFigures:
    """All figures of one region (also used for the screenshots), in the render context `ctx`
    (by default the one of `marts` in the default language)."""
    with (ctx or RenderContext.of(marts)).active():
        return _region_figures(marts, region_code)


def _region_figures(marts: Marts, region_code: str) -> RegionFigures:
    comp = marts.comparison[marts.comparison.region_code == region_code]
    region_name = str(comp.region_name.dropna().iloc[0])
    area_periods = marts.area_rates[(marts.area_rates.area_level == "region")
                                    & (marts.area_rates.area_code == region_code)]
    windows = trend_windows(marts.trends)
    tm = TrendMarts.of(marts)
    trends_w = tm.headline
    trends_region = trends_w[trends_w.region_code == region_code]
    smoothed = marts.smoothed[marts.smoothed.commune_code.isin(comp.commune_code)]
    method = method_name(marts.settings)
    fig_map = choropleth_figure(comp, smoothed, marts.communes, marts.geojson,
                                trends_region[trends_region.area_level == "commune"], region_name, region_code,
                                method, marts.settings.exceedance_probability_threshold, windows,
                                models=model_marts(marts, comp.commune_code))
    names = comp[["commune_code", "commune_name"]].drop_duplicates().sort_values("commune_name")
    trend_figs, series = {}, {}
    for ind in indicator_order(comp.indicator.unique()):
        series[ind] = (_series(tm, "region", [(region_code, t("trends.region_suffix", name=region_name))], ind)
                       + _series(tm, "commune", names.itertuples(index=False), ind))
        trend_figs[ind] = trends_figure(series[ind], ind, region_code, method, marts.settings.trend_min_deaths)
    return RegionFigures(region_code, region_name, ranking_figure(comp, area_periods, region_name, region_code,
                                                                  marts.settings),
                         funnel_figure(comp, area_periods, marts.funnel_limits[marts.funnel_limits.region_code == region_code],
                                       region_name, region_code), fig_map, trend_figs, series)


def _trend_caption(ind: str, window, area: str, count_basis: str, method: str) -> str:
    text = t("trends.caption", ind=esc(indicator_long(ind)), area=esc(area), method=esc(method), unit=unit(ind),
             window="" if window is None else f"{window[0]}-{window[1]}", basis=esc(count_basis))
    return f'<p class="caption">{text}</p>'



def _trend_table(store: FigureStore, table_id: str, series, ind: str) -> str:
    """The data of a trends figure: per area its class, APC and yearly rates (the marts' values)."""
    years = sorted({int(y) for _, _, rows, *_ in series for y in rows["year"]})
    rows = []
    for _, name, yearly, trend, _, _ in series:
        by_year = dict(zip(yearly["year"].astype(int), yearly["rate_per_1000"]))
        rows.append([name, trend_label(trend["trend"]) if trend else "", fmt_apc(trend) if trend_has_class(trend) else "",
                     *[[fmt(by_year.get(y)), num(by_year.get(y))] for y in years]])
    return store.data_table(table_id, t("data.trends", ind=indicator_short(ind)),
                            [t("col.area"), t("col.trend"), t("col.apc"), *[str(y) for y in years]], rows)


def _trend_blocks(store: FigureStore, figs: dict, series: dict, prefix: str, windows: dict, area: str,
                  count_basis: str, method: str, findings: dict) -> list[str]:
    parts = []
    for j, (ind, fig) in enumerate(figs.items()):
        caption = _trend_caption(ind, windows.get(ind), area, count_basis, method)
        block = (store.figure(f"{prefix}-{ind}", fig, findings[ind])
                 + _trend_table(store, f"data-{prefix}-{ind}", series[ind], ind))
        if j == 0:
            parts.append(f"<h4>{esc(indicator_long(ind))}</h4>{caption}{block}")
        else:
            parts.append(f"<details><summary>{esc(indicator_long(ind))}</summary>{caption}{block}</details>")
    return parts


def _trend_findings(series: dict, level: str, area_name: str, members: str) -> dict:
    out = {}
    for ind, ser in series.items():
        ref = ser[0][3] if ser else None
        member_trends = pd.DataFrame([{"trend": s[3]["trend"]} for s in ser[1:] if s[3] is not None],
                                     columns=["trend"])
        out[ind] = trends_finding(area_name, ind, ref, member_trends, members)
    return out


def inequity_html(marts: Marts, store: FigureStore, level: str, code: str, name: str, heading: str) -> str:
    """Section "Desigualdad" of an area: empty when the area has no inequity rows."""
    q = marts.inequity
    labels = {r["stratifier"]: pick(r["label_es"], r["label_en"]) for r in q["dim_stratifier"].to_dict("records")}
    fig = inequity_figure(q["fct_rates_by_quintile"], q["fct_commune_deprivation"], q["fct_inequality"],
                          q["fct_inequality_trends"], labels, level, code, name)
    if fig is None:
        return ""
    first = next(tr for tr in fig["data"] if tr["visible"])["meta"]
    ind, strat = first["indicator"], first["stratifier"]
    rii = [tr for tr in fig["data"] if tr["visible"] and tr["meta"]["kind"] == "rii_trend"]
    gap = gap_label(rii[0]["meta"]["gap_change"]) if rii else ""
    finding = inequity_finding(q["fct_inequality"], level, code, name, ind, strat, labels.get(strat, strat), gap)
    quint = next(tr for tr in fig["data"] if tr["visible"] and tr["meta"]["kind"] == "quintiles")
    rows = [[str(x), [fmt(y), y], [str(cd[0]), cd[0]], [fmt(cd[1], 0, thousands=True), cd[1]],
             [fmt(cd[2], 0, thousands=True), cd[2]]]
            for x, y, cd in zip(quint["x"], quint["y"], quint["customdata"])]
    table = store.data_table(f"data-fig-inequity-{code}",
                             t("data.inequity", ind=indicator_short(ind), strat=labels.get(strat, strat)),
                             [t("col.quintile"), t("col.rate_per_1000", unit=unit(ind)), t("col.n_communes"), t("col.deaths"),
                              t("col.live_births")], rows)
    return "\n".join([
        f"<h3>{heading}</h3>",
        f'<p class="caption">{t("inequity.caption", method=esc(method_name(marts.settings)))}</p>',
        store.figure(f"fig-inequity-{code}", fig, finding),
        table,
        measures_table(q["fct_inequality"], q["fct_inequality_trends"], labels, level, code, name),
    ])


def country_html(marts: Marts, store: FigureStore, count_basis: str, ctx: RenderContext) -> str:
    """The country's headline and the trends of the country and every region (only when the
    warehouse has country rows, i.e. several regions)."""
    country = marts.rates[marts.rates.area_level == "country"][["area_code", "area_name"]].drop_duplicates()
    if country.empty:
        return ""
    code, name = country.iloc[0]
    windows = trend_windows(marts.trends)
    tm = TrendMarts.of(marts)
    trends_w = tm.headline
    area_periods = marts.area_rates[marts.area_rates.area_level == "country"]
    regions = (marts.rates[marts.rates.area_level == "region"][["area_code", "area_name"]].drop_duplicates()
               .sort_values("area_code").itertuples(index=False))
    regions = list(regions)
    method = method_name(marts.settings)
    figs, series = {}, {}
    for ind in indicator_order(marts.comparison.indicator.unique()):
        series[ind] = (_series(tm, "country", [(code, t("trends.country_suffix", name=name))], ind)
                       + _series(tm, "region", regions, ind))
        figs[ind] = trends_figure(series[ind], ind, code, method, marts.settings.trend_min_deaths)
    findings = _trend_findings(series, "country", name, t("finding.members.regions"))
    parts = [f'<section class="country-block" data-area="{esc(code)}">',
             f"<h2>{t('country.heading', name=esc(name), n=len(regions))}</h2>",
             headline_html(name, "country", code, marts.comparison, area_periods, trends_w),
             f"<h3>{t('country.trends', method=esc(method))}</h3>",
             *_trend_blocks(store, figs, series, f"fig-trends-{code}", windows, t("country.trends.area"),
                            count_basis, method, findings),
             benchmarks_html(marts, store, code),
             inequity_html(marts, store, "country", code, name, t("country.inequity")),
             "</section>"]
    return "\n".join(parts)


def benchmarks_html(marts: Marts, store: FigureStore, code: str) -> str:
    """The country against UN IGME, first indicator (the table and a small figure)."""
    ind = indicator_order(marts.comparison.indicator.unique())[0]
    rows = benchmark_rows(marts.benchmarks, ind)
    compared = rows[rows["unavailable_reason"].isna()]
    head = f"<h3>{esc(t('bench.heading'))}</h3>"
    if compared.empty:
        reasons = ", ".join(sorted(reason(code) for code in rows["unavailable_reason"].dropna().unique())) or t("finding.none")
        return head + f'<p class="note">{esc(t("bench.unavailable", reasons=reasons))}</p>'
    return (head + f'<p class="caption">{t("bench.caption", ind=esc(indicator_short(ind)))}</p>'
            + store.figure(f"fig-benchmarks-{code}", benchmark_figure(compared, ind), benchmark_finding(compared, ind))
            + store.data_table(f"data-fig-benchmarks-{code}", t("bench.data"), [t(h, unit=unit(ind)) for h in BENCHMARK_HEADERS],
                               benchmark_table_rows(compared), opened=True))


def screening_html(screening: pd.DataFrame, combo, code: str, method: str) -> str:
    """The region's communes by screening category, the worse-and-worsening first."""
    df = combo.select(screening[screening["region_code"] == code]).sort_values(["screening_order", "commune_name"])
    if df.empty:
        return ""
    items = "".join(f"<li><b>{esc(t('screening.' + cat))}</b> ({len(g)}): {esc(', '.join(g['commune_name']))}</li>"
                    for cat, g in df.groupby("screening_category", sort=False))
    return (f"<h3>{esc(t('screening.heading'))}</h3>"
            f'<p class="caption">{t("screening.caption", method=esc(method), combo=esc(combo.label))}</p>'
            f'<ul class="screening">{items}</ul>')


def model_marts(marts: Marts, codes) -> ModelMarts:
    """The BYM2 and cluster rows of these communes, with the build's cluster FDR."""
    return ModelMarts(marts.bym2, marts.clusters, marts.settings.cluster_fdr_alpha).of_communes(codes)


def map_html(marts: Marts, store: FigureStore, figs: RegionFigures, comp: pd.DataFrame, code: str, name: str) -> str:
    """The map with its caption, its text alternative (the default option's finding; BYM2 and
    clusters in words for every indicator and period, and as a table) and the outlined communes."""
    s = marts.settings
    combos = combos_of(comp)
    default = combos[0]
    models = model_marts(marts, comp.commune_code)
    meta = figs.map.layout.meta or {}
    missing = meta.get("not_on_map") or []
    caption = t("map.caption", alpha=fmt(s.comparison_alpha, 2), cut=fmt(s.exceedance_probability_threshold, 2),
                fdr=fmt(s.cluster_fdr_alpha, 2))
    if missing:
        caption += t("map.not_on_map", names=esc(", ".join(missing)))
    parts = [f"<h3>{t('map.heading')}</h3>", f'<p class="caption">{caption}</p>']
    opts = {(o["measure"], o["combo"]): o["significant"] for o in meta.get("options", [])}
    finding = " ".join([
        map_finding(comp, default, name, opts.get(("crude", default.key), []), opts.get(("exceedance", default.key)),
                    s.exceedance_probability_threshold),
        bym2_finding(models.bym2, default, s.exceedance_probability_threshold),
        cluster_finding(models.clusters, default, s.cluster_fdr_alpha)])
    parts.append(store.figure(f"fig-map-{code}", figs.map, finding, t("finding.table_note",
                                                                      table=f"comparison-table-{code}")))
    sig_items = [f"<li><b>{esc(o['label'])}</b>: {esc(', '.join(o['significant']) or t('finding.none'))}</li>"
                 for o in meta.get("options", []) if o["measure"] in ("rate_ratio", "exceedance", "bym2_exceedance")]
    if sig_items:
        parts.append(f"<details><summary>{esc(t('map.outlined'))}</summary><ul>{''.join(sig_items)}</ul></details>")
    cluster_items = "".join(f"<li><b>{esc(c.label)}</b>: {esc(cluster_finding(models.clusters, c, s.cluster_fdr_alpha))}"
                            f"</li>" for c in combos)
    parts.append(f"<details><summary>{esc(t('map.clusters.summary'))}</summary><ul>{cluster_items}</ul></details>")
    parts.append(store.data_table(f"data-fig-map-{code}-bym2", t("data.bym2"),
                                  [t(h, unit=unit(c.indicator for c in combos)) for h in MODEL_TABLE_HEADERS],
                                  model_table_rows(models, combos)))
    return "\n".join(parts)


def region_html(marts: Marts, store: FigureStore, code: str, name: str, count_basis: str, shown: bool,
                ctx: RenderContext) -> str:
    figs = region_figures(marts, code, ctx)
    comp = marts.comparison[marts.comparison.region_code == code]
    windows = trend_windows(marts.trends)
    trends_w = trends_in_window(marts.trends, windows)
    area_periods = marts.area_rates[(marts.area_rates.area_level == "region") & (marts.area_rates.area_code == code)]
    combos = combos_of(comp)
    default = combos[0]
    reg = pooled_rate(area_periods, default)
    s = marts.settings
    method = method_name(s)
    menu_note = t("region.menu_note") if len(combos) > 1 else ""
    table_note = t("finding.table_note", table=f"comparison-table-{code}")
    parts = [f'<section class="region-block" data-region="{esc(code)}"{"" if shown else " style=display:none"}>']
    parts.append(f"<h2>{t('region.heading', name=esc(name), n=comp.commune_code.nunique())}</h2>")
    parts.append(headline_html(name, "region", code, comp, area_periods, trends_w))
    parts.append(screening_html(marts.screening, default, code, method))
    no_rate = comp[comp["rate_per_1000"].isna()]
    if not no_rate.empty:
        items = ", ".join(f"{r.commune_name} ({indicator_short(r.indicator)} {r.period_label})"
                          for r in no_rate.sort_values(["commune_name", "indicator", "period_start"]).itertuples())
        parts.append(f'<p class="note">{t("region.no_rate", items=esc(items))}</p>')

    parts.append(f"<h3>{t('ranking.heading')}</h3>")
    caption = t("ranking.caption", alpha=fmt(s.comparison_alpha, 2), n=s.unreliable_below_deaths,
                unit=unit(c.indicator for c in combos),
                default=esc(default.label), menu=menu_note, basis=esc(count_basis))
    parts.append(f'<p class="caption">{caption}</p>')
    parts.append(store.figure(f"fig-ranking-{code}", figs.ranking,
                              ranking_finding(comp, default, name, reg), table_note))

    parts.append(f"<h3>{t('trends.heading', method=esc(method))}</h3>")
    series = figs.trend_series
    parts += _trend_blocks(store, figs.trends, series, f"fig-trends-{code}", windows, t("region.trends.area"),
                           count_basis, method, _trend_findings(series, "region", name, t("finding.members.communes")))

    parts.append(f"<h3>{t('funnel.heading')}</h3>")
    parts.append(f'<p class="caption">{t("funnel.caption", default=esc(default.label), menu=menu_note)}</p>')
    parts.append(store.figure(f"fig-funnel-{code}", figs.funnel, funnel_finding(comp, default, name, reg), table_note))

    parts.append(map_html(marts, store, figs, comp, code, name))

    parts.append(inequity_html(marts, store, "region", code, name, t("region.inequity")))
    parts.append(f'<h3 id="comparison-table-{code}-heading">{t("table.heading")}</h3>')
    parts.append(f'<p class="caption">{t("table.caption")}</p>')
    table_html, table_rows = comparison_table(f"comparison-table-{code}", comp, combos, name)
    store.add(f"comparison-table-{code}", table_rows)
    parts.append(table_html)
    parts.append("</section>")
    return "\n".join(parts)


def _count_basis(marts: Marts) -> str:
    return localised(marts.settings.count_basis) or t("header.no_basis")


def build_html(marts: Marts, lang: str = DEFAULT_LANGUAGE) -> str:
    """The page of `marts` in the language `lang`, drawn in one render context."""
    ctx = RenderContext.of(marts, lang)
    with ctx.active():
        return _page_html(marts, ctx)


def _page_html(marts: Marts, ctx: RenderContext) -> str:
    comparison = marts.comparison
    # Region names as the region's own rows carry them (one per region).
    names = (marts.rates[marts.rates.area_level == "region"].drop_duplicates("area_code")
             .set_index("area_code")["area_name"].to_dict())
    regions = [(code, names.get(code, code)) for code in sorted(comparison["region_code"].dropna().unique())]
    codes = [c for c, _ in regions]
    first = DEFAULT_REGION if DEFAULT_REGION in codes else codes[0]
    present = indicator_order(comparison["indicator"].unique())
    store = FigureStore()
    count_basis = _count_basis(marts)
    country = country_html(marts, store, count_basis, ctx)
    blocks = [region_html(marts, store, code, name, count_basis, code == first, ctx) for code, name in regions]

    selector = ""
    if len(regions) > 1:
        opts = "".join(f'<option value="{esc(c)}"{" selected" if c == first else ""}>{esc(c)} · {esc(n)}</option>'
                       for c, n in regions)
        selector = (
            f'<p class="region-picker"><label for="region-select"><b>{esc(t("picker.label"))}</b></label> '
            f'<select id="region-select" class="region-select" data-default="{esc(first)}">{opts}</select> '
            f'<a href="#regions">{esc(t("picker.jump"))}</a></p>'
            '<p class="note" id="region-notice" role="status" hidden></p>'
        )
    years = marts.rates["year"]
    period = f"{int(years.min())}-{int(years.max())}" if len(years) else ""
    title = t("page.title")
    scope = "Chile" if country else ", ".join(n for _, n in regions)
    generated = _dt.datetime.now().strftime("%Y-%m-%d %H:%M")
    built = (t("header.built", when=esc(marts.settings.built_at))
             + (t("header.commit", commit=esc(marts.settings.git_commit)) if marts.settings.git_commit else "") + ".")
    basis_cls = ' class="generated-data"' if "generat" in (marts.settings.count_basis or "").lower() else ""
    messages = dict(js_messages(), locale=ctx.language)
    messages_json = json.dumps(messages, ensure_ascii=False).replace("</", "<\\/")
    return f"""<!DOCTYPE html>
<html lang="{ctx.language}">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{esc(title)}: {esc(scope)} {period}</title>
<style>{static_text("report.css")}</style>
<script>{static_text("errors.js")}</script>
</head>
<body>
<header>
<h1>{esc(title)}</h1>
<p>{t("header.scope", scope=esc(scope), period=period, inds=esc(", ".join(indicator_long(i) for i in present)))}</p>
<p{basis_cls}>{t("header.counts", basis=esc(count_basis))}</p>
<p>{t("header.generated", when=generated, file=esc(marts.warehouse.name))}{built}</p>
</header>
<main>
<div id="js-errors"></div>
{selector}
{country}
<span id="regions"></span>
{"".join(blocks)}
{study_html(marts.study_findings, marts.settings.trend_p_threshold)}
<h2>{esc(t("definitions.heading"))}</h2>
{glossary_html(present, marts.settings, ctx)}
<h2>{esc(t("quality.heading"))}</h2>
<p class="caption">{t("quality.caption")}</p>
{audit_html(marts.audit, marts.communes)}
<footer>{t("footer")}</footer>
</main>
<script type="application/json" id="report-messages">{messages_json}</script>
<script type="application/octet-stream" id="plotly-js">{encode_spec(get_plotlyjs())}</script>
{store.scripts()}
<script>{static_text("report.js")}</script>
</body>
</html>
"""


def write_report(marts: Marts, output, lang: str = DEFAULT_LANGUAGE) -> Path:
    text = build_html(marts, lang)
    output = Path(output)
    output.parent.mkdir(parents=True, exist_ok=True)
    tmp = output.with_name(output.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(output)
    return output
