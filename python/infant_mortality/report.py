"""A self-contained HTML report of the warehouse: ranking, trends, funnel plot, map, tables.

    python -m infant_mortality.report [--warehouse PATH] [--output PATH] [--screenshots DIR]

Reads the marts of a built warehouse (default: the published ``warehouse/infant_mortality.duckdb``,
or ``$IMR_DUCKDB_PATH``; opened read-only and closed as soon as the tables are read) and writes
one HTML file (default ``reports/infant_mortality_report.html``) that needs no server and no
internet: plotly.js is inlined once, every figure's data is embedded as JSON in a
``<script type="application/json" id="fig-...">`` element and drawn by a few lines of inline
JavaScript when its section is visible. Figures are per region (communes are compared with
their own region); with several regions a selector shows one region at a time.

``--screenshots DIR`` also writes ``ranking.png`` and ``map.png`` (the first region's figures,
each on a page of its own) with headless Chromium (``/usr/bin/chromium`` or ``$CHROMIUM``).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import html
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import duckdb
import pandas as pd
import plotly.io as pio
from plotly.offline import get_plotlyjs

from infant_mortality import report_figures as rf
from infant_mortality.report_figures import fmt, fmt_apc, fmt_p, indicator_long, indicator_order, indicator_short

DEFAULT_WAREHOUSE = Path("warehouse/infant_mortality.duckdb")
DEFAULT_OUTPUT = Path("reports/infant_mortality_report.html")
REQUIRED_MARTS = ("dim_commune", "fct_rates_commune_year", "fct_commune_vs_region", "audit_data_quality")
OPTIONAL_MARTS = ("fct_trends",)


class ReportError(RuntimeError):
    """A problem the user can fix (missing warehouse, missing marts); printed without a traceback."""


# --------------------------------------------------------------------------------------------
# Reading the marts
# --------------------------------------------------------------------------------------------


@dataclass
class Marts:
    warehouse: Path
    communes: pd.DataFrame
    rates: pd.DataFrame
    comparison: pd.DataFrame
    audit: pd.DataFrame
    trends: pd.DataFrame | None
    missing_optional: list[str] = field(default_factory=list)


def default_warehouse() -> Path:
    return Path(os.environ.get("IMR_DUCKDB_PATH") or DEFAULT_WAREHOUSE)


def load_marts(warehouse: str | os.PathLike) -> Marts:
    """Every mart the report uses, read into pandas; the file is opened read-only and closed."""
    path = Path(warehouse)
    if not path.is_file():
        raise ReportError(
            f"warehouse not found: {path}\n"
            "Build it first with `make warehouse` (or point --warehouse / IMR_DUCKDB_PATH at a built DuckDB file)."
        )
    try:
        con = duckdb.connect(str(path), read_only=True)
    except duckdb.Error as exc:
        raise ReportError(f"cannot open the warehouse {path} read-only: {exc}") from exc
    try:
        present = {
            name
            for (name,) in con.execute(
                "select table_name from information_schema.tables where table_schema = 'marts'"
            ).fetchall()
        }
        missing = [m for m in REQUIRED_MARTS if m not in present]
        if missing:
            raise ReportError(
                f"the warehouse {path} has no marts.{', marts.'.join(missing)}; rebuild it with `make warehouse`."
            )

        def read(name: str) -> pd.DataFrame:
            return con.execute(f"select * from marts.{name}").df()

        trends = read("fct_trends") if "fct_trends" in present else None
        marts = Marts(
            warehouse=path,
            communes=read("dim_commune"),
            rates=read("fct_rates_commune_year"),
            comparison=read("fct_commune_vs_region"),
            audit=read("audit_data_quality"),
            trends=trends,
            missing_optional=[m for m in OPTIONAL_MARTS if m not in present],
        )
    finally:
        con.close()
    return marts


# --------------------------------------------------------------------------------------------
# Trend helpers
# --------------------------------------------------------------------------------------------


def trend_windows(trends: pd.DataFrame | None) -> dict[str, tuple[int, int]]:
    """Per indicator, the trend window the report shows: the widest (then the latest)."""
    if trends is None or trends.empty:
        return {}
    out = {}
    for ind, g in trends.groupby("indicator"):
        w = g[["period_start", "period_end"]].drop_duplicates()
        w = w.assign(span=w.period_end - w.period_start).sort_values(["span", "period_end"], ascending=False)
        out[ind] = (int(w.iloc[0].period_start), int(w.iloc[0].period_end))
    return out


def trends_in_window(trends: pd.DataFrame | None, windows: dict) -> pd.DataFrame | None:
    if trends is None:
        return None
    keep = [
        (r.indicator in windows) and (int(r.period_start), int(r.period_end)) == windows[r.indicator]
        for r in trends[["indicator", "period_start", "period_end"]].itertuples()
    ]
    return trends[keep]


def _trend_row(trends: pd.DataFrame | None, level: str, code: str, indicator: str) -> dict | None:
    if trends is None:
        return None
    rows = trends[(trends.area_level == level) & (trends.area_code == code) & (trends.indicator == indicator)]
    return None if rows.empty else rows.iloc[0].to_dict()


# --------------------------------------------------------------------------------------------
# HTML pieces
# --------------------------------------------------------------------------------------------

CSS = """
body{font-family:"DejaVu Sans",Arial,Helvetica,sans-serif;margin:0;color:#222;background:#fff;line-height:1.45}
main{max-width:1320px;margin:0 auto;padding:0 24px 40px}
header{background:#263238;color:#fff;padding:18px 24px}
header h1{margin:0 0 4px;font-size:24px} header p{margin:2px 0;color:#cfd8dc;font-size:13px}
h2{border-bottom:2px solid #263238;padding-bottom:4px;margin-top:36px}
h3{margin:22px 0 6px}
.caption{background:#f7f9fa;border-left:4px solid #90a4ae;padding:8px 12px;font-size:14px;max-width:1100px}
.note{background:#fff8e1;border-left:4px solid #ffb300;padding:8px 12px;font-size:14px}
.headline{background:#e8f1f8;border:1px solid #b3cde0;border-radius:6px;padding:10px 16px;font-size:15px}
.headline ul{margin:6px 0;padding-left:20px}
.figure{width:100%;min-height:200px}
.glossary{font-size:14px;border-collapse:collapse}
.glossary td{padding:3px 10px;border-bottom:1px solid #eee;vertical-align:top}
table.data{border-collapse:collapse;font-size:12.5px;margin-top:6px}
table.data th{background:#eceff1;position:sticky;top:0;cursor:pointer;padding:5px 6px;text-align:left;
  border-bottom:2px solid #90a4ae;white-space:nowrap;user-select:none}
table.data th.sorted-asc::after{content:" \\25B2"} table.data th.sorted-desc::after{content:" \\25BC"}
table.data td{padding:3px 6px;border-bottom:1px solid #eee;white-space:nowrap}
table.data td.num{text-align:right;font-variant-numeric:tabular-nums}
table.data tr:hover td{background:#fffde7}
.higher{color:#c62828;font-weight:bold} .lower{color:#1565c0;font-weight:bold}
.table-wrap{max-height:640px;overflow:auto;border:1px solid #ddd;display:inline-block;max-width:100%}
#js-errors{display:none;background:#ffebee;color:#b71c1c;border:1px solid #e57373;padding:8px;white-space:pre-wrap}
.region-select{font-size:15px;padding:4px}
details>summary{cursor:pointer;font-weight:bold;margin:10px 0}
footer{font-size:12px;color:#666;border-top:1px solid #ddd;margin-top:40px;padding-top:8px}
"""

# Installed before plotly.js so that any error, even while loading it, is shown on the page
# (and found by the headless-browser test).
ERROR_JS = """
window.__reportErrors = [];
function reportError(msg) {
  window.__reportErrors.push(String(msg));
  var el = document.getElementById('js-errors');
  if (el) { el.textContent = window.__reportErrors.join('\\n'); el.style.display = 'block'; }
}
window.onerror = function (msg, src, line, col) { reportError(msg + ' (' + src + ':' + line + ':' + col + ')'); };
window.addEventListener('unhandledrejection', function (e) { reportError('unhandled rejection: ' + e.reason); });
document.addEventListener('DOMContentLoaded', function () { if (window.__reportErrors.length) reportError(''); });
"""

RENDER_JS = """
(function () {
  var config = {responsive: true, displaylogo: false, scrollZoom: false,
                toImageButtonOptions: {format: 'png', scale: 2}};
  function renderVisible() {
    document.querySelectorAll('div.figure[data-fig]').forEach(function (div) {
      if (div.getAttribute('data-rendered') || div.offsetParent === null) return;
      div.setAttribute('data-rendered', '1');
      try {
        var spec = JSON.parse(document.getElementById(div.getAttribute('data-fig')).textContent);
        var result = Plotly.newPlot(div, spec.data, spec.layout, config);
        if (result && result.catch) result.catch(function (e) { reportError(div.id + ': ' + e); });
      } catch (e) { reportError(div.id + ': ' + e); }
    });
  }
  window.renderVisible = renderVisible;
  var select = document.getElementById('region-select');
  if (select) select.addEventListener('change', function () {
    document.querySelectorAll('section.region-block').forEach(function (s) {
      s.style.display = s.getAttribute('data-region') === select.value ? '' : 'none';
    });
    renderVisible();
  });
  document.querySelectorAll('details').forEach(function (d) { d.addEventListener('toggle', renderVisible); });
  // Click-to-sort tables: numeric when both cells carry data-sort numbers, else text.
  document.querySelectorAll('table.sortable').forEach(function (table) {
    table.querySelectorAll('th').forEach(function (th, col) {
      th.addEventListener('click', function () {
        var asc = !th.classList.contains('sorted-asc');
        table.querySelectorAll('th').forEach(function (h) { h.classList.remove('sorted-asc', 'sorted-desc'); });
        th.classList.add(asc ? 'sorted-asc' : 'sorted-desc');
        var body = table.tBodies[0], rows = Array.prototype.slice.call(body.rows);
        function key(r) { var c = r.cells[col], v = c.getAttribute('data-sort'); return v === null ? c.textContent : v; }
        rows.sort(function (a, b) {
          var x = key(a), y = key(b), nx = parseFloat(x), ny = parseFloat(y), r;
          if (x === '' && y === '') r = 0; else if (x === '') r = 1; else if (y === '') r = -1;
          else if (!isNaN(nx) && !isNaN(ny)) r = nx - ny; else r = x.localeCompare(y, 'es');
          return asc ? r : -r;
        });
        rows.forEach(function (r) { body.appendChild(r); });
      });
    });
  });
  // Period / indicator filter of the comparison table.
  document.querySelectorAll('select.table-filter').forEach(function (sel) {
    function apply() {
      var table = document.getElementById(sel.getAttribute('data-table'));
      Array.prototype.forEach.call(table.tBodies[0].rows, function (r) {
        r.style.display = (sel.value === '' || r.getAttribute('data-combo') === sel.value) ? '' : 'none';
      });
    }
    sel.addEventListener('change', apply); apply();
  });
  renderVisible();
})();
"""


def _esc(x) -> str:
    return html.escape("" if x is None else str(x))


def figure_json(fig) -> str:
    """Plotly JSON safe inside a <script> element."""
    text = pio.to_json(fig, validate=True, pretty=False, remove_uids=True)
    return text.replace("</", "<\\/").replace("<!--", "<\\!--")


class FigureStore:
    """Collects figure specs; `div()` returns the placeholder, `scripts()` the JSON elements."""

    def __init__(self):
        self.specs: dict[str, str] = {}

    def div(self, fig_id: str, fig) -> str:
        self.specs[fig_id] = figure_json(fig)
        return f'<div class="figure" id="{fig_id}" data-fig="{fig_id}-data"></div>'

    def scripts(self) -> str:
        return "\n".join(
            f'<script type="application/json" id="{fid}-data">{spec}</script>' for fid, spec in self.specs.items()
        )


def _cell(value, text=None, num=False, cls=None) -> str:
    sort = ""
    v = rf._num(value) if num else None
    if num:
        sort = f' data-sort="{"" if v is None else repr(v)}"'
    classes = " ".join(c for c in ("num" if num else None, cls) if c)
    cls_attr = f' class="{classes}"' if classes else ""
    return f"<td{cls_attr}{sort}>{_esc(text if text is not None else value)}</td>"


def glossary_html(indicators: list[str]) -> str:
    rows = [
        (f"{indicator_long(i)}", f"deaths at ages {rf.INDICATORS[i][3]} in the year, per 1000 live births of the year "
         "(mother's commune of residence)" + ("" if i in indicators else "; not in this warehouse"))
        for i in rf.INDICATORS
    ]
    rows += [
        ("Pooled rate", "sum of deaths / sum of live births over the period's years, times 1000 (never an average of "
         "yearly rates); 95% CI: exact Poisson (Garwood) limits."),
        ("RT, razón de tasas (RR, rate ratio)", "commune rate / region rate (the region includes the commune)."),
        ("RAP, riesgo atribuible poblacional (excess rate, PAR)", "commune rate − region rate, per 1000 live births."),
        ("RAP% (attributable percent, AR%)", "100 (commune rate − region rate) / commune rate = 100 (RT − 1) / RT."),
        ("Significantly higher / lower", "two-sided mid-p < 0.05 of the exact conditional test of the commune against "
         "the rest of the region (the region minus the commune)."),
        ("Unreliable", "fewer than 20 deaths (CDC/NCHS convention): the rate is shown, but read it with care."),
        ("Trend, APC (annual percent change, variación porcentual anual)",
         "Prais-Winsten regression of log10(rate) on year with AR(1) errors; APC = (10^slope − 1) × 100; "
         "increasing / decreasing when p < 0.05, else stationary."),
    ]
    body = "".join(f"<tr><td><b>{_esc(k)}</b></td><td>{_esc(v)}</td></tr>" for k, v in rows)
    return f'<table class="glossary">{body}</table>'


def headline_html(region_name, region_code, comparison, region_rates, trends_w, combos) -> str:
    items = []
    for ind in indicator_order(comparison["indicator"].unique()):
        combo = next(c for c in combos if c.indicator == ind)
        reg = rf.region_pooled(region_rates, combo)
        df = combo.select(comparison)
        n_hi, n_lo = int((df.comparison == "higher").sum()), int((df.comparison == "lower").sum())
        tr = _trend_row(trends_w, "region", region_code, ind)
        if tr is None:
            trend_txt = "trend: not available in this warehouse"
        else:
            trend_txt = (f"trend {int(tr['period_start'])}-{int(tr['period_end'])}: <b>{_esc(rf.TREND_LABELS.get(tr['trend'], tr['trend']).lower())}</b>, "
                         f"{_esc(fmt_apc(tr))} per year")
        items.append(
            f"<li><b>{_esc(indicator_short(ind))} {combo.period_label}</b>: region <b>{fmt(reg['rate'])}</b> per 1000 "
            f"live births (95% CI {fmt(reg['lower'])} to {fmt(reg['upper'])}; {fmt(reg['deaths'], 0, thousands=True)} deaths, "
            f"{fmt(reg['live_births'], 0, thousands=True)} live births); {trend_txt}. "
            f"<b>{n_hi}</b> of {len(df)} communes significantly <span class='higher'>higher</span> and "
            f"<b>{n_lo}</b> significantly <span class='lower'>lower</span> than the rest of the region.</li>"
        )
    return f'<div class="headline"><b>{_esc(region_name)}</b><ul>{"".join(items)}</ul></div>'


COMPARISON_COLUMNS = [
    ("Commune", "commune_name", None),
    ("Code", "commune_code", None),
    ("Indicator", "indicator", None),
    ("Period", "period_label", None),
    ("Years", "n_years", 0),
    ("Deaths", "deaths", 0),
    ("Live births", "live_births", 0),
    ("Rate /1000", "rate_per_1000", 2),
    ("CI low", "ci95_lower", 2),
    ("CI high", "ci95_upper", 2),
    ("Region rate", "region_rate_per_1000", 2),
    ("RT", "rate_ratio", 2),
    ("RT CI low", "rate_ratio_ci95_lower", 2),
    ("RT CI high", "rate_ratio_ci95_upper", 2),
    ("RAP /1000", "excess_rate_per_1000", 2),
    ("RAP%", "attributable_percent", 1),
    ("Excess deaths", "excess_deaths", 1),
    ("RR vs rest", "rest_rate_ratio", 2),
    ("mid-p", "p_value", 3),
    ("vs rest", "comparison", None),
    ("Funnel", "funnel_category", None),
    ("Rank", "rank_in_region", 0),
    ("Unreliable", "is_unreliable", None),
]


def comparison_table_html(table_id: str, comparison: pd.DataFrame, combos) -> str:
    order = {c.key: i for i, c in enumerate(combos)}
    df = comparison.assign(
        _combo=[f"{r.indicator}|{int(r.period_start)}|{int(r.period_end)}" for r in comparison.itertuples()]
    )
    df = df.assign(_order=df["_combo"].map(order)).sort_values(["_order", "rank_in_region"])
    head = "".join(f"<th title='click to sort'>{_esc(label)}</th>" for label, _, _ in COMPARISON_COLUMNS)
    rows = []
    for r in df.to_dict("records"):
        cells = []
        for label, col, digits in COMPARISON_COLUMNS:
            v = r[col]
            if col == "indicator":
                cells.append(_cell(v, indicator_short(v)))
            elif col == "p_value":
                cells.append(_cell(v, fmt_p(v), num=True))
            elif col == "is_unreliable":
                cells.append(_cell(v, "yes" if bool(v) else ""))
            elif col == "comparison":
                cells.append(_cell(v, v, cls=v if v in ("higher", "lower") else None))
            elif digits is None:
                cells.append(_cell(v))
            else:
                signed = col in ("excess_rate_per_1000", "attributable_percent", "excess_deaths")
                cells.append(_cell(v, fmt(v, digits, signed=signed, thousands=digits == 0), num=True))
        rows.append(f'<tr data-combo="{_esc(r["_combo"])}">{"".join(cells)}</tr>')
    options = "".join(
        f'<option value="{_esc(c.key)}"{" selected" if i == 0 else ""}>{_esc(c.label)}</option>'
        for i, c in enumerate(combos)
    ) + '<option value="">all indicators and periods</option>'
    return (
        f'<p>Show: <select class="table-filter" data-table="{table_id}">{options}</select> '
        "(click a column header to sort)</p>"
        f'<div class="table-wrap"><table class="data sortable" id="{table_id}"><thead><tr>{head}</tr></thead>'
        f'<tbody>{"".join(rows)}</tbody></table></div>'
    )


def audit_html(audit: pd.DataFrame, communes: pd.DataFrame) -> str:
    names = dict(zip(communes.commune_code, communes.commune_name))
    affects = audit[audit["affects_results"].fillna(False).astype(bool)]
    others = audit[~audit["affects_results"].fillna(False).astype(bool)]
    cols = [("Check", "check_name"), ("Record", "record_key"), ("Commune", "commune_code"), ("Year", "year"),
            ("Indicator", "indicator"), ("Observed", "observed_value"), ("Records", "records_affected"),
            ("Consequence", "consequence"), ("Source", "source"), ("File", "source_file"), ("Line", "source_line")]
    out = []
    if affects.empty:
        out.append("<p>No data-quality finding changes any published number.</p>")
    else:
        head = "".join(f"<th>{_esc(c)}</th>" for c, _ in cols)
        rows = []
        for r in affects.sort_values(["check_name", "commune_code", "year"], na_position="last").to_dict("records"):
            cells = []
            for _, col in cols:
                v = r.get(col)
                if v is None or (isinstance(v, float) and pd.isna(v)) or v is pd.NA:
                    cells.append("<td></td>")
                elif col == "commune_code":
                    cells.append(_cell(v, f"{names.get(v, '')} ({v})"))
                elif col in ("year", "records_affected", "source_line"):
                    cells.append(_cell(v, fmt(v, 0), num=True))
                else:
                    cells.append(_cell(v))
            rows.append(f"<tr>{''.join(cells)}</tr>")
        out.append(
            f"<p><b>{len(affects)}</b> finding(s) change published numbers:</p>"
            f'<div class="table-wrap"><table class="data sortable" id="audit-table"><thead><tr>{head}</tr></thead>'
            f"<tbody>{''.join(rows)}</tbody></table></div>"
        )
    if others.empty:
        out.append("<p>No other findings.</p>")
    else:
        summary = others.groupby("check_name").agg(n=("check_name", "size"), records=("records_affected", "sum"))
        items = "".join(
            f"<li><code>{_esc(name)}</code>: {int(r.n)} finding(s), {fmt(r.records, 0, thousands=True)} record(s)</li>"
            for name, r in summary.iterrows()
        )
        out.append(
            f"<p>{len(others)} other finding(s) are recorded in <code>marts.audit_data_quality</code> that do not "
            f"change any published number:</p><ul>{items}</ul>"
        )
    return "\n".join(out)


# --------------------------------------------------------------------------------------------
# The report
# --------------------------------------------------------------------------------------------


@dataclass
class RegionFigures:
    region_code: str
    region_name: str
    ranking: object
    funnel: object
    map: object
    trends: dict  # indicator -> (figure, methods)


def region_figures(marts: Marts, region_code: str):
    """All figures of one region (also used for the screenshots)."""
    comp = marts.comparison[marts.comparison.region_code == region_code]
    region_name = str(comp.region_name.iloc[0])
    region_rates = marts.rates[(marts.rates.area_level == "region") & (marts.rates.area_code == region_code)]
    windows = trend_windows(marts.trends)
    trends_w = trends_in_window(marts.trends, windows)
    ranking = rf.ranking_figure(comp, region_rates, region_name, region_code)
    funnel = rf.funnel_figure(comp, region_rates, region_name, region_code)
    trends_region = None if trends_w is None else trends_w[trends_w.region_code == region_code]
    fig_map = rf.map_figure(comp, marts.communes, None if trends_region is None else trends_region[trends_region.area_level == "commune"],
                            region_name, region_code, windows)
    trend_figs = {}
    commune_rates = marts.rates[(marts.rates.area_level == "commune") & (marts.rates.region_code == region_code)]
    for ind in indicator_order(comp.indicator.unique()):
        series = []
        reg_rows = region_rates[region_rates.indicator == ind]
        series.append((region_code, f"{region_name} (region)", reg_rows,
                       _trend_row(trends_w, "region", region_code, ind)))
        names = comp[["commune_code", "commune_name"]].drop_duplicates().sort_values("commune_name")
        for code, name in names.itertuples(index=False):
            rows = commune_rates[(commune_rates.area_code == code) & (commune_rates.indicator == ind)]
            if rows.empty:
                continue
            series.append((code, name, rows, _trend_row(trends_w, "commune", code, ind)))
        trend_figs[ind] = rf.trends_figure(series, ind, region_code)
    return RegionFigures(region_code, region_name, ranking, funnel, fig_map, trend_figs), trends_w, windows


def _count_basis_text(rates: pd.DataFrame) -> str:
    bases = [b for b in rates["count_basis"].dropna().unique().tolist()]
    if not bases:
        return "count basis not recorded"
    return "; ".join(f"“{b}”" for b in bases)


def build_html(marts: Marts) -> str:
    comparison = marts.comparison
    regions = (
        comparison[["region_code", "region_name"]].drop_duplicates().sort_values("region_code").itertuples(index=False)
    )
    regions = list(regions)
    indicators = indicator_order(comparison["indicator"].unique())
    store = FigureStore()
    count_basis = _count_basis_text(marts.rates)
    blocks = []
    years = marts.rates["year"]
    trends_missing = marts.trends is None
    for i, (code, name) in enumerate(regions):
        figs, trends_w, windows = region_figures(marts, code)
        comp = comparison[comparison.region_code == code]
        region_rates = marts.rates[(marts.rates.area_level == "region") & (marts.rates.area_code == code)]
        combos = rf.combos_of(comp)
        n_communes = comp.commune_code.nunique()
        default = combos[0]
        dropdown_note = (
            " Use the menu at the top right of the figure to switch indicator and period." if len(combos) > 1 else ""
        )
        parts = [f'<section class="region-block" data-region="{_esc(code)}"{"" if i == 0 else " style=display:none"}>']
        parts.append(f"<h2>{_esc(name)} ({n_communes} communes)</h2>")
        parts.append(headline_html(name, code, comp, region_rates, trends_w, combos))

        parts.append("<h3>1. Ranking of communes (pooled rates)</h3>")
        parts.append(
            f'<p class="caption">Each commune\'s pooled rate over the period (deaths / live births × 1000) with its exact '
            f"Poisson 95% confidence interval, sorted from highest (top) to lowest; the dashed vertical line is the "
            f"region's pooled rate, the grey band its 95% CI. Red: significantly higher, blue: significantly lower than "
            f"the rest of the region (mid-p &lt; 0.05); grey: no significant difference. Open markers: fewer than 20 "
            f"deaths (unreliable). Hover for RT, RAP and RAP%. Default: {_esc(default.label)}.{dropdown_note} "
            f"Source: <code>marts.fct_commune_vs_region</code>; counts: {_esc(count_basis)}.</p>"
        )
        parts.append(store.div(f"fig-ranking-{code}", figs.ranking))

        parts.append("<h3>2. Trends by commune (Prais-Winsten)</h3>")
        if trends_missing:
            parts.append(
                '<p class="note" id="trends-missing-note"><b>Trend estimates are not available:</b> this warehouse has '
                "no <code>marts.fct_trends</code> table (it was built before the trend model existed). The yearly "
                "rates are shown without fitted lines, trend classes or APC; rebuild with <code>make warehouse</code> "
                "to add them.</p>"
            )
        for j, ind in enumerate(indicators):
            if ind not in figs.trends:
                continue
            fig, methods = figs.trends[ind]
            window = windows.get(ind)
            fitted = methods["refit"] + methods["anchored"]
            line_note = ""
            if fitted:
                line_note = (
                    f" Fitted lines: log10(rate) = a + b × year with the mart's slope b; the mart stores no intercept a, "
                    f"so it was recomputed by refitting Prais-Winsten (<code>infant_mortality.prais_winsten</code>) to the "
                    f"same years ({methods['refit']} of {fitted} lines, slope identical to the mart's)"
                    + (
                        f"; for {methods['anchored']} line(s) the refit did not reproduce the slope, so the line passes "
                        "through the mean of log10(rate) at the mean year of the years used, which is exact for OLS and "
                        "only approximate for Prais-Winsten"
                        if methods["anchored"]
                        else ""
                    )
                    + "."
                )
            other_windows = []
            if marts.trends is not None and window is not None:
                w = marts.trends[marts.trends.indicator == ind][["period_start", "period_end"]].drop_duplicates()
                other_windows = sorted(f"{int(a)}-{int(b)}" for a, b in w.itertuples(index=False) if (a, b) != window)
            if other_windows:
                line_note += (f" Trends over the other windows ({', '.join(other_windows)}) are in "
                              "<code>marts.fct_trends</code>.")
            caption = (
                f'<p class="caption">{_esc(indicator_long(ind))}: yearly rates per 1000 live births (points) with '
                f"exact Poisson 95% CIs (whiskers), the region first, then the communes alphabetically; the line is the "
                f"fitted Prais-Winsten trend {'' if window is None else f'{window[0]}-{window[1]}'} (red increasing, blue "
                f"decreasing, grey stationary: p ≥ 0.05), with its class and APC (annual percent change) in each title. "
                f"Years with a zero rate are left out of the log-scale fit; unavailable commune-years are not plotted."
                f"{line_note} Each panel has its own vertical scale. Source: <code>marts.fct_rates_commune_year</code>"
                f"{'' if trends_missing else ' and <code>marts.fct_trends</code>'}; counts: {_esc(count_basis)}.</p>"
            )
            fig_div = store.div(f"fig-trends-{code}-{ind}", fig)
            if j == 0:
                parts.append(f"<h4>{_esc(indicator_long(ind))}</h4>{caption}{fig_div}")
            else:
                parts.append(f"<details><summary>{_esc(indicator_long(ind))}</summary>{caption}{fig_div}</details>")

        parts.append("<h3>3. Funnel plot</h3>")
        parts.append(
            f'<p class="caption">Each commune\'s pooled rate against its number of live births (log scale). The funnels are '
            f"the exact Poisson control limits around the region's pooled rate (solid line) for a commune of that size: "
            f"95% (dashed) and 99.8% (dotted). A commune outside the funnel differs from the region more than chance "
            f"alone would explain at that level; small communes need large deviations. Colours: "
            f"<code>funnel_category</code> of <code>marts.fct_commune_vs_region</code> (the commune against the whole "
            f"region, so it can differ from the red/blue test against the rest of the region in the ranking). "
            f"Default: {_esc(default.label)}.{dropdown_note}</p>"
        )
        parts.append(store.div(f"fig-funnel-{code}", figs.funnel))

        parts.append("<h3>4. Map</h3>")
        missing_coords = (figs.map.layout.meta or {}).get("not_on_map") or []
        parts.append(
            f'<p class="caption">Each commune at its seat (cabecera comunal; coordinates from <code>marts.dim_commune</code>) '
            f"on plain longitude/latitude axes with equal distances (no background map: the report works offline). "
            f"Colour: RT, the commune's pooled rate divided by the region's (blue below 1, red above, white 1, on a log "
            f"scale); a bold outline marks a significant difference from the rest of the region. Marker area is "
            f"proportional to live births in the period. "
            f"{'The menu at the top right switches indicator/period, or colours the communes by trend class instead. ' if len(figs.map.layout.updatemenus) else ''}"
            f"Hover for the commune's rate, CI, RT, RAP, RAP% and trend/APC."
            + (f" Not on the map (no usable coordinates, or far off the mainland such as an island): {_esc(', '.join(missing_coords))}." if missing_coords else "")
            + "</p>"
        )
        parts.append(store.div(f"fig-map-{code}", figs.map))

        parts.append("<h3>5. Table: every commune against the region</h3>")
        parts.append(
            '<p class="caption">All rows of <code>marts.fct_commune_vs_region</code> for the region. RT, RAP, RAP% and '
            "excess deaths compare the commune with the whole region; <i>RR vs rest</i>, the mid-p value and <i>vs rest</i> "
            "compare it with the rest of the region (the region minus the commune). Rank 1 is the highest rate.</p>"
        )
        parts.append(comparison_table_html(f"comparison-table-{code}", comp, combos))
        parts.append("</section>")
        blocks.append("\n".join(parts))

    selector = ""
    if len(regions) > 1:
        opts = "".join(f'<option value="{_esc(c)}">{_esc(n)}</option>' for c, n in regions)
        selector = (
            f'<p><label for="region-select"><b>Region:</b></label> <select id="region-select" class="region-select">'
            f"{opts}</select> (communes are compared with their own region)</p>"
        )
    quality = audit_html(marts.audit, marts.communes)
    generated = _dt.datetime.now().strftime("%Y-%m-%d %H:%M")
    period = f"{int(years.min())}-{int(years.max())}" if len(years) else ""
    title = "Infant mortality by commune"
    subtitle = ", ".join(n for _, n in regions)
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{_esc(title)}: {_esc(subtitle)} {period}</title>
<style>{CSS}</style>
<script>{ERROR_JS}</script>
<script>{get_plotlyjs()}</script>
</head>
<body>
<header>
<h1>{_esc(title)} · Mortalidad infantil por comuna</h1>
<p>{_esc(subtitle)}, {period}. Indicators: {_esc(", ".join(indicator_short(i) for i in indicators))}.</p>
<p>Generated {generated} from <code>{_esc(marts.warehouse.name)}</code> (schema <code>marts</code>). Counts: {_esc(count_basis)}.</p>
</header>
<main>
<div id="js-errors"></div>
{selector}
<h2>Definitions</h2>
{glossary_html(indicators)}
{"".join(blocks)}
<h2>Data quality</h2>
<p class="caption">Findings of <code>marts.audit_data_quality</code>. Those listed change published numbers (e.g. a
commune-year whose rate is unavailable and is left out of pooled comparisons and trend fits); the rest are recorded for
transparency only.</p>
{quality}
<footer>Report generated by <code>python -m infant_mortality.report</code>. All data and plotly.js are embedded in this
file; it needs no internet connection. Methods: <code>docs/methods.md</code>.</footer>
</main>
{store.scripts()}
<script>{RENDER_JS}</script>
</body>
</html>
"""


def write_report(warehouse, output) -> Path:
    marts = load_marts(warehouse)
    text = build_html(marts)
    output = Path(output)
    output.parent.mkdir(parents=True, exist_ok=True)
    tmp = output.with_name(output.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(output)
    return output


# --------------------------------------------------------------------------------------------
# Headless Chromium: screenshots of single figures
# --------------------------------------------------------------------------------------------

CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--hide-scrollbars",
    "--force-device-scale-factor=1",
]


def find_chromium() -> str | None:
    for cand in (os.environ.get("CHROMIUM"), "/usr/bin/chromium", shutil.which("chromium"),
                 shutil.which("chromium-browser"), shutil.which("google-chrome")):
        if cand and Path(cand).is_file() and os.access(cand, os.X_OK):
            return cand
    return None


def run_chromium(url_or_path, *args: str, chromium: str | None = None, timeout: float = 90):
    """Run headless Chromium on a file; returns the CompletedProcess (stdout: e.g. --dump-dom)."""
    chromium = chromium or find_chromium()
    if chromium is None:
        raise ReportError("Chromium not found (install Debian's `chromium` or set $CHROMIUM)")
    target = url_or_path if str(url_or_path).startswith("file:") else Path(url_or_path).resolve().as_uri()
    with tempfile.TemporaryDirectory(prefix="imr-chromium-") as profile:
        cmd = [chromium, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *args, target]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


def single_figure_html(fig, width: int) -> str:
    """A page with one figure at a fixed size, no modebar (for screenshots)."""
    spec = figure_json(fig)
    return f"""<!DOCTYPE html><html><head><meta charset="utf-8">
<style>body{{margin:0;background:#fff}}</style><script>{get_plotlyjs()}</script></head>
<body><div id="fig" style="width:{width}px"></div>
<script type="application/json" id="spec">{spec}</script>
<script>var s = JSON.parse(document.getElementById('spec').textContent);
s.layout.width = {width};
Plotly.newPlot('fig', s.data, s.layout, {{displayModeBar: false, staticPlot: false}});</script></body></html>"""


def screenshot_figure(fig, path, width: int = rf.MAP_ASSUMED_WIDTH, chromium: str | None = None) -> Path:
    """PNG of one figure rendered by headless Chromium."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    height = int(fig.layout.height or 600)
    with tempfile.TemporaryDirectory(prefix="imr-shot-") as tmp:
        page = Path(tmp) / "figure.html"
        page.write_text(single_figure_html(fig, width), encoding="utf-8")
        out = Path(tmp) / "shot.png"
        res = run_chromium(page, f"--screenshot={out}", f"--window-size={width},{height}",
                           "--virtual-time-budget=10000", chromium=chromium)
        if not out.is_file():
            raise ReportError(f"Chromium wrote no screenshot:\n{res.stderr[-2000:]}")
        shutil.copyfile(out, path)
    return path


def write_screenshots(warehouse, outdir, region_code: str | None = None) -> list[Path]:
    """`ranking.png` and `map.png` of one region (default: the first) into `outdir`."""
    marts = load_marts(warehouse)
    code = region_code or sorted(marts.comparison.region_code.unique())[0]
    figs, _, _ = region_figures(marts, code)
    outdir = Path(outdir)
    return [
        screenshot_figure(figs.ranking, outdir / "ranking.png"),
        screenshot_figure(figs.map, outdir / "map.png"),
    ]


# --------------------------------------------------------------------------------------------
# CLI
# --------------------------------------------------------------------------------------------


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m infant_mortality.report", description=__doc__.split("\n")[0])
    parser.add_argument("--warehouse", type=Path, default=None,
                        help=f"built DuckDB warehouse (default: $IMR_DUCKDB_PATH or {DEFAULT_WAREHOUSE})")
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT, help=f"HTML file to write (default: {DEFAULT_OUTPUT})")
    parser.add_argument("--screenshots", type=Path, default=None, metavar="DIR",
                        help="also write ranking.png and map.png into DIR (needs headless Chromium)")
    args = parser.parse_args(argv)
    warehouse = args.warehouse or default_warehouse()
    try:
        out = write_report(warehouse, args.output)
        print(f"report written to {out}")
        if args.screenshots is not None:
            for p in write_screenshots(warehouse, args.screenshots):
                print(f"screenshot written to {p}")
    except ReportError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
