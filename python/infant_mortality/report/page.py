"""The report page: the country's headline and trends, a region selector, and per region the
headline, ranking, trends, funnel plot, map and comparison table; then definitions and data
quality. One self-contained HTML file: plotly.js, the style sheet, the script and every
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

from infant_mortality.report.choropleth import EXCEEDANCE_SIGNIFICANT, choropleth_figure
from infant_mortality.report.common import (
    TREND_LABELS,
    combos_of,
    fmt,
    fmt_apc,
    indicator_long,
    indicator_order,
    indicator_short,
    indicators,
    use_indicators,
)
from infant_mortality.report.funnel import funnel_figure
from infant_mortality.report.inequity import inequity_figure, measures_table
from infant_mortality.report.marts import Marts, Settings, pooled_rate, trend_row, trend_windows, trends_in_window
from infant_mortality.report.ranking import ranking_figure
from infant_mortality.report.tables import audit_html, comparison_table, esc
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


def decode_spec(text: str) -> dict:
    return json.loads(gzip.decompress(base64.b64decode(text)).decode("utf-8"))


class FigureStore:
    """Collects the figures' and tables' data; `div()` returns a figure's placeholder,
    `scripts()` the data elements (`<id>-data`)."""

    def __init__(self):
        self.specs: dict[str, str] = {}

    def add(self, data_id: str, value) -> None:
        self.specs[data_id] = encode_spec(figure_json(value))

    def div(self, fig_id: str, fig) -> str:
        self.add(fig_id, fig)
        return f'<div class="figure" id="{fig_id}" data-fig="{fig_id}-data"></div>'

    def scripts(self) -> str:
        return "\n".join(
            f'<script type="application/octet-stream" id="{fid}-data">{spec}</script>'
            for fid, spec in self.specs.items()
        )


# --------------------------------------------------------------------------------------------
# Text
# --------------------------------------------------------------------------------------------


def glossary_html(present: list[str], s: Settings) -> str:
    rows = [
        (indicator_long(code), f"deaths at ages {ind.ages} in the year, per 1000 live births of the year "
         "(mother's commune of residence)" + ("" if code in present else "; not in this warehouse"))
        for code, ind in indicators().items()
    ]
    rows += [
        ("Pooled rate", "sum of deaths / sum of live births over the period's years, times 1000 (never an average of "
         "yearly rates); 95% CI: exact Poisson (Garwood) limits."),
        ("RT, razón de tasas (RR, rate ratio)", "commune rate / region rate (the region includes the commune)."),
        ("RAP, riesgo atribuible poblacional (excess rate, PAR)", "commune rate − region rate, per 1000 live births."),
        ("RAP% (attributable percent, AR%)", "100 (commune rate − region rate) / commune rate = 100 (RT − 1) / RT."),
        ("Significantly higher / lower", f"two-sided mid-p < {s.comparison_alpha:g} of the exact conditional test of "
         "the commune against the rest of the region (the region minus the commune)."),
        ("Unreliable", f"fewer than {s.unreliable_below_deaths} deaths (CDC/NCHS convention): the rate is shown, but "
         "read it with care."),
        ("Trend, APC (annual percent change, variación porcentual anual)",
         "Prais-Winsten regression of log10(rate) on year with AR(1) errors; APC = (10^slope − 1) × 100; "
         f"increasing / decreasing when p < {s.trend_p_threshold:g}, else stationary."),
    ]
    body = "".join(f"<tr><td><b>{esc(k)}</b></td><td>{esc(v)}</td></tr>" for k, v in rows)
    return f'<table class="glossary">{body}</table>'


def _trend_text(tr: dict | None) -> str:
    if tr is None:
        return "trend: none in <code>marts.fct_trends</code>"
    return (f"trend {int(tr['period_start'])}-{int(tr['period_end'])}: "
            f"<b>{esc(TREND_LABELS.get(tr['trend'], tr['trend']).lower())}</b>, {esc(fmt_apc(tr))} per year")


def _rate_text(label: str, reg: dict | None) -> str:
    if reg is None:
        return f"{label}: no pooled rate (a year without a rate; see Data quality)"
    return (f"{label} <b>{fmt(reg['rate_per_1000'])}</b> per 1000 live births (95% CI {fmt(reg['ci95_lower'])} to "
            f"{fmt(reg['ci95_upper'])}; {fmt(reg['deaths'], 0, thousands=True)} deaths, "
            f"{fmt(reg['live_births'], 0, thousands=True)} live births)")


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
        rest = "the rest of the region" if level == "region" else "the rest of their region"
        items.append(
            f"<li><b>{esc(indicator_short(ind))} {combo.period_label}</b>: "
            f"{_rate_text(level if level == 'region' else 'country', pooled_rate(area_periods, combo))}; "
            f"{_trend_text(trend_row(trends_w, level, code, ind))}. "
            f"<b>{n_hi}</b> of {len(df)} communes significantly <span class='higher'>higher</span> and "
            f"<b>{n_lo}</b> significantly <span class='lower'>lower</span> than {rest}.</li>"
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


def _series(rates: pd.DataFrame, trends_w: pd.DataFrame, level: str, areas, ind: str):
    """(code, name, yearly rows, trend row) of each area, in the order given."""
    out = []
    for code, name in areas:
        rows = rates[(rates.area_level == level) & (rates.area_code == code) & (rates.indicator == ind)]
        if not rows.empty:
            out.append((code, name, rows, trend_row(trends_w, level, code, ind)))
    return out


def region_figures(marts: Marts, region_code: str) -> RegionFigures:
    """All figures of one region (also used for the screenshots)."""
    comp = marts.comparison[marts.comparison.region_code == region_code]
    region_name = str(comp.region_name.dropna().iloc[0])
    area_periods = marts.area_rates[(marts.area_rates.area_level == "region")
                                    & (marts.area_rates.area_code == region_code)]
    windows = trend_windows(marts.trends)
    trends_w = trends_in_window(marts.trends, windows)
    trends_region = trends_w[trends_w.region_code == region_code]
    smoothed = marts.smoothed[marts.smoothed.commune_code.isin(comp.commune_code)]
    fig_map = choropleth_figure(comp, smoothed, marts.communes, marts.geojson,
                                trends_region[trends_region.area_level == "commune"], region_name, region_code, windows)
    names = comp[["commune_code", "commune_name"]].drop_duplicates().sort_values("commune_name")
    trend_figs = {}
    for ind in indicator_order(comp.indicator.unique()):
        series = (_series(marts.rates, trends_w, "region", [(region_code, f"{region_name} (region)")], ind)
                  + _series(marts.rates, trends_w, "commune", names.itertuples(index=False), ind))
        trend_figs[ind] = trends_figure(series, ind, region_code)
    return RegionFigures(region_code, region_name, ranking_figure(comp, area_periods, region_name, region_code,
                                                                  marts.settings),
                         funnel_figure(comp, area_periods, marts.funnel_limits[marts.funnel_limits.region_code == region_code],
                                       region_name, region_code), fig_map, trend_figs)


def _trend_caption(ind: str, window, area: str, count_basis: str) -> str:
    return (
        f'<p class="caption">{esc(indicator_long(ind))}: yearly rates per 1000 live births (points) with exact '
        f"Poisson 95% CIs (whiskers), {area}; the line is the Prais-Winsten trend "
        f"{'' if window is None else f'{window[0]}-{window[1]}'} of <code>marts.fct_trends</code>, "
        "log10(rate) = intercept_log10 + slope_log10 × year (red increasing, blue decreasing, grey stationary), "
        "with its class and APC (annual percent change) in each title. Years with a zero rate are left out of the "
        f"log-scale fit; unavailable years are not plotted. Each panel has its own vertical scale. Source: "
        f"<code>marts.fct_area_year_rates</code> and <code>marts.fct_trends</code>; counts: {esc(count_basis)}.</p>"
    )


def _trend_blocks(store: FigureStore, figs: dict, prefix: str, windows: dict, area: str, count_basis: str) -> list[str]:
    parts = []
    for j, (ind, fig) in enumerate(figs.items()):
        caption = _trend_caption(ind, windows.get(ind), area, count_basis)
        fig_div = store.div(f"{prefix}-{ind}", fig)
        if j == 0:
            parts.append(f"<h4>{esc(indicator_long(ind))}</h4>{caption}{fig_div}")
        else:
            parts.append(f"<details><summary>{esc(indicator_long(ind))}</summary>{caption}{fig_div}</details>")
    return parts


def inequity_html(marts: Marts, store: FigureStore, level: str, code: str, name: str, heading: str) -> str:
    """Section "Desigualdad / Inequity" of an area: empty when the area has no inequity rows."""
    q = marts.inequity
    labels = q["dim_stratifier"].set_index("stratifier")["label_en"].to_dict()
    fig = inequity_figure(q["fct_rates_by_quintile"], q["fct_commune_deprivation"], q["fct_inequality"],
                          q["fct_inequality_trends"], labels, level, code, name)
    if fig is None:
        return ""
    return "\n".join([
        f"<h3>{heading}</h3>",
        '<p class="caption">Does infant mortality follow poverty? Communes are ordered from most to least deprived '
        "by the stratifier (higher value = more deprived) and grouped into quintiles of live births (q1 most "
        "deprived, q5 least, the reference). Left: the pooled rate of each quintile with its exact 95% CI "
        "(<code>marts.fct_rates_by_quintile</code>). Middle: each commune's pooled rate against its deprivation, "
        "with the rate fitted by the Poisson regression on the commune's rank behind the SII and RII "
        "(<code>marts.fct_commune_deprivation</code>). Right: the RII of each single year with its 95% CI and its "
        "Prais-Winsten trend (<code>marts.fct_inequality</code>, <code>marts.fct_inequality_trends</code>): is the "
        "gap widening, narrowing or holding? Definitions: <code>docs/methods.md</code>. The menu switches indicator "
        "and stratifier.</p>",
        store.div(f"fig-inequity-{code}", fig),
        measures_table(q["fct_inequality"], q["fct_inequality_trends"], labels, level, code),
    ])


def country_html(marts: Marts, store: FigureStore, count_basis: str) -> str:
    """The country's headline and the trends of the country and every region (only when the
    warehouse has country rows, i.e. several regions)."""
    country = marts.rates[marts.rates.area_level == "country"][["area_code", "area_name"]].drop_duplicates()
    if country.empty:
        return ""
    code, name = country.iloc[0]
    windows = trend_windows(marts.trends)
    trends_w = trends_in_window(marts.trends, windows)
    area_periods = marts.area_rates[marts.area_rates.area_level == "country"]
    regions = (marts.rates[marts.rates.area_level == "region"][["area_code", "area_name"]].drop_duplicates()
               .sort_values("area_code").itertuples(index=False))
    regions = list(regions)
    figs = {}
    for ind in indicator_order(marts.comparison.indicator.unique()):
        series = (_series(marts.rates, trends_w, "country", [(code, f"{name} (country)")], ind)
                  + _series(marts.rates, trends_w, "region", regions, ind))
        figs[ind] = trends_figure(series, ind, code)
    parts = [f'<section class="country-block" data-area="{esc(code)}">',
             f"<h2>{esc(name)}: the country ({len(regions)} regions)</h2>",
             headline_html(name, "country", code, marts.comparison, area_periods, trends_w),
             "<h3>Trends of the country and its regions (Prais-Winsten)</h3>",
             *_trend_blocks(store, figs, f"fig-trends-{code}", windows, "the country first, then the regions",
                            count_basis),
             inequity_html(marts, store, "country", code, name, "Desigualdad / Inequity (the country)"),
             "</section>"]
    return "\n".join(parts)


def region_html(marts: Marts, store: FigureStore, code: str, name: str, count_basis: str, shown: bool) -> str:
    figs = region_figures(marts, code)
    comp = marts.comparison[marts.comparison.region_code == code]
    windows = trend_windows(marts.trends)
    trends_w = trends_in_window(marts.trends, windows)
    area_periods = marts.area_rates[(marts.area_rates.area_level == "region") & (marts.area_rates.area_code == code)]
    combos = combos_of(comp)
    default = combos[0]
    s = marts.settings
    dropdown_note = (
        " Use the menu at the top of the figure to switch indicator and period." if len(combos) > 1 else ""
    )
    parts = [f'<section class="region-block" data-region="{esc(code)}"{"" if shown else " style=display:none"}>']
    parts.append(f"<h2>{esc(name)} ({comp.commune_code.nunique()} communes)</h2>")
    parts.append(headline_html(name, "region", code, comp, area_periods, trends_w))
    no_rate = comp[comp["rate_per_1000"].isna()]
    if not no_rate.empty:
        items = ", ".join(f"{r.commune_name} ({indicator_short(r.indicator)} {r.period_label})"
                          for r in no_rate.sort_values(["commune_name", "indicator", "period_start"]).itertuples())
        parts.append(f'<p class="note">No pooled rate, so not in the figures (no live births, or no rate in a year '
                     f"of the period; see Data quality): {esc(items)}.</p>")

    parts.append("<h3>1. Ranking of communes (pooled rates)</h3>")
    parts.append(
        f'<p class="caption">Each commune\'s pooled rate over the period (deaths / live births × 1000) with its exact '
        f"Poisson 95% confidence interval, sorted from highest (top) to lowest; the dashed vertical line is the "
        f"region's pooled rate, the grey band its 95% CI (<code>marts.fct_area_period_rates</code>). Red: significantly "
        f"higher, blue: significantly lower than the rest of the region (mid-p &lt; {s.comparison_alpha:g}); grey: no "
        f"significant difference. Open markers: fewer than {s.unreliable_below_deaths} deaths (unreliable). Hover for "
        f"RT, RAP and RAP%. Default: {esc(default.label)}.{dropdown_note} Source: "
        f"<code>marts.fct_commune_vs_region</code>; counts: {esc(count_basis)}.</p>"
    )
    parts.append(store.div(f"fig-ranking-{code}", figs.ranking))

    parts.append("<h3>2. Trends by commune (Prais-Winsten)</h3>")
    parts += _trend_blocks(store, figs.trends, f"fig-trends-{code}", windows,
                           "the region first, then the communes alphabetically", count_basis)

    parts.append("<h3>3. Funnel plot</h3>")
    parts.append(
        f'<p class="caption">Each commune\'s pooled rate against its number of live births (log scale). The funnels are '
        f"the exact Poisson control limits around the region's pooled rate (solid line) for a commune of that size: "
        f"95% (dashed) and 99.8% (dotted). A commune outside the funnel differs from the region more than chance "
        f"alone would explain at that level; small communes need large deviations. Colours: "
        f"<code>funnel_category</code> of <code>marts.fct_commune_vs_region</code> (the commune against the whole "
        f"region, so it can differ from the red/blue test against the rest of the region in the ranking); communes "
        f"outside the 95% limits are named (on a phone, tap a point for its name). "
        f"Default: {esc(default.label)}.{dropdown_note}</p>"
    )
    parts.append(store.div(f"fig-funnel-{code}", figs.funnel))

    parts.append("<h3>4. Map</h3>")
    meta = figs.map.layout.meta or {}
    missing = meta.get("not_on_map") or []
    parts.append(
        '<p class="caption">The communes on their boundaries (IDE Chile, División Político-Administrativa 2023, '
        "simplified for display; no background map: the report works offline), coloured by the measure chosen in the "
        "menu: the crude pooled rate of <code>marts.fct_commune_vs_region</code>; the empirical Bayes smoothed rate of "
        "<code>marts.fct_smoothed_rates</code> (the crude rate pulled towards the region's, the more so the fewer the "
        "births: a small commune's extreme crude rate is mostly noise); RT (blue below 1, red above, log scale); the "
        "probability that the commune's true rate exceeds its region's (<code>prob_exceeds_region</code>); or the trend "
        "class. Both rate scales are the same, from the 10th to the 90th percentile of the region's rates (beyond them the colour saturates). A "
        f"thick black outline marks the significant communes: mid-p &lt; {s.comparison_alpha:g} against the rest of "
        f"the region (rates, RT), or a probability of exceeding above {EXCEEDANCE_SIGNIFICANT:g}. Hover or tap a "
        "commune for its numbers."
        + (f" Not on the map (no polygon, or far off the mainland such as an island): {esc(', '.join(missing))}."
           if missing else "") + "</p>"
    )
    parts.append(store.div(f"fig-map-{code}", figs.map))
    sig_items = []
    for opt in meta.get("options", []):
        if opt["measure"] in ("rate_ratio", "exceedance"):
            names_ = ", ".join(opt["significant"]) or "none"
            sig_items.append(f"<li><b>{esc(opt['label'])}</b>: {esc(names_)}</li>")
    if sig_items:
        parts.append("<details><summary>Which communes are outlined (significant)</summary>"
                     f"<ul>{''.join(sig_items)}</ul></details>")

    parts.append(inequity_html(marts, store, "region", code, name, "5. Desigualdad / Inequity"))
    parts.append("<h3>6. Table: every commune against the region</h3>")
    parts.append(
        '<p class="caption">All rows of <code>marts.fct_commune_vs_region</code> for the region. RT, RAP, RAP% and '
        "excess deaths compare the commune with the whole region; <i>RR vs rest</i>, the mid-p value and <i>vs rest</i> "
        "compare it with the rest of the region (the region minus the commune). Rank 1 is the highest rate.</p>"
    )
    table_html, table_rows = comparison_table(f"comparison-table-{code}", comp, combos)
    store.add(f"comparison-table-{code}", table_rows)
    parts.append(table_html)
    parts.append("</section>")
    return "\n".join(parts)


def _count_basis(marts: Marts) -> str:
    return marts.settings.count_basis or "count basis not recorded"


def build_html(marts: Marts) -> str:
    use_indicators(marts.indicators)
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
    country = country_html(marts, store, count_basis)
    blocks = [region_html(marts, store, code, name, count_basis, code == first) for code, name in regions]

    selector = ""
    if len(regions) > 1:
        opts = "".join(f'<option value="{esc(c)}"{" selected" if c == first else ""}>{esc(c)} · {esc(n)}</option>'
                       for c, n in regions)
        selector = (
            f'<p class="region-picker"><label for="region-select"><b>Region:</b></label> '
            f'<select id="region-select" class="region-select">{opts}</select> '
            f'<a href="#regions">to the region</a></p>'
        )
    years = marts.rates["year"]
    period = f"{int(years.min())}-{int(years.max())}" if len(years) else ""
    title = "Infant mortality by commune"
    scope = "Chile" if country else ", ".join(n for _, n in regions)
    generated = _dt.datetime.now().strftime("%Y-%m-%d %H:%M")
    built = f" Warehouse built {esc(marts.settings.built_at)}" + (
        f" from commit <code>{esc(marts.settings.git_commit)}</code>" if marts.settings.git_commit else "") + "."
    basis_cls = ' class="generated-data"' if "generat" in count_basis.lower() else ""
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{esc(title)}: {esc(scope)} {period}</title>
<style>{static_text("report.css")}</style>
<script>{static_text("errors.js")}</script>
</head>
<body>
<header>
<h1>{esc(title)} · Mortalidad infantil por comuna</h1>
<p>{esc(scope)}, {period}. Indicators: {esc(", ".join(indicator_short(i) for i in present))}.</p>
<p{basis_cls}>Counts: {esc(count_basis)}.</p>
<p>Generated {generated} from <code>{esc(marts.warehouse.name)}</code> (schema <code>marts</code>).{built}</p>
</header>
<main>
<div id="js-errors"></div>
{selector}
{country}
<span id="regions"></span>
{"".join(blocks)}
<h2>Definitions</h2>
{glossary_html(present, marts.settings)}
<h2>Data quality</h2>
<p class="caption">Findings of <code>marts.audit_data_quality</code>. Those listed change published numbers (e.g. a
commune-year whose rate is unavailable and is left out of pooled comparisons and trend fits); the rest are recorded for
transparency only.</p>
{audit_html(marts.audit, marts.communes)}
<footer>Report generated by <code>python -m infant_mortality.report</code>. All data and plotly.js are embedded in this
file; it needs no internet connection. Methods: <code>docs/methods.md</code>.</footer>
</main>
<script type="application/octet-stream" id="plotly-js">{encode_spec(get_plotlyjs())}</script>
{store.scripts()}
<script>{static_text("report.js")}</script>
</body>
</html>
"""


def write_report(marts: Marts, output) -> Path:
    text = build_html(marts)
    output = Path(output)
    output.parent.mkdir(parents=True, exist_ok=True)
    tmp = output.with_name(output.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(output)
    return output
