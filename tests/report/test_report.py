"""The HTML report (`python -m infant_mortality.report`) on a real build of the bundled data
and on a generated build of three regions (the country section, the region selector).

The figures' numbers are read back from the plotly JSON embedded (compressed) in the page and
compared with the marts; a headless Chromium (Debian's `chromium`) draws the page at a desktop
width and as a 420 px phone and checks that every shown figure rendered, with no JavaScript
error and no sideways scrolling. Only the browser tests are skipped when Chromium is missing.
"""

from __future__ import annotations

import base64
import csv
import gzip
import html
import json
import math
import re
import shutil
import struct
from pathlib import Path
from types import SimpleNamespace

import duckdb
import pandas as pd
import pytest

from conftest import REPO_ROOT, THREE_REGIONS, aggregate_indicators, query, run_dbt
from infant_mortality import report
from infant_mortality.statistics.poisson import funnel_count_limits, poisson_ci
from infant_mortality.report.browser import Browser, find_axe, page_url
from infant_mortality.report.browser import map_option as menu_number
from infant_mortality.report.choropleth import MAP_CUSTOMDATA
from infant_mortality.report.context import _CURRENT, RenderContext
from infant_mortality.report.formats import fmt, fmt_apc, fmt_cri
from infant_mortality.report.i18n import MESSAGES, t
from infant_mortality.report.labels import cluster_label, exceedance_class_label, trend_label
from infant_mortality.report.ranking import RANKING_CUSTOMDATA
from infant_mortality.report.style import NO_DATA, NO_DATA_PATTERN
from infant_mortality.report.tables import COMPARISON_COLUMNS

FULL = "imr|2010|2019"
CHROMIUM = report.find_chromium()
_skip_without_chromium = pytest.mark.skipif(
    CHROMIUM is None, reason="headless Chromium not installed (apt-get install chromium); CI installs it"
)


def needs_chromium(test):
    """A browser test: part of the end-to-end group, skipped where no Chromium is installed."""
    return pytest.mark.e2e(_skip_without_chromium(test))


AXE = find_axe()
needs_axe = pytest.mark.skipif(
    AXE is None, reason="axe-core not installed (npm install --prefix .cache/npm axe-core@4.14.1); CI installs it"
)


# --------------------------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------------------------


def embedded(page: str) -> dict[str, object]:
    """Every data element of the report (gzip + base64 JSON), decoded here with the standard
    library, by id (without `-data`)."""
    found = re.findall(r'<script type="application/octet-stream" id="([^"]+)-data">(.*?)</script>', page, re.S)
    return {key: json.loads(gzip.decompress(base64.b64decode(text))) for key, text in found}


def figures(page: str) -> dict[str, dict]:
    """The plotly specs embedded in the report, by figure id."""
    return {k: v for k, v in embedded(page).items() if k.startswith("fig-")}


def table_rows(page: str, table_id: str) -> list[list]:
    """A comparison table's rows as the page embeds them: [combo, [cell text, ...]]."""
    return [[combo, [c[0] if isinstance(c, list) else c for c in cells]]
            for combo, cells in embedded(page)[table_id]["rows"]]


def traces(fig: dict, **meta) -> list[dict]:
    return [t for t in fig["data"] if all((t.get("meta") or {}).get(k) == v for k, v in meta.items())]


def point(trace_list: list[dict], name: str, names_key: str = "y"):
    """(trace, index) of the point named `name` in a list of traces."""
    for t in trace_list:
        names = t[names_key] if names_key != "customdata" else [row[0] for row in t["customdata"]]
        if name in names:
            return t, names.index(name)
    raise AssertionError(f"{name} not found")


def mart_row(warehouse: Path, commune_name: str, combo: str = FULL) -> dict:
    ind, start, end = combo.split("|")
    with duckdb.connect(str(warehouse), read_only=True) as con:
        df = con.execute(
            "select * from marts.fct_commune_vs_region where commune_name = ? and indicator = ? "
            "and period_start = ? and period_end = ?",
            [commune_name, ind, int(start), int(end)],
        ).df()
    assert len(df) == 1
    return df.iloc[0].to_dict()


def names_in(warehouse: Path) -> list[str]:
    """The Metropolitan Region's communes (the region the report shows first)."""
    return [n for (n,) in query(warehouse, "select distinct commune_name from marts.fct_commune_vs_region "
                                           "where region_code = '13'")]



def copy_warehouse(src: Path, dst_dir: Path) -> Path:
    dst = dst_dir / "copy.duckdb"
    shutil.copyfile(src, dst)
    return dst


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()[:24]
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    return struct.unpack(">II", data[16:24])


# --------------------------------------------------------------------------------------------
# Fixtures
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def rendered_es(bundled_warehouse, tmp_path_factory) -> Path:
    """The report of the bundled build as a user gets it (Spanish, the default), through the
    command-line entry point."""
    out = tmp_path_factory.mktemp("report") / "report.html"
    assert report.main(["--warehouse", str(bundled_warehouse), "--output", str(out)]) == 0
    return out


@pytest.fixture(scope="module")
def rendered(bundled_warehouse, tmp_path_factory) -> Path:
    """The same report in English (`--lang en`): the content tests read its texts."""
    out = tmp_path_factory.mktemp("report_en") / "report.html"
    assert report.main(["--warehouse", str(bundled_warehouse), "--output", str(out), "--lang", "en"]) == 0
    return out


@pytest.fixture(scope="module")
def page(rendered) -> str:
    return rendered.read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def page_es(rendered_es) -> str:
    return rendered_es.read_text(encoding="utf-8")


def use_language(lang: str) -> None:
    """Format the tests' expected texts in `lang` (the report draws each page in a render context
    of its own; the tests' context is this one, reset after each test by `english`)."""
    _CURRENT.set(RenderContext(language=lang))


@pytest.fixture(autouse=True)
def english():
    """Numbers and texts the tests expect are formatted in English unless a test says otherwise."""
    token = _CURRENT.set(RenderContext(language="en"))
    yield
    _CURRENT.reset(token)


# --------------------------------------------------------------------------------------------
# Content
# --------------------------------------------------------------------------------------------


def test_every_commune_appears_in_figures_and_table(bundled_warehouse, page):
    names = names_in(bundled_warehouse)
    assert len(names) == 52
    figs = figures(page)
    ranking = figs["fig-ranking-13"]
    in_ranking = {y for t in traces(ranking, combo=FULL) for y in t["y"]}
    in_funnel = {x for t in traces(figs["fig-funnel-13"], combo=FULL, limits="exact") if "funnel_category" in t["meta"]
                 for x in t["text"]}
    in_map = {row[0] for t in traces(figs["fig-map-13"], kind="hover", combo=FULL, panel="overview")
              for row in t["customdata"]}
    in_table = {cells[0] for combo, cells in table_rows(page, "comparison-table-13") if combo == FULL}
    for name in names:
        assert name in in_ranking and name in in_funnel and name in in_map and name in in_table, name
    # Every row of the comparison mart is in the table, with its combo key.
    (n_rows,) = query(bundled_warehouse, "select count(*) from marts.fct_commune_vs_region where region_code = '13'")[0]
    assert len(table_rows(page, "comparison-table-13")) == n_rows
    # The ranking's categories are every commune sorted by rate (highest on top = last).
    order = ranking["layout"]["yaxis"]["categoryarray"]
    rates = dict(query(bundled_warehouse, "select commune_name, rate_per_1000 from marts.fct_commune_vs_region "
                                          "where period_start = 2010 and period_end = 2019 and region_code = '13' "
                                          "and indicator = 'imr'"))
    assert sorted(order) == sorted(names)
    assert [rates[n] for n in order] == sorted(rates.values())


def test_independencia_numbers_equal_the_mart(bundled_warehouse, page):
    mart = mart_row(bundled_warehouse, "Independencia")
    figs = figures(page)
    close = lambda a, b: math.isclose(a, b, rel_tol=1e-12, abs_tol=1e-12)  # noqa: E731

    # Ranking: point, 95% CI (as error bars and in the hover data), RT with its CI, RAP, RAP%.
    t, i = point(traces(figs["fig-ranking-13"], combo=FULL), "Independencia")
    assert t["meta"]["comparison"] == mart["comparison"] == "higher"
    assert close(t["x"][i], mart["rate_per_1000"])
    cd = dict(zip(RANKING_CUSTOMDATA, t["customdata"][i]))
    for col in ("ci95_lower", "ci95_upper", "rate_ratio", "rate_ratio_ci95_lower", "rate_ratio_ci95_upper",
                "excess_rate_per_1000", "attributable_percent", "p_value", "deaths", "live_births"):
        assert close(cd[col], mart[col]), col
    assert close(t["x"][i] + t["error_x"]["array"][i], mart["ci95_upper"])
    assert close(t["x"][i] - t["error_x"]["arrayminus"][i], mart["ci95_lower"])
    assert mart["rate_per_1000"] == pytest.approx(8.653846, abs=1e-6)

    # The regional line and band: the region's pooled rate 2010-2019 with exact limits,
    # computed here from its yearly rows (sum / sum) and scipy's Poisson quantiles.
    deaths, births = query(bundled_warehouse, "select sum(deaths), sum(live_births) from marts.fct_area_year_rates "
                                              "where area_level = 'region' and area_code = '13' and indicator = 'imr'")[0]
    shapes = figs["fig-ranking-13"]["layout"]["shapes"]
    line = [s for s in shapes if s["type"] == "line"][0]
    band = [s for s in shapes if s["type"] == "rect"][0]
    lo, hi = poisson_ci(float(deaths))
    assert close(line["x0"], 1000 * float(deaths) / float(births))
    assert band["x0"] == pytest.approx(1000 * float(lo) / float(births), rel=1e-9)
    assert band["x1"] == pytest.approx(1000 * float(hi) / float(births), rel=1e-9)

    # Map: crude rate and RT from the comparison mart, smoothed rate and exceedance from
    # fct_smoothed_rates; funnel: births, rate and the mart's category.
    t, i = point(traces(figs["fig-map-13"], kind="hover", combo=FULL, panel="overview"), "Independencia", "customdata")
    cd = dict(zip(MAP_CUSTOMDATA, t["customdata"][i]))
    crude, eb, prob, rt = cd["rate_per_1000"], cd["eb_global_rate_per_1000"], cd["prob_exceeds_region"], cd["rate_ratio"]
    assert close(rt, mart["rate_ratio"]) and close(crude, mart["rate_per_1000"])
    eb_mart, prob_mart = query(bundled_warehouse, "select eb_global_rate_per_1000, prob_exceeds_region from "
                                                  "marts.fct_smoothed_rates where commune_code = '13108' and "
                                                  "indicator = 'imr' and period_start = 2010 and period_end = 2019")[0]
    assert close(eb, eb_mart) and close(prob, prob_mart)
    assert "RT 1.28 (95% CI 1.08 to 1.52)" in t["hovertext"][i]
    t, i = point([t for t in traces(figs["fig-funnel-13"], combo=FULL, limits="exact") if "funnel_category" in t["meta"]],
                 "Independencia", "text")
    assert t["meta"]["funnel_category"] == mart["funnel_category"]
    assert close(t["x"][i], mart["live_births"]) and close(t["y"][i], mart["rate_per_1000"])
    # The table row carries the mart's numbers, formatted.
    row = next(cells for combo, cells in table_rows(page, "comparison-table-13")
               if combo == FULL and cells[0] == "Independencia")
    assert "8.65" in row and "1.28" in row and "higher" in row


def test_funnel_limits_are_the_exact_poisson_limits(page):
    funnel = figures(page)["fig-funnel-13"]
    (line,) = [t for t in traces(funnel, combo=FULL, limits="exact") if "region_rate" in t["meta"]]
    region_rate = line["meta"]["region_rate"]
    for level in (0.95, 0.998):
        (t,) = traces(funnel, combo=FULL, level=level, limits="exact")
        gap = t["x"].index(None)
        births, upper, lower = t["x"][5], t["y"][5], t["y"][gap + 1 + 5]
        lo, hi = funnel_count_limits(region_rate * births / 1000, level)
        assert upper == pytest.approx(1000 * hi[0] / births, rel=1e-9)
        assert lower == pytest.approx(1000 * lo[0] / births, rel=1e-9)


def test_map_is_a_choropleth_that_keeps_every_commune_in_frame(bundled_warehouse, page):
    """One polygon per commune and panel; the whole region's polygons inside its frame; the
    seats named in the enlarged core inside that frame with a margin of 4% (not cut: Lo
    Barnechea, Pirque); the outlined communes are the mart's significant ones."""
    fig = figures(page)["fig-map-13"]
    layout = fig["layout"]
    polygons = traces(fig, kind="polygon", panel="overview")
    assert len(polygons) == 52 and len(traces(fig, kind="polygon", panel="zoom")) == 52
    (x0, x1), (y0, y1) = layout["xaxis"]["range"], layout["yaxis"]["range"]
    for t in polygons:
        xs, ys = [v for v in t["x"] if v is not None], [v for v in t["y"] if v is not None]
        assert x0 <= min(xs) and max(xs) <= x1 and y0 <= min(ys) and max(ys) <= y1, t["meta"]["commune_code"]
    named = []
    for panel, (xa, ya) in (("overview", ("xaxis", "yaxis")), ("zoom", ("xaxis2", "yaxis2"))):
        (x0, x1), (y0, y1) = layout[xa]["range"], layout[ya]["range"]
        mx, my = 0.04 * (x1 - x0), 0.04 * (y1 - y0)
        (labels,) = traces(fig, kind="labels", panel=panel)
        for x, y, name in zip(labels["x"], labels["y"], labels["text"]):
            assert x0 + mx <= x <= x1 - mx and y0 + my <= y <= y1 - my, (panel, name)
        named += labels["text"]
        if panel == "zoom":
            assert {"Santiago", "Providencia", "Independencia"} <= set(labels["text"])
    assert sorted(named) == sorted(names_in(bundled_warehouse))  # each commune named once: Lo Barnechea, Pirque
    # The outlines: significant against the rest of the region, or P(rate > region) > 0.95.
    options = {(o["measure"], o["combo"]): set(o["significant"]) for o in layout["meta"]["options"]}
    sig = {n for (n,) in query(bundled_warehouse, "select commune_name from marts.fct_commune_vs_region where "
                                                  "indicator = 'imr' and period_start = 2010 and period_end = 2019 "
                                                  "and comparison in ('higher', 'lower') and region_code = '13'")}
    exceeds = {n for (n,) in query(bundled_warehouse, "select commune_name from marts.fct_smoothed_rates where "
                                                      "indicator = 'imr' and period_start = 2010 and period_end = 2019 "
                                                      "and prob_exceeds_region > 0.95 and region_code = '13'")}
    assert options[("rate_ratio", FULL)] == options[("crude", FULL)] == sig and len(sig) == 13
    assert options[("exceedance", FULL)] == exceeds
    # The default option is drawn: a commune's outline and fill as the first option says.
    first = layout["meta"]["menu"][0]["args"][0]
    outlined = {t["meta"]["commune_code"] for t in polygons if t["line"]["width"] > 1}
    names = dict(query(bundled_warehouse, "select commune_code, commune_name from marts.dim_commune"))
    assert {names[c] for c in outlined} == sig
    assert all(t["fillcolor"] == first["fillcolor"][fig["data"].index(t)] for t in polygons)


def test_headline_counts_thresholds_and_data_quality(bundled_warehouse, page):
    hi, lo, n = query(bundled_warehouse, "select count(*) filter (where comparison = 'higher'), "
                                         "count(*) filter (where comparison = 'lower'), count(*) "
                                         "from marts.fct_commune_vs_region where period_start = 2010 and period_end = 2019 "
                                         "and region_code = '13' and indicator = 'imr'")[0]
    assert f"<b>{hi}</b> of {n} communes significantly" in page
    assert f"<b>{lo}</b> significantly <span class='lower'>▼ lower</span>" in page
    for term in ("IMR", "NMR", "ENMR", "PNMR", "RT, rate ratio", "RAP, excess rate", "RAP%"):
        assert term in page
    # Thresholds as the build used them (the defaults of dbt_project.yml for this build).
    assert "fewer than 20 deaths (CDC/NCHS convention)" in page and "mid-p &lt; 0.05" in page
    affects = query(bundled_warehouse, "select record_key from marts.audit_data_quality where affects_results")
    others = query(bundled_warehouse, "select count(*) from marts.audit_data_quality where not affects_results")[0][0]
    quality = page[page.index("<h2>Data quality</h2>"):]
    assert f"<b>{len(affects)}</b> finding(s) change published numbers" in quality
    for (key,) in affects:
        assert html.escape(key) in quality
    assert f"{others} other finding(s)" in quality
    header = page[page.index("<header>"):page.index("</header>")]
    assert "derived: INE deaths all ages - DEIS deaths aged 1+" in header  # the count basis is stated
    # The national build: the country section, and the selector opens on the Metropolitan Region.
    assert 'class="country-block"' in page and '<option value="13" selected>' in page


def test_no_external_references(page):
    tags = re.findall(r"<(?:script|link|img|iframe|source|embed|object)\b[^>]*>", page, re.I)
    for tag in tags:
        assert not re.search(r"\b(?:src|href|data)\s*=", tag, re.I), tag
    assert not re.search(r"@import|url\(\s*['\"]?https?:", page.split("<script")[0], re.I)
    # plotly.js is inlined (compressed), not fetched.
    packed = re.search(r'<script type="application/octet-stream" id="plotly-js">(.*?)</script>', page, re.S).group(1)
    plotly_js = gzip.decompress(base64.b64decode(packed)).decode("utf-8")
    assert len(plotly_js) > 3_000_000 and "newPlot" in plotly_js


# --------------------------------------------------------------------------------------------
# Trends: the fitted line is the mart's
# --------------------------------------------------------------------------------------------


def check_trend_figure(warehouse: Path, page: str) -> None:
    fig = figures(page)["fig-trends-13-imr"]
    trends = {(level, code): (slope, apc, cls) for level, code, slope, apc, cls in query(
        warehouse,
        # The figure shows the widest trend window (the full window of the data).
        "select area_level, area_code, slope_log10, apc, trend from marts.fct_trends where indicator = 'imr' "
        "and region_code = '13' and area_level in ('region', 'commune') and method = (select trend_method from marts.meta_build) "
        "and period_end - period_start = (select max(period_end - period_start) from marts.fct_trends)",
    )}
    rate_traces = traces(fig, kind="rates")
    assert len(rate_traces) == 53 and rate_traces[0]["meta"]["area_code"] == "13"  # the region first
    fits = {t["meta"]["area_code"]: t for t in traces(fig, kind="fit")}
    # A line only for a valid fit (a class); a not-estimable or insufficient-data panel has none.
    expected = {code for (level, code), (_, _, cls) in trends.items() if cls in ("increasing", "decreasing", "stationary")}
    assert set(fits) == expected
    for code, t in fits.items():
        level = "region" if code == "13" else "commune"
        slope, apc, cls = trends[(level, code)]
        assert t["meta"]["slope_log10"] == pytest.approx(slope, rel=1e-12)
        assert t["meta"]["trend"] == cls
        x, y = t["x"], t["y"]
        assert (math.log10(y[-1]) - math.log10(y[0])) / (x[-1] - x[0]) == pytest.approx(slope, rel=1e-9, abs=1e-12)
    # Panel titles carry the class and the APC.
    titles = [a["text"] for a in fig["layout"]["annotations"]]
    slope, apc, cls = trends[("commune", "13108")]
    title = next(t for t in titles if "Independencia" in t)
    assert trend_label(cls).lower() in title and f"APC {fmt(apc, 1, signed=True)}%" in title
    # report.js lays the panels out: one per series.
    assert fig["layout"]["meta"]["grid"]["n"] == 53


def test_trend_section(bundled_warehouse, page):
    check_trend_figure(bundled_warehouse, page)
    cls, apc = query(bundled_warehouse, "select trend, apc from marts.fct_trends where area_level = 'region' "
                                        "and method = (select trend_method from marts.meta_build) "
                                        "and area_code = '13' and period_start = 2010 and period_end = 2019 "
                                        "and indicator = 'imr'")[0]
    region = page[page.index('<section class="region-block" data-region="13"'):]
    headline = region[region.index('<div class="headline">'):]
    headline = headline[:headline.index("</div>")]
    assert f"<b>{cls}</b>" in headline and f"APC {fmt(apc, 1, signed=True)}%" in headline


@pytest.fixture(scope="module")
def altered(bundled_warehouse, tmp_path_factory):
    """One report, through the command line's default path ($IMR_DUCKDB_PATH), of a copy of the
    warehouse with values no refit and no default would produce: Independencia's trend
    intercept, and meta_build's method label, interval level and exceedance cut-off. The tests
    below each read their own value back; none of the altered values feeds another's."""
    tmp = tmp_path_factory.mktemp("report_altered")
    warehouse = copy_warehouse(bundled_warehouse, tmp)
    with duckdb.connect(str(warehouse)) as con:
        con.execute("update marts.fct_trends set intercept_log10 = 12.5 where area_code = '13108'")
        slope = con.execute("select slope_log10 from marts.fct_trends where area_code = '13108' and indicator = 'imr' "
                            "and method = (select trend_method from marts.meta_build) "
                            "and period_start = 2010 and period_end = 2019").fetchone()[0]
        con.execute("update marts.meta_build set trend_method_label = 'Test-Method', trend_ci_level = 0.9, "
                    "exceedance_probability_threshold = 0.6")
    out = tmp / "nested" / "r.html"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("IMR_DUCKDB_PATH", str(warehouse))
        code = report.main(["--output", str(out), "--lang", "en"])
    return SimpleNamespace(warehouse=warehouse, slope=slope, out=out, code=code, text=out.read_text(encoding="utf-8"))


def test_fitted_line_is_drawn_from_the_marts_intercept(altered):
    """With `fct_trends.intercept_log10`, the line is 10^(intercept + slope * year), whatever
    the intercept: the report draws the mart's fit, it does not refit."""
    text, slope = altered.text, altered.slope
    fits = {t["meta"]["area_code"]: t for t in traces(figures(text)["fig-trends-13-imr"], kind="fit")}
    t = fits["13108"]
    assert t["meta"]["line_method"] == "mart"
    assert t["x"][0] == 2010 and t["x"][-1] == 2019
    assert t["y"][0] == pytest.approx(10 ** (12.5 + slope * 2010), rel=1e-12)
    assert t["y"][-1] == pytest.approx(10 ** (12.5 + slope * 2019), rel=1e-12)
    assert "no <code>intercept_log10</code>" not in text


# --------------------------------------------------------------------------------------------
# Inequity
# --------------------------------------------------------------------------------------------


def test_inequity_section_reads_the_inequity_marts(bundled_warehouse, page):
    fig = figures(page)["fig-inequity-13"]
    strat = "income_poverty_2013"
    quint = traces(fig, kind="quintiles", indicator="imr", stratifier=strat)[0]
    rows = query(bundled_warehouse, "select quintile, rate_per_1000, ci95_lower, ci95_upper from "
                                    "marts.fct_rates_by_quintile where area_code = '13' and indicator = 'imr' and "
                                    "stratifier = ? and period_start = 2010 and period_end = 2019 order by quintile",
                 [strat])
    assert quint["x"] == [1, 2, 3, 4, 5] and quint["y"] == pytest.approx([r[1] for r in rows], rel=1e-12)
    assert [y + e for y, e in zip(quint["y"], quint["error_y"]["array"])] == pytest.approx([r[3] for r in rows])
    # The quintile rates are their pooled deaths over births (a second computation; since the one
    # pooling rule, a quintile also counts commune-years without a published rate, so its counts are
    # its own row's, not the sum of fct_commune_deprivation's published communes).
    members = query(bundled_warehouse, "select quintile, deaths, live_births from marts.fct_rates_by_quintile "
                                       "where area_code = '13' and indicator = 'imr' and stratifier = ? and "
                                       "period_start = 2010 and period_end = 2019 order by quintile", [strat])
    assert quint["y"] == pytest.approx([1000 * d / b for _, d, b in members], rel=1e-12)
    # The gradient is the mart's fitted rate; the RII points are the yearly RII rows; the trend
    # line is 10^(intercept + slope * year) of fct_inequality_trends.
    grad = traces(fig, kind="gradient", indicator="imr", stratifier=strat)[0]
    assert len(grad["y"]) == 52
    yearly = traces(fig, kind="yearly_rii", indicator="imr", stratifier=strat)[0]
    rii = query(bundled_warehouse, "select period_start, estimate from marts.fct_inequality where area_code = '13' "
                                   "and indicator = 'imr' and stratifier = ? and measure = 'RII' and "
                                   "period_kind = 'single_year' order by period_start", [strat])
    assert yearly["x"] == [r[0] for r in rii] and yearly["y"] == pytest.approx([r[1] for r in rii], rel=1e-12)
    a, b, gap = query(bundled_warehouse, "select intercept_log10, slope_log10, gap_change from "
                                         "marts.fct_inequality_trends where area_code = '13' and indicator = 'imr' "
                                         "and stratifier = ? and period_start = 2010 and period_end = 2019", [strat])[0]
    line = traces(fig, kind="rii_trend", indicator="imr", stratifier=strat)[0]
    assert line["y"][0] == pytest.approx(10 ** (a + b * 2010), rel=1e-12) and line["meta"]["gap_change"] == gap
    # The measures table: the full-window RII with its interval.
    est, lo, hi = query(bundled_warehouse, "select estimate, ci95_lower, ci95_upper from marts.fct_inequality where "
                                           "area_code = '13' and indicator = 'imr' and stratifier = ? and measure = "
                                           "'RII' and period_kind = 'full_window'", [strat])[0]
    table = page[page.index('id="inequality-13"'):]
    table = table[:table.index("</table>")]
    assert f"{fmt(est)} ({fmt(lo)} to {fmt(hi)})" in table and "Income poverty 2013" in table


# --------------------------------------------------------------------------------------------
# Languages, text alternatives, classes told apart without colour
# --------------------------------------------------------------------------------------------


def visible_text(page: str) -> str:
    """The page's text as a reader sees it: no scripts, styles, tags, code names."""
    body = re.sub(r"<(script|style|code)\b.*?</\1>", " ", page, flags=re.S)
    return html.unescape(re.sub(r"<[^>]+>", " ", body))


def test_catalogue_has_both_languages_with_the_same_placeholders():
    """Every message exists in Spanish and English, with the same {fields}: the languages cannot drift."""
    fields = re.compile(r"(?<!\{)\{(\w+)\}(?!\})")
    for key, (es, en) in MESSAGES.items():
        assert es and en, key
        assert sorted(fields.findall(es)) == sorted(fields.findall(en)), key


@pytest.mark.parametrize("lang, value, expected", [
    ("es", 7.4449, "7,44"), ("en", 7.4449, "7.44"),
    ("es", 250643, "250.643"), ("en", 250643, "250,643"),
])
def test_numbers_follow_the_language(lang, value, expected):
    use_language(lang)
    assert fmt(value, 0 if value > 1000 else 2, thousands=value > 1000) == expected


def test_a_change_that_rounds_to_zero_has_no_sign():
    """`APC -0.0%` was printed for an APC of -0.04: a value that rounds to zero is written 0.0."""
    assert fmt(-0.04, 1, signed=True) == "0.0" and fmt(-0.06, 1, signed=True) == "−0.1"
    assert fmt_apc({"apc": -0.04, "apc_ci95_lower": -1.2, "apc_ci95_upper": 1.1}) == "APC 0.0% (95% CI −1.2; +1.1)"
    use_language("es")
    assert fmt(-0.04, 1, signed=True) == "0,0"


def test_spanish_is_the_default_and_english_is_asked_for(bundled_warehouse, page_es, page):
    assert '<html lang="es">' in page_es and '<html lang="en">' in page
    # The indicator names are the mart's, in each language.
    name_es, name_en, abbr_es, abbr_en = query(bundled_warehouse, "select name_es, name_en, abbreviation_es, "
                                                                  "abbreviation_en from marts.dim_indicator "
                                                                  "where indicator = 'imr'")[0]
    assert f"{abbr_es}, tasa de {name_es}" in page_es and f"{abbr_en}, {name_en} rate" in page
    # The region's pooled rate, as the mart has it, with a decimal comma in Spanish.
    rate, deaths = query(bundled_warehouse, "select rate_per_1000, deaths from marts.fct_area_period_rates where "
                                            "area_level = 'region' and area_code = '13' and indicator = 'imr' "
                                            "and period_start = 2010 and period_end = 2019")[0]
    use_language("es")
    assert f"región <b>{fmt(rate)}</b> por 1.000 nacidos vivos" in page_es and "," in fmt(rate)
    assert f"{fmt(deaths, 0, thousands=True)} defunciones" in page_es
    # plotly formats the hover numbers and axes with the page's separators.
    assert figures(page_es)["fig-ranking-13"]["layout"]["separators"] == ",."
    assert figures(page)["fig-ranking-13"]["layout"]["separators"] == ".,"
    # No English phrase of the interface is left in the Spanish page (the marts' own notes aside).
    text = visible_text(page_es)
    for english in ("Ranking of communes", "Funnel plot", "per 1000 live births", "Significantly", "Trend",
                    "Data quality", "Definitions", "Region:", "not estimable", "Show:", "In short"):
        assert english not in text, english
    for spanish in ("Ranking de comunas", "Gráfico de embudo", "Calidad de los datos", "Definiciones",
                    "En síntesis"):
        assert spanish in text


# The marts' English texts the report shows: (mart, column, condition).
MART_TEXTS = [("fct_trends", "note", "true"), ("meta_build", "count_basis", "true"),
              ("audit_data_quality", "consequence", "affects_results"),
              ("audit_data_quality", "observed_value", "affects_results")]


def mart_phrases(warehouse: Path) -> set[str]:
    """Every text of those columns, and each of its '; '-joined parts that reads as a phrase."""
    phrases = set()
    for mart, column, condition in MART_TEXTS:
        for (text,) in query(warehouse, f"select distinct {column} from marts.{mart} "
                                        f"where {column} is not null and {condition}"):
            phrases.update(part for part in [text, *text.split("; ")] if re.search(r"[a-z]{3,} [a-z]{2,}", part))
    return phrases


def test_every_text_the_report_shows_from_the_marts_has_its_spanish(bundled_warehouse):
    from infant_mortality.report.mart_text import localised, untranslated

    texts = [text for mart, column, condition in MART_TEXTS
             for (text,) in query(bundled_warehouse, f"select distinct {column} from marts.{mart} "
                                                     f"where {column} is not null and {condition}")]
    assert len(texts) > 300
    assert {text: untranslated(text) for text in texts if untranslated(text)} == {}
    # The other input modes' count bases (macro deis_count_basis), and the values carried over.
    for basis in ["DEIS microdata: death and birth records",
                  "GENERATED DEIS-layout microdata (synthetic): death and birth records, not official figures",
                  "DEIS microdata: death records; live births: bundled DEIS births by commune 2001-2016 (births.csv)",
                  "DEIS microdata: death records; live births: DEIS-corrected (data/raw/c.csv)",
                  "DEIS microdata: death records; live births: registered (births_denominator corrected, but no "
                  "DEIS-corrected figure here)",
                  "DEIS microdata: death records; live births: DEIS-corrected where published (data/raw/c.csv), "
                  "registered elsewhere (births_basis)"]:
        assert untranslated(basis) == [], basis
    use_language("es")
    assert localised("rate unavailable (NULL) for 2010-2012, 2015 (no_live_births, negative_derived_count); "
                     "not estimable: |rho| = 0.9737997 is not below trend_max_abs_rho = 0.95 (an AR(1) fit this "
                     "close to a unit root or beyond interpolates the points; its p-value means nothing)") == (
        "tasa no disponible para 2010-2012, 2015 (sin nacidos vivos, conteo derivado negativo); no estimable: "
        "|rho| = 0,9737997 no es menor que trend_max_abs_rho = 0,95 (un ajuste AR(1) tan cerca de una raíz "
        "unitaria, o más allá, interpola los puntos y su valor p no dice nada)")
    # A text no template knows is kept whole, and said.
    assert localised("something new; not estimable: 2 usable years, fewer than min_years = 5") == (
        "something new; no estimable: 2 años utilizables, menos que min_years = 5")
    assert untranslated("something new; no data for 2011") == ["something new"]


def test_the_spanish_report_has_no_english_text_from_the_marts(bundled_warehouse, page_es, page):
    """The page as read and every figure's data (hover texts included) hold none of the marts'
    English phrases in Spanish; the English page holds them (the search finds what it looks for)."""
    phrases = mart_phrases(bundled_warehouse)
    assert len(phrases) > 100

    def searched(p: str) -> str:
        return visible_text(p) + json.dumps(embedded(p), ensure_ascii=False)

    spanish, english = searched(page_es), searched(page)
    assert sorted(phrase for phrase in phrases if phrase in spanish) == []
    assert len([phrase for phrase in phrases if phrase in english]) > 50


def figure_caption(page: str, fig_id: str) -> str:
    found = re.search(rf'<figcaption class="finding" id="{fig_id}-finding">(.*?)</figcaption>', page, re.S)
    assert found, fig_id
    return html.unescape(re.sub(r"<[^>]+>", "", found.group(1)))


# --------------------------------------------------------------------------------------------
# The map's BYM2 and cluster options (fct_bym2_rates, fct_spatial_clusters)
# --------------------------------------------------------------------------------------------


def map_option(fig: dict, measure: str, combo: str = FULL) -> dict:
    """A map option's menu entry (label, restyle) and its meta (significant), by measure and combo."""
    metas = fig["layout"]["meta"]["options"]
    k = next(k for k, o in enumerate(metas) if o["measure"] == measure and o["combo"] == combo)
    return dict(metas[k], label=fig["layout"]["meta"]["menu"][k]["label"], restyle=fig["layout"]["meta"]["menu"][k]["args"][0])


def polygon_styles(fig: dict, option: dict, panel: str = "overview") -> dict[str, dict]:
    """Each commune's polygon as the option draws it: fill, pattern, outline width."""
    out = {}
    for i, tr in enumerate(fig["data"]):
        meta = tr.get("meta") or {}
        if meta.get("kind") == "polygon" and meta["panel"] == panel:
            out[meta["commune_code"]] = dict(fill=option["restyle"]["fillcolor"][i],
                                             pattern=option["restyle"]["fillpattern.shape"][i],
                                             width=option["restyle"]["line.width"][i])
    return out


def shown_traces(fig: dict, option: dict, **meta) -> list[dict]:
    """The traces of `traces(fig, **meta)` the option makes visible."""
    visible = option["restyle"]["visible"]
    return [t for i, t in enumerate(fig["data"]) if visible[i] and all((t.get("meta") or {}).get(k) == v
                                                                         for k, v in meta.items())]


def bym2_rows(warehouse: Path, region: str) -> dict[str, dict]:
    rows = query(warehouse, "select commune_code, bym2_rate_per_1000, bym2_ci95_lower, bym2_ci95_upper, "
                            "bym2_prob_exceeds_region, component_size from marts.fct_bym2_rates where region_code = ? "
                            "and indicator = 'imr' and period_start = 2010 and period_end = 2019", [region])
    return {r[0]: dict(zip(("rate", "lower", "upper", "prob", "component_size"), r[1:])) for r in rows}


def green(rgb: str) -> int:
    return int(re.match(r"rgb\(\d+, (\d+),", rgb).group(1))


def test_the_bym2_map_draws_the_marts_values_and_marks_the_islands(bundled_warehouse, page):
    """Los Lagos (10), IMR 2010-2019: the hover carries each commune's BYM2 rate, interval and
    probability exactly as fct_bym2_rates; the BYM2 rate's fills follow the mart's rates on the
    sequential scale (not the crude rates); the one island of the region's graph, Puqueldón
    (component_size 1), is cross-hatched and marked by a diamond named in the legend, and no
    other commune is."""
    fig = figures(page)["fig-map-10"]
    mart = bym2_rows(bundled_warehouse, "10")
    hover = traces(fig, kind="hover", combo=FULL, panel="overview")[0]
    codes = [t["meta"]["commune_code"] for t in traces(fig, kind="polygon", panel="overview")]
    drawn = {code: dict(zip(MAP_CUSTOMDATA, row)) for code, row in zip(codes, hover["customdata"])}
    assert set(drawn) == set(mart) and len(mart) == 30
    for code, row in mart.items():
        got = drawn[code]
        assert (got["bym2_rate_per_1000"], got["bym2_ci95_lower"], got["bym2_ci95_upper"],
                got["bym2_prob_exceeds_region"]) == pytest.approx((row["rate"], row["lower"], row["upper"], row["prob"]),
                                                                  rel=1e-12)
        assert got["island"] == (row["component_size"] == 1)
    islands = {code for code, row in mart.items() if row["component_size"] == 1}
    assert islands == {"10206"}  # Puqueldón, on Lemuy island
    i = codes.index("10206")
    assert f"BYM2 {fmt(mart['10206']['rate'])} ({fmt_cri(mart['10206']['lower'], mart['10206']['upper'])})" in \
        hover["hovertext"][i] and "no neighbours: unstructured part only" in hover["hovertext"][i]

    option = map_option(fig, "bym2")
    styles = polygon_styles(fig, option)
    assert {code for code, st in styles.items() if st["pattern"]} == islands
    by_rate = sorted(mart, key=lambda c: mart[c]["rate"])
    greens = [green(styles[c]["fill"]) for c in by_rate]
    assert all(a >= b for a, b in zip(greens, greens[1:])) and greens[0] - greens[-1] > 100
    crude = dict(query(bundled_warehouse, "select commune_code, rate_per_1000 from marts.fct_commune_vs_region where "
                                          "region_code = '10' and indicator = 'imr' and period_start = 2010 "
                                          "and period_end = 2019"))
    by_crude = [green(styles[c]["fill"]) for c in sorted(mart, key=lambda c: crude[c])]
    assert not all(a >= b for a, b in zip(by_crude, by_crude[1:]))
    # Outlined: BYM2 P(rate > region) above the build's cut-off (0.95).
    assert {c for c, st in styles.items() if st["width"] > 1} == {c for c, r in mart.items() if r["prob"] > 0.95}
    # The diamond at Puqueldón's label point (dim_commune), on both panels, named once in the legend.
    lon, lat = query(bundled_warehouse, "select longitude, latitude from marts.dim_commune where commune_code = '10206'")[0]
    diamonds = shown_traces(fig, option, kind="legend", key="island")
    assert len(diamonds) == 2 and [d.get("showlegend", True) for d in diamonds] == [True, False]
    assert all(d["customdata"] == ["10206"] and d["x"] == [lon] and d["y"] == [lat] for d in diamonds)
    assert diamonds[0]["name"] == "no neighbours: unstructured part only"
    # The Metropolitan Region's graph has no island: no diamond, no hatching.
    rm = figures(page)["fig-map-13"]
    rm_option = map_option(rm, "bym2")
    assert shown_traces(rm, rm_option, kind="legend") == []
    assert {st["pattern"] for st in polygon_styles(rm, rm_option).values()} == {""}


def test_the_bym2_exceedance_map_is_drawn_in_five_classes(bundled_warehouse, page):
    """Each commune's fill is its class of fct_bym2_rates.bym2_prob_exceeds_region, classed here
    by hand (< 0.05, 0.05-0.2, 0.2-0.8, 0.8-0.95, > 0.95); the legend lists the five classes in
    that order with the colours drawn, the communes above 0.95 are outlined."""
    fig = figures(page)["fig-map-13"]
    option = map_option(fig, "bym2_exceedance")
    mart = bym2_rows(bundled_warehouse, "13")
    keys = shown_traces(fig, option, kind="legend", measure="bym2_exceedance")
    assert [k["name"] for k in keys] == ["P < 0.05", "P 0.05 to 0.2", "P 0.2 to 0.8", "P 0.8 to 0.95", "P > 0.95"]
    colour = [k["fillcolor"] for k in keys]
    assert len(set(colour)) == 5

    def by_hand(p):
        return 0 if p < 0.05 else 1 if p < 0.2 else 2 if p <= 0.8 else 3 if p <= 0.95 else 4

    styles = polygon_styles(fig, option)
    assert {c: st["fill"] for c, st in styles.items()} == {c: colour[by_hand(r["prob"])] for c, r in mart.items()}
    assert {by_hand(r["prob"]) for r in mart.values()} == {0, 1, 2, 3, 4}  # every class is drawn in the RM
    assert {c for c, st in styles.items() if st["width"] > 1} == {c for c, r in mart.items() if r["prob"] > 0.95}
    names = dict(query(bundled_warehouse, "select commune_code, commune_name from marts.dim_commune"))
    assert set(option["significant"]) == {names[c] for c, r in mart.items() if r["prob"] > 0.95}


@pytest.fixture(scope="module")
def with_clusters(bundled_warehouse, tmp_path_factory):
    """The RM's map from a copy of the warehouse whose fct_spatial_clusters names clusters (the
    bundled build has none at FDR 0.05): two hot spots, one cold spot and a low-high outlier."""
    warehouse = copy_warehouse(bundled_warehouse, tmp_path_factory.mktemp("report_clusters"))
    planted = {"13108": "high-high", "13127": "high-high", "13114": "low-low", "13115": "low-high"}
    with duckdb.connect(str(warehouse)) as con:
        for code, cluster_type in planted.items():
            con.execute("update marts.fct_spatial_clusters set cluster_type = ?, p_value = 0.001, q_value = 0.01 "
                        "where commune_code = ? and indicator = 'imr' and period_start = 2010 and period_end = 2019",
                        [cluster_type, code])
    marts = report.load_marts(warehouse)
    fig = report.region_figures(marts, "13", RenderContext.of(marts, "en")).map
    return SimpleNamespace(fig=json.loads(fig.to_json()), planted=planted, warehouse=warehouse)


def test_a_commune_without_a_value_is_hatched_and_keyed_on_every_map(bundled_warehouse, tmp_path):
    """A commune with no BYM2 estimate, no cluster test and no trend row (Santiago, in a copy of
    the warehouse) is drawn as the "no estimate" key on the probability and clusters maps, and as
    the "no value" key on the BYM2 rate's colour scale and the trend map: light grey and hatched,
    never the bare grey of the probability's middle class or of the scale's middle."""
    warehouse = copy_warehouse(bundled_warehouse, tmp_path)
    with duckdb.connect(str(warehouse)) as con:
        con.execute("update marts.fct_bym2_rates set bym2_rate_per_1000 = null, bym2_ci95_lower = null, "
                    "bym2_ci95_upper = null, bym2_prob_exceeds_region = null, spatial_part = null, method = null, "
                    "note = 'the BYM2 fit did not converge for this indicator and period: no BYM2 estimate' "
                    "where commune_code = '13101'")
        con.execute("delete from marts.fct_spatial_clusters where commune_code = '13101'")
        con.execute("delete from marts.fct_trends where area_code = '13101'")
    marts = report.load_marts(warehouse)
    fig = json.loads(report.region_figures(marts, "13", RenderContext.of(marts, "en")).map.to_json())
    metas = fig["layout"]["meta"]["options"]
    trend = next(dict(m, restyle=fig["layout"]["meta"]["menu"][k]["args"][0]) for k, m in enumerate(metas)
                 if m["measure"] == "trend")
    for measure, key in (("bym2_exceedance", "no_estimate"), ("clusters", "no_estimate"), ("bym2", "no_value"),
                         ("trend", "no_value")):
        option = trend if measure == "trend" else map_option(fig, measure)
        legend = dict(kind="trend_legend") if measure == "trend" else dict(kind="legend", measure=measure)
        keys = {k["meta"].get("key", k["name"]): (k["fillcolor"], k["fillpattern"]["shape"])
                for k in shown_traces(fig, option, **legend)}
        styles = polygon_styles(fig, option)
        assert keys[key] == (NO_DATA, NO_DATA_PATTERN), measure
        assert (styles["13101"]["fill"], styles["13101"]["pattern"]) == keys[key], measure
        assert keys[key] not in {v for k, v in keys.items() if k != key}, measure
        assert all(st["pattern"] != NO_DATA_PATTERN for code, st in styles.items() if code != "13101"), measure


@pytest.mark.parametrize("region", ["13", "10"])
def test_the_cluster_legend_lists_exactly_the_types_present(bundled_warehouse, page, region):
    """The bundled build finds no cluster at FDR 0.05: the RM's legend is "not significant" alone,
    Los Lagos' also "no neighbours" (Puqueldón); every polygon is filled as its type's key."""
    fig = figures(page)[f"fig-map-{region}"]
    option = map_option(fig, "clusters")
    types = dict(query(bundled_warehouse, "select commune_code, cluster_type from marts.fct_spatial_clusters where "
                                          "region_code = ? and indicator = 'imr' and period_start = 2010 and "
                                          "period_end = 2019", [region]))
    keys = shown_traces(fig, option, kind="legend", measure="clusters")
    assert {k["meta"]["key"] for k in keys} == set(types.values())
    assert set(types.values()) == ({"not significant"} if region == "13" else {"not significant", "no neighbours"})
    key_fill = {k["meta"]["key"]: (k["fillcolor"], k["fillpattern"]["shape"]) for k in keys}
    styles = polygon_styles(fig, option)
    assert {c: (st["fill"], st["pattern"]) for c, st in styles.items()} == {c: key_fill[ty] for c, ty in types.items()}
    assert option["significant"] == []


def test_planted_clusters_are_drawn_keyed_and_outlined(with_clusters):
    fig, planted = with_clusters.fig, with_clusters.planted
    option = map_option(fig, "clusters")
    keys = shown_traces(fig, option, kind="legend", measure="clusters")
    use_language("en")
    # Exactly the types present, in the legend's order (hot, cold, outliers, not significant).
    assert [k["name"] for k in keys] == [cluster_label(ty) for ty in ("high-high", "low-low", "low-high",
                                                                     "not significant")]
    # Colour is not the only channel: each type's key has its own hatching.
    assert len({k["fillpattern"]["shape"] for k in keys}) == len(keys)
    key_fill = {k["meta"]["key"]: (k["fillcolor"], k["fillpattern"]["shape"]) for k in keys}
    styles = polygon_styles(fig, option)
    for code, st in styles.items():
        assert (st["fill"], st["pattern"]) == key_fill[planted.get(code, "not significant")], code
        assert (st["width"] > 1) == (code in planted), code
    names = dict(query(with_clusters.warehouse, "select commune_code, commune_name from marts.dim_commune"))
    assert sorted(option["significant"]) == sorted(names[c] for c in planted)
    hover = traces(fig, kind="hover", combo=FULL, panel="overview")[0]
    i = [t["meta"]["commune_code"] for t in traces(fig, kind="polygon", panel="overview")].index("13108")
    assert "cluster (local Moran): high-high (hot spot), q 0.010" in hover["hovertext"][i]


@pytest.mark.parametrize("lang", ["es", "en"])
def test_the_bym2_and_cluster_maps_have_a_text_alternative(bundled_warehouse, page, page_es, lang):
    """In the map's caption: the three highest BYM2 rates with their credible intervals, the
    communes above the cut-off, the islands and the clusters (none in the bundled build); below
    it, the clusters of every indicator and period in words and the BYM2 table, in each language."""
    text = page_es if lang == "es" else page
    use_language(lang)
    top = query(bundled_warehouse, "select commune_name, bym2_rate_per_1000, bym2_ci95_lower, bym2_ci95_upper from "
                                   "marts.fct_bym2_rates where region_code = '13' and indicator = 'imr' and "
                                   "period_start = 2010 and period_end = 2019 order by bym2_rate_per_1000 desc limit 3")
    listed = ", ".join(f"{n} {fmt(r)} ({fmt_cri(lo, hi)})" for n, r, lo, hi in top)
    caption = figure_caption(text, "fig-map-13")
    assert listed in caption and top[0][0] == "Recoleta"
    (n_rm,) = query(bundled_warehouse, "select count(*) from marts.fct_spatial_clusters where region_code = '13' and "
                                       "indicator = 'imr' and period_start = 2010 and period_end = 2019 "
                                       "and cluster_type = 'not significant'")[0]
    assert t("finding.map_clusters", alpha=fmt(0.05, 2), clusters=t("finding.none"), n=n_rm) in caption
    # Valparaíso: its two islands are off the map, named in the caption with the unstructured part.
    islands = [n for (n,) in query(bundled_warehouse, "select commune_name from marts.fct_bym2_rates where "
                                                      "region_code = '05' and component_size = 1 and indicator = 'imr' "
                                                      "and period_start = 2010 and period_end = 2019 order by 1")]
    assert islands == ["Isla de Pascua", "Juan Fernández"]
    assert t("finding.map_islands", names=", ".join(islands)) in html.unescape(figure_caption(text, "fig-map-05"))
    # The table: one row per commune of the region and indicator x period, the mart's values formatted.
    rows = embedded(text)["data-fig-map-05-bym2"]["rows"]
    (n_rows,) = query(bundled_warehouse, "select count(*) from marts.fct_bym2_rates where region_code = '05'")[0]
    assert len(rows) == n_rows
    (abbreviation,), = query(bundled_warehouse, f"select abbreviation_{lang} from marts.dim_indicator "
                                                "where indicator = 'imr'")
    pascua = next(cells for _, cells in rows if cells[0] == "Isla de Pascua" and cells[1] == f"{abbreviation} · 2010-2019")
    (rate, lo, hi, prob), = query(bundled_warehouse, "select bym2_rate_per_1000, bym2_ci95_lower, bym2_ci95_upper, "
                                                     "bym2_prob_exceeds_region from marts.fct_bym2_rates where "
                                                     "commune_code = '05201' and indicator = 'imr' "
                                                     "and period_start = 2010 and period_end = 2019")
    assert pascua[2] == [fmt(rate), rate] and pascua[3] == fmt_cri(lo, hi) and pascua[4] == [fmt(prob, 3), prob]
    assert pascua[5] == exceedance_class_label(2) and pascua[6] == t("map.island")
    assert pascua[7] == cluster_label("no neighbours")
    # The clusters in words, for every indicator and period of the map's menu (3 periods per indicator).
    region = text[text.index('<section class="region-block" data-region="13"'):]
    block = region[region.index(f"<summary>{t('map.clusters.summary')}</summary>"):]
    block = html.unescape(block[:block.index("</details>")])
    assert block.count("<li>") == len({o["combo"] for o in figures(text)["fig-map-13"]["layout"]["meta"]["options"]
                                       if o["combo"]}) == 3 * len(aggregate_indicators())


def test_every_figure_states_its_finding_from_the_marts(bundled_warehouse, page):
    region = page[page.index('<section class="region-block" data-region="13"'):]
    region = region[:region.index("</section>")]
    for fig_id in re.findall(r'<div class="figure" id="([^"]+)"', region):
        assert f'aria-labelledby="{fig_id}-finding"' in region, fig_id
        assert len(figure_caption(region, fig_id)) > 60, fig_id
    # Ranking: the region's rate and the three highest communes by the mart's rank.
    top = query(bundled_warehouse, "select commune_name, rate_per_1000 from marts.fct_commune_vs_region where "
                                   "region_code = '13' and indicator = 'imr' and period_start = 2010 and "
                                   "period_end = 2019 order by rank_in_region limit 3")
    ranking = figure_caption(region, "fig-ranking-13")
    assert "Highest rates: " + ", ".join(f"{n} ({fmt(r)})" for n, r in top) in ranking
    rate, lo, hi = query(bundled_warehouse, "select rate_per_1000, ci95_lower, ci95_upper from "
                                            "marts.fct_area_period_rates where area_level = 'region' and area_code "
                                            "= '13' and indicator = 'imr' and period_start = 2010 and period_end = 2019")[0]
    assert f"regional rate {fmt(rate)} per 1000 live births (95% CI {fmt(lo)} to {fmt(hi)})" in ranking
    # Funnel: the communes above the 99.8% limit, as the mart classes them.
    above = [n for (n,) in query(bundled_warehouse, "select commune_name from marts.fct_commune_vs_region where "
                                                    "region_code = '13' and indicator = 'imr' and period_start = 2010 "
                                                    "and period_end = 2019 and funnel_category = 'above_99_8' "
                                                    "order by rank_in_region")]
    assert above and f"Above the 99.8% limit: {', '.join(above)};" in figure_caption(region, "fig-funnel-13")
    # Trends: the region's class and APC, and how many communes in each class.
    row = query(bundled_warehouse, "select trend, apc, apc_ci95_lower, apc_ci95_upper from marts.fct_trends where "
                                   "method = (select trend_method from marts.meta_build) and "
                                   "area_level = 'region' and area_code = '13' and indicator = 'imr' and "
                                   "period_start = 2010 and period_end = 2019")[0]
    trends = figure_caption(region, "fig-trends-13-imr")
    apc = fmt_apc(dict(zip(("trend", "apc", "apc_ci95_lower", "apc_ci95_upper"), row)))
    assert f"{trend_label(row[0]).lower()} trend, {apc}" in trends
    counts = dict(query(bundled_warehouse, "select trend, count(*) from marts.fct_trends where area_level = 'commune' "
                                           "and method = (select trend_method from marts.meta_build) "
                                           "and region_code = '13' and indicator = 'imr' and period_start = 2010 and "
                                           "period_end = 2019 group by trend"))
    for cls, n in counts.items():
        assert f"{trend_label(cls).lower()}: {n}" in trends
    # Every figure has its data: a table link or a table of its own.
    assert 'href="#comparison-table-13"' in region and 'id="data-fig-trends-13-imr"' in region


def test_classes_are_told_apart_without_colour(page):
    figs = figures(page)
    ranking = {t["meta"]["comparison"]: {s.replace("-open", "") for s in t["marker"]["symbol"]}
               for t in traces(figs["fig-ranking-13"], combo=FULL) if "comparison" in t["meta"]}
    assert ranking["higher"] == {"triangle-up"} and ranking["lower"] == {"triangle-down"}
    assert ranking["similar"] == {"circle"}
    funnel = {t["meta"]["funnel_category"]: t["marker"]["symbol"]
              for t in traces(figs["fig-funnel-13"], combo=FULL, limits="exact") if "funnel_category" in t["meta"]}
    assert len(set(funnel.values())) == len(funnel) >= 4
    # The trend lines differ by dash, the map's trend classes by hatching.
    dashes = {t["meta"]["trend"]: t["line"]["dash"] for t in traces(figs["fig-trends-13-imr"], kind="fit")}
    assert len(set(dashes.values())) == len(dashes) >= 2
    trend_option = next(o for o in figs["fig-map-13"]["layout"]["meta"]["menu"]
                        if o["label"].startswith("Trend"))
    assert {p for p in trend_option["args"][0]["fillpattern.shape"] if p is not None} >= {"", "\\"}


# --------------------------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------------------------


def test_missing_warehouse_tells_to_build_it(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("IMR_DUCKDB_PATH", str(tmp_path / "absent.duckdb"))
    assert report.main(["--output", str(tmp_path / "r.html")]) == 1
    err = capsys.readouterr().err
    assert "absent.duckdb" in err and "make warehouse" in err
    assert not (tmp_path / "r.html").exists()


def test_env_path_is_the_default_and_the_file_is_closed(altered):
    assert altered.code == 0 and altered.out.stat().st_size > 1_000_000
    with duckdb.connect(str(altered.warehouse)) as con:  # read-write: only possible once the report closed it
        assert con.execute("select count(*) from marts.dim_commune").fetchone()[0] > 0


def test_a_warehouse_without_the_trend_mart_is_refused(bundled_warehouse, tmp_path, capsys):
    warehouse = copy_warehouse(bundled_warehouse, tmp_path)
    with duckdb.connect(str(warehouse)) as con:
        con.execute("drop table marts.fct_trends")
    assert report.main(["--warehouse", str(warehouse), "--output", str(tmp_path / "r.html")]) == 1
    assert "marts.fct_trends" in capsys.readouterr().err


@pytest.fixture(scope="module")
def one_region_from_2016(tmp_path_factory) -> Path:
    """A build the report must take too: one region (Aysén) from 2016 on, a four-year window,
    too short for any joinpoint, so fct_trend_segments is empty."""
    warehouse = tmp_path_factory.mktemp("report_short") / "aysen_2016.duckdb"
    run_dbt(["build"], warehouse, {"scope_regions": [11], "scope_year_start": 2016})
    return warehouse


def test_report_builds_on_one_region_a_short_window_and_no_joinpoint_segments(one_region_from_2016, tmp_path):
    # The report failed on a warehouse without joinpoint segments (trends_in_window selected no
    # columns from an empty list).
    warehouse = one_region_from_2016
    assert query(warehouse, "select count(*) from marts.fct_trend_segments") == [(0,)]
    assert query(warehouse, "select distinct period_start, period_end from marts.fct_trends") == [(2016, 2019)]
    communes = {code for (code,) in query(warehouse, "select distinct area_code from marts.fct_trends "
                                                     "where area_level = 'commune' and indicator = 'imr'")}
    assert communes and {code[:2] for code in communes} == {"11"}
    for lang in ("es", "en"):
        out = tmp_path / f"report-{lang}.html"
        assert report.main(["--warehouse", str(warehouse), "--output", str(out), "--lang", lang]) == 0
        text = out.read_text(encoding="utf-8")
        assert re.findall(r'<section class="region-block" data-region="(\d+)"', text) == ["11"]
        drawn = figures(text)
        assert {"fig-trends-11-imr", "fig-ranking-11", "fig-map-11", "fig-funnel-11"} <= set(drawn)
        trend = drawn["fig-trends-11-imr"]
        assert {t["meta"]["area_code"] for t in traces(trend, kind="rates")} == {"11", *communes}
        assert not trend["layout"].get("shapes")  # no joinpoint to draw


# --------------------------------------------------------------------------------------------
# Several regions: the country section and the region selector (generated microdata)
# --------------------------------------------------------------------------------------------

REGIONS = THREE_REGIONS  # Aysén, Magallanes, Arica y Parinacota: 25 communes


@pytest.fixture(scope="module")
def multi_region(three_regions, tmp_path_factory):
    """The report of the session's three-region microdata build (conftest: 2015-2019, read
    only; its covariate damage touches only the inequity marts)."""
    out = report.write_report(three_regions.path, tmp_path_factory.mktemp("report_regions") / "regions.html", "en")
    return three_regions.path, out, out.read_text(encoding="utf-8")


def test_country_section_and_region_selector(multi_region):
    warehouse, _, text = multi_region
    # The selector lists the three regions; without the Metropolitan Region the first is shown.
    picker = text[text.index('id="region-select"'):]
    options = re.findall(r'<option value="(\d+)"( selected)?>', picker[:picker.index("</select>")])
    assert [code for code, _ in options] == list(REGIONS) and options[0][1] == " selected"
    for code in REGIONS:
        assert f'<section class="region-block" data-region="{code}"' in text
        assert f"fig-ranking-{code}" in figures(text)
    # The country's headline: its TMI pooled over the build's years from its yearly rows, with exact limits.
    deaths, births = query(warehouse, "select sum(deaths), sum(live_births) from marts.fct_area_year_rates "
                                      "where area_level = 'country' and indicator = 'imr'")[0]
    lo, hi = poisson_ci(float(deaths))
    country = text[text.index('<section class="country-block"'):]
    country = country[:country.index("</section>")]
    assert f"country <b>{fmt(1000 * deaths / births)}</b> per 1000" in country
    assert f"95% CI {fmt(1000 * float(lo) / births)} to {fmt(1000 * float(hi) / births)}" in country
    # Its trend panels: the country, then every region, each with the mart's trend.
    fig = figures(text)["fig-trends-CL-imr"]
    assert [t["meta"]["area_code"] for t in traces(fig, kind="rates")] == ["CL", *REGIONS]
    cls = query(warehouse, "select trend from marts.fct_trends where area_level = 'country' and indicator = 'imr' "
                           "and method = (select trend_method from marts.meta_build) "
                           "and period_start = 2015 and period_end = 2019")[0][0]
    assert trend_label(cls).lower() in fig["layout"]["annotations"][0]["text"]
    # The header states the build's count basis from meta_build, marked when the data are generated.
    (basis,) = query(warehouse, "select count_basis from marts.meta_build")[0]
    assert "GENERATED" in basis and f'<p class="generated-data">Counts: {html.escape(basis)}.</p>' in text
    # Every indicator the microdata give (the four age groups and the cause groups) has its panel.
    counted = {i for (i,) in query(warehouse, "select indicator from marts.dim_indicator where has_counts")}
    with open(REPO_ROOT / "seeds" / "indicators.csv", encoding="utf-8") as handle:
        assert counted == {row["indicator"] for row in csv.DictReader(handle)}
    assert {k.rsplit("-", 1)[1] for k in figures(text) if k.startswith("fig-trends-CL-")} == counted


# --------------------------------------------------------------------------------------------
# Headless browser: desktop and phone
# --------------------------------------------------------------------------------------------


def check_page(browser: Browser, path: Path, width: int, fragment: str, shots: Path | None = None) -> dict:
    """Draw the page at `width`; every figure and table of the shown region must render."""
    tab = browser.open(page_url(path, fragment), width, 900)
    ms = tab.wait_rendered()
    state = tab.eval("""(function () {
      var root = document.documentElement;
      var shown = Array.prototype.filter.call(document.querySelectorAll('div.figure'), function (d) {
        return d.offsetParent !== null; });
      return {scrollWidth: root.scrollWidth, clientWidth: root.clientWidth,
              errors: document.getElementById('js-errors').textContent,
              figures: shown.map(function (d) { return [d.id, d.getAttribute('data-rendered'),
                d.getAttribute('data-state'), d.querySelectorAll('svg.main-svg path').length,
                Math.round(d.getBoundingClientRect().right)]; }),
              rows: Array.prototype.map.call(document.querySelectorAll('table[data-rows]'), function (t) {
                return t.offsetParent === null ? -1 : t.tBodies[0].rows.length; })};
    })()""")
    assert state["errors"].strip() == "", state["errors"]
    assert tab.console_errors() == []
    assert len(state["figures"]) >= 4
    for fig_id, rendered, fig_state, paths, right in state["figures"]:
        assert rendered == "1" and paths > 0, fig_id
        assert right <= width, (fig_id, right)  # no figure wider than the screen
        assert fig_state[0] == ("n" if width < 600 else "w"), (fig_id, fig_state)
    assert [n for n in state["rows"] if n >= 0] and all(n > 0 for n in state["rows"] if n >= 0)
    # The page never scrolls sideways.
    assert state["scrollWidth"] <= width and state["clientWidth"] == width, state
    if width < 600:
        # On a phone every number of every shown table is on screen, beside its column's name
        # (tables become cards), not hidden in a box that scrolls sideways. First rows of each.
        cells = tab.eval("""Array.prototype.concat.apply([], Array.prototype.map.call(
            document.querySelectorAll('table.data'), function (t) {
              if (t.offsetParent === null || !t.tBodies.length) return [];
              var out = [];
              Array.prototype.slice.call(t.tBodies[0].rows, 0, 4).forEach(function (r) {
                if (r.style.display === 'none') return;
                Array.prototype.forEach.call(r.cells, function (c) {
                  if (c.tagName !== 'TD' || getComputedStyle(c).display === 'none') return;
                  var box = c.getBoundingClientRect();
                  out.push([t.id, c.textContent, box.left, box.right, box.width,
                            getComputedStyle(c, '::before').content, c.getAttribute('data-label')]);
                });
              });
              return out; }))""")
        tables = {c[0] for c in cells}
        assert len(tables) >= 2 and any(tid.startswith("inequality-") for tid in tables), tables
        for table_id, text, left, right, box_width, before, label in cells:
            assert left >= 0 and right <= width + 0.5 and box_width > 0, (table_id, text, left, right)
            assert label and before == f'"{label}"', (table_id, text, before, label)
    if shots is not None:
        tab.screenshot(shots / f"page-{width}.png", max_height=2600)
    return dict(state, ms=ms, tab=tab)


def drawn_labels(tab, figure_id: str) -> list[list]:
    """The commune names a figure shows as drawn: [text, left, right, top, bottom, font px]."""
    return tab.eval(f"""Array.prototype.map.call(
        document.querySelectorAll('#{figure_id} g.textpoint text'), function (t) {{
          var r = t.getBoundingClientRect(); return [t.textContent, r.left, r.right, r.top, r.bottom,
            parseFloat(getComputedStyle(t).fontSize), t.style.display]; }})""")


def assert_no_overlap(labels: list[list]) -> list[list]:
    shown = [b for b in labels if b[0] and b[6] != "none"]
    for i, a in enumerate(shown):
        for b in shown[i + 1:]:
            overlap_x = min(a[2], b[2]) - max(a[1], b[1])
            overlap_y = min(a[4], b[4]) - max(a[3], b[3])
            assert overlap_x <= 1 or overlap_y <= 1, (a, b)
    return shown


@needs_chromium
def test_report_on_a_desktop_and_a_phone(rendered_es, tmp_path):
    with Browser() as browser:
        desk = check_page(browser, rendered_es, 1400, "", tmp_path)
        phone = check_page(browser, rendered_es, 420, "", tmp_path)
        states = {fig_id: s for fig_id, _, s, _, _ in desk["figures"]}
        assert states["fig-trends-13-imr"] == "w4"  # four columns of small multiples
        states = {fig_id: s for fig_id, _, s, _, _ in phone["figures"]}
        assert states["fig-trends-13-imr"] == "n1"  # one column on a phone
        # The funnel's commune names do not overlap one another (drawn boxes, desktop).
        named = assert_no_overlap(drawn_labels(desk["tab"], "fig-funnel-13"))
        assert "Buin" in [b[0] for b in named] and len(named) >= 10
        # On the phone the funnel names are hidden (tap a point).
        assert phone["tab"].eval("document.querySelectorAll('#fig-funnel-13 g.textpoint text').length") == 0
        # The map's names never overlap (a name that would is hidden: hover shows it), on a phone
        # they are at least 11 px, and most of the 52 communes stay named on both (at the polygon
        # label points of dim_commune: 33 names measured on a phone).
        for tab, least in ((desk["tab"], 45), (phone["tab"], 30)):
            shown = assert_no_overlap(drawn_labels(tab, "fig-map-13"))
            assert len(shown) >= least, len(shown)
        assert min(b[5] for b in drawn_labels(phone["tab"], "fig-map-13")) >= 11
        # The map's polygons are drawn (filled paths: 52 communes in two panels), on both.
        for tab in (desk["tab"], phone["tab"]):
            assert tab.eval("document.querySelectorAll('#fig-map-13 path.js-fill').length") == 104
        # On a phone the region menu scrolls away with the page: it never covers a panel title.
        assert phone["tab"].eval("getComputedStyle(document.querySelector('.region-picker')).position") == "static"
        assert desk["tab"].eval("getComputedStyle(document.querySelector('.region-picker')).position") == "sticky"
    for width in (1400, 420):
        shot = tmp_path / f"page-{width}.png"
        assert png_size(shot)[0] == width and shot.stat().st_size > 50_000


PANEL_TITLES_JS = """(function () {
  var d = document.getElementById('fig-trends-CL-imr'), f = d.getBoundingClientRect();
  return {figure: [f.left, f.right], titles: Array.prototype.map.call(d.querySelectorAll('g.annotation-text-g'),
    function (a) { var r = a.getBoundingClientRect(); return [a.textContent, r.left, r.right, r.top, r.bottom]; })};
})()"""


@needs_chromium
def test_small_multiples_titles_wrap_instead_of_being_cut(rendered_es):
    """At 1400 px the country's trends put "Región de Aysén del General Carlos Ibáñez del Campo"
    in the last column and its title ran past the figure's edge (cut). Each panel title is now
    wrapped to its column: inside the figure, overlapping no other title, at both widths."""
    with Browser() as browser:
        for width in (1400, 420):
            tab = browser.open(page_url(rendered_es, "region=13"), width, 900)
            tab.wait_rendered()
            state = tab.eval(PANEL_TITLES_JS)
            left, right = state["figure"]
            titles = state["titles"]
            assert any("Aysén del General" in text for text, *_ in titles)
            outside = [text for text, x0, x1, *_ in titles if x0 < left - 1 or x1 > right + 1]
            assert outside == [], (width, outside)
            overlaps = [(a[0], b[0]) for i, a in enumerate(titles) for b in titles[i + 1:]
                        if min(a[2], b[2]) > max(a[1], b[1]) and min(a[4], b[4]) > max(a[3], b[3])]
            assert overlaps == [], (width, overlaps)


@needs_chromium
def test_choosing_the_smoothed_map_from_the_keyboard_after_a_resize(bundled_warehouse, rendered_es):
    """A user's path: the window is resized, then the map's menu (an HTML select) is focused and
    the smoothed rate chosen with the arrow key. The map keeps its height (it collapsed to 200 px
    before the figure boxes got a fixed height) and every commune is filled with the colour of its
    EB smoothed rate from marts.fct_smoothed_rates, not its crude rate."""
    use_language("es")
    label = t("map.option", measure=t("map.smoothed"), combo="TMI · 2010-2019")
    title = t("map.title", measure=t("map.smoothed"), combo="TMI · 2010-2019", region="", what="").split("<br>")[0]
    with Browser() as browser:
        tab = browser.open(page_url(rendered_es, "region=13"), 1400, 900)
        tab.wait_rendered()
        tab.send("Emulation.setDeviceMetricsOverride", {"width": 1300, "height": 900, "deviceScaleFactor": 1,
                                                        "mobile": False})
        assert tab.choose_menu_option("fig-map-13", 1) == label
        assert tab.eval("document.activeElement.id") == "fig-map-13-menu"
        state = tab.eval("""(function(){var g=document.getElementById('fig-map-13');
            return {height: g.getBoundingClientRect().height, title: g.layout.title.text,
                    polygons: g.data.filter(function(t){return t.meta && t.meta.kind==='polygon';})
                                    .map(function(t){return [t.meta.commune_code, t.fillcolor];}),
                    painted: g.querySelectorAll('path.js-fill').length};})()""")
    assert state["height"] == 800 and state["painted"] == 104
    assert state["title"].startswith(title)
    fills = dict(state["polygons"])
    smoothed = dict(query(bundled_warehouse, "select commune_code, eb_global_rate_per_1000 from marts.fct_smoothed_rates "
                                             "where indicator = 'imr' and period_start = 2010 and period_end = 2019 "
                                             "and region_code = '13'"))
    crude = dict(query(bundled_warehouse, "select commune_code, rate_per_1000 from marts.fct_commune_vs_region "
                                          "where indicator = 'imr' and period_start = 2010 and period_end = 2019 "
                                          "and region_code = '13'"))
    # On the yellow-orange-red scale the green channel falls as the value rises: taken in the
    # order of the mart's smoothed rates the fills never get greener, and they span the scale.
    # Taken in the order of the crude rates they do get greener somewhere (the crude map differs).
    green = {code: int(re.match(r"rgb\(\d+, (\d+),", fill).group(1)) for code, fill in fills.items()}
    assert set(green) == set(smoothed) and len(green) == 52

    def never_greener(order):
        values = [green[c] for c in order]
        return all(a >= b for a, b in zip(values, values[1:]))

    by_smoothed = sorted(green, key=lambda c: smoothed[c])
    assert never_greener(by_smoothed) and green[by_smoothed[0]] - green[by_smoothed[-1]] > 100
    assert not never_greener(sorted(green, key=lambda c: crude[c]))


# The communes' filled polygons drawn (the legend keys' traces have no points: an empty path).
PAINTED_JS = ("Array.prototype.filter.call(document.querySelectorAll('#fig-map-13 .scatterlayer path.js-fill'),"
              "function (p) { return (p.getAttribute('d') || '').length > 20; }).length")
LEGEND_JS = ("Array.prototype.map.call(document.querySelectorAll('#fig-map-13 g.legend text.legendtext'),"
             "function (t) { return t.textContent; })")


@needs_chromium
def test_the_bym2_classes_and_the_clusters_are_drawn_with_their_legends(rendered_es):
    """As a user chooses them from the keyboard, on a desktop and a phone: the BYM2 probability in
    its five classes with their legend in Spanish, then the clusters with the one type the bundled
    build has in the RM (none is significant); every commune painted on both panels."""
    use_language("es")
    expected = {"bym2_exceedance": [exceedance_class_label(k) for k in range(5)],
                "clusters": [cluster_label("not significant")]}
    with Browser() as browser:
        for width in (1400, 420):
            tab = browser.open(page_url(rendered_es, "region=13"), width, 900)
            tab.wait_rendered()
            for measure, legend in expected.items():
                label = tab.choose_menu_option("fig-map-13", menu_number(tab, "13", measure))
                assert label == t("map.option", measure=t(f"map.{measure}"), combo="TMI · 2010-2019")
                assert tab.eval(LEGEND_JS) == legend, (width, measure)
                assert tab.eval(PAINTED_JS) == 104
            assert tab.console_errors() == []


@needs_chromium
def test_unknown_region_in_the_address_is_said(rendered_es):
    use_language("es")
    with Browser() as browser:
        tab = browser.open(page_url(rendered_es, "region=99"), 1400, 900)
        tab.wait_rendered()
        notice = tab.eval("(function(){var n=document.getElementById('region-notice');"
                          "return n.hidden ? null : n.textContent;})()")
        shown = tab.eval("Array.prototype.filter.call(document.querySelectorAll('section.region-block'),"
                         "function(s){return s.style.display !== 'none';}).map(function(s){return s.dataset.region;})")
    assert shown == ["13"]
    assert notice == t("js.unknown_region", code="99", shown="13 · Región Metropolitana de Santiago")


@needs_chromium
def test_tables_choose_their_columns_and_say_when_they_scroll(rendered_es):
    with Browser() as browser:
        tab = browser.open(page_url(rendered_es, "region=13"), 420, 900)
        tab.wait_rendered()
        head = "#comparison-table-13 thead th"
        shown = lambda: tab.eval(f"Array.prototype.filter.call(document.querySelectorAll('{head}'),"  # noqa: E731
                                 "function(h){return h.style.display !== 'none';}).length")
        n_default = shown()
        hint = tab.eval("document.getElementById('comparison-table-13-hint').hidden")
        # Ticking a hidden column (the code, the second) shows it in the header and every row.
        tab.eval("document.querySelector('#comparison-table-13').closest('section')"
                 ".querySelector('.column-chooser').open = true")
        tab.click('input[data-table="comparison-table-13"][data-col="1"]')
        after = shown()
        code_cells = tab.eval("Array.prototype.filter.call(document.querySelectorAll('#comparison-table-13 tbody tr'),"
                              "function(r){return r.style.display !== 'none' && r.cells[1].style.display !== 'none';})"
                              ".length")
    assert n_default == sum(1 for *_, on in COMPARISON_COLUMNS if on) < len(COMPARISON_COLUMNS)
    assert after == n_default + 1 and code_cells == 52
    assert hint is False  # the phone's box scrolls, and says so


@needs_chromium
@needs_axe
def test_accessibility_audit_has_no_serious_violation(rendered_es):
    """axe-core (WCAG 2.1 A/AA and best practices) on the page as drawn, desktop and phone."""
    with Browser() as browser:
        for width in (1400, 420):
            tab = browser.open(page_url(rendered_es, "region=13"), width, 900)
            tab.wait_rendered()
            violations = tab.axe_violations(AXE)
            bad = [(v["id"], v["impact"], v["nodes"][:2]) for v in violations if v["impact"] in ("serious", "critical")]
            assert bad == [], (width, bad)


@needs_chromium
def test_every_region_renders_when_selected(multi_region):
    _, path, _ = multi_region
    with Browser() as browser:
        for code in REGIONS:
            state = check_page(browser, path, 420, f"region={code}")
            shown = {fig_id for fig_id, *_ in state["figures"]}
            assert f"fig-ranking-{code}" in shown and "fig-trends-CL-imr" in shown
            others = tuple(f"-{c}" for c in REGIONS if c != code)
            assert not [f for f in shown if f.endswith(others)], shown


@needs_chromium
def test_screenshots_command(rendered_es, tmp_path):
    paths = report.write_screenshots(rendered_es, tmp_path)
    assert {p.name for p in paths} >= {"page-1400.png", "page-420.png", "map-420.png", "funnel-1400.png",
                                       "map-smoothed-1400.png", "map-smoothed-420.png", "table-420.png",
                                       "map-bym2-1400.png", "map-bym2-exceedance-420.png", "map-clusters-1400.png",
                                       "map-clusters-420.png"}
    for p in paths:
        width, height = png_size(p)
        assert width in (1400, 420) and height >= 300 and p.stat().st_size > 20_000, p


# --------------------------------------------------------------------------------------------
# What the other marts add: methods, segments, screening, adjusted funnel, UN IGME
# --------------------------------------------------------------------------------------------


def test_trend_panels_show_a_class_only_for_a_valid_fit(bundled_warehouse, page):
    fig = figures(page)["fig-trends-13-imr"]
    titles = {a["text"].split("</b>")[0][3:]: a for a in fig["layout"]["annotations"]}
    fits = {t["meta"]["area_code"] for t in traces(fig, kind="fit")}
    rows = query(bundled_warehouse, "select area_code, area_name, trend, note from marts.fct_trends where area_level = "
                                    "'commune' and region_code = '13' and indicator = 'imr' and period_start = 2010 "
                                    "and period_end = 2019 and method = (select trend_method from marts.meta_build)")
    (min_deaths,) = query(bundled_warehouse, "select json_extract(vars_json, '$.trend_min_deaths')::int "
                                             "from marts.meta_build")[0]
    seen = set()
    for code, name, cls, note in rows:
        title = titles[name]
        if cls == "insufficient_data":
            assert f"insufficient data: &lt; {min_deaths} deaths" in title["text"].replace("<", "&lt;") or \
                f"insufficient data: < {min_deaths} deaths" in title["text"]
            assert "APC" not in title["text"].split("<br>")[1] and code not in fits
        elif cls == "not_estimable":
            assert "not estimable: no valid fit" in title["text"] and title["hovertext"].startswith(note[:30])
            assert code not in fits
        else:
            assert trend_label(cls).lower() in title["text"] and code in fits
        seen.add(cls)
    assert {"insufficient_data", "stationary"} <= seen
    # The second method's APC beside the headline's (the count model), as the mart has it, and
    # its own class where it differs (the study's Prais-Winsten increase or decrease that the
    # count model does not confirm).
    apc = query(bundled_warehouse, "select apc from marts.fct_trends where area_code = '13' and indicator = 'imr' and "
                                   "period_start = 2010 and period_end = 2019 and method = 'prais_winsten'")[0][0]
    region_title = fig["layout"]["annotations"][0]["text"]
    assert f"Prais-Winsten: APC {fmt(apc, 1, signed=True)}%" in region_title
    unconfirmed = query(bundled_warehouse, "select s.area_name from marts.fct_trends s join marts.fct_trends h "
                        "using (area_level, area_code, indicator, period_start, period_end) where s.area_level = 'commune' "
                        "and s.region_code = '13' and s.indicator = 'imr' and s.period_start = 2010 and s.period_end = 2019 "
                        "and s.method = 'prais_winsten' and s.trend = 'not_confirmed' and h.method = 'poisson' "
                        "and h.trend = 'stationary'")
    assert unconfirmed  # the bundled RM has such communes
    for (name,) in unconfirmed:
        assert "APC" in titles[name]["text"] and "(not confirmed)" in titles[name]["text"]


def test_joinpoints_are_the_segments_mart(bundled_warehouse, page):
    fig = figures(page)["fig-trends-CL-imr"]
    drawn = sorted((s["name"].split()[1], s["x0"]) for s in fig["layout"].get("shapes", []))
    expected = sorted((code, start) for code, start in query(
        bundled_warehouse, "select area_code, segment_start from marts.fct_trend_segments where area_level in "
                           "('country', 'region') and indicator = 'imr' and period_start = 2010 and period_end = 2019 "
                           "and segment > 1"))
    assert drawn == expected and expected  # the bundled build has regions with a joinpoint


def test_method_name_interval_level_and_cut_off_come_from_the_build(bundled_warehouse, altered):
    """The report writes no method name, interval level or exceedance cut-off of its own."""
    text = altered.text
    # The study's section names the study's own method (its statements and fct_study_findings'
    # prais_winsten rows), whatever the build's headline method: left out of this check.
    study = text[text.index('<h2 id="study">'):text.index("</table>", text.index('<h2 id="study">'))]
    assert "Trends by commune (Test-Method)" in text and "Prais-Winsten" not in visible_text(text.replace(study, ""))
    assert "(90% CI " in text and "(95% CI −" not in text.split("Trends by commune")[0].split("region-block")[-1]
    fig = figures(text)["fig-map-13"]
    option = next(o for o in fig["layout"]["meta"]["options"] if o["measure"] == "exceedance" and o["combo"] == FULL)
    above = {n for (n,) in query(bundled_warehouse, "select commune_name from marts.fct_smoothed_rates where "
                                                    "indicator = 'imr' and period_start = 2010 and period_end = 2019 "
                                                    "and prob_exceeds_region > 0.6 and region_code = '13'")}
    assert set(option["significant"]) == above
    assert "a probability of exceeding above 0.60" in text


def test_screening_lists_the_worst_first(bundled_warehouse, page):
    region = page[page.index('<section class="region-block" data-region="13"'):]
    listed = re.findall(r"<li><b>([^<]+)</b> \((\d+)\): ([^<]*)</li>", region[region.index('class="screening"'):]
                        .split("</ul>")[0])
    rows = query(bundled_warehouse, "select screening_category, list(commune_name order by commune_name) from "
                                    "marts.fct_commune_screening where is_headline_method and region_code = '13' and "
                                    "indicator = 'imr' and period_start = 2010 and period_end = 2019 "
                                    "group by screening_category, screening_order order by screening_order")
    assert [(label, int(n), names) for label, n, names in listed] == [
        (t(f"screening.{cat}"), len(names), ", ".join(names)) for cat, names in rows]


def test_funnel_offers_the_over_dispersion_adjusted_limits(bundled_warehouse, page):
    funnel = figures(page)["fig-funnel-13"]
    (t95,) = traces(funnel, combo=FULL, level=0.95, limits="adjusted")
    upper = query(bundled_warehouse, "select adjusted_upper_95_per_1000 from marts.fct_funnel_limits where "
                                     "region_code = '13' and indicator = 'imr' and period_start = 2010 and "
                                     "period_end = 2019 order by grid_point")
    assert t95["y"][:len(upper)] == pytest.approx([u for (u,) in upper], rel=1e-12)
    cats = {t["meta"]["funnel_category"]: set(t["text"]) for t in traces(funnel, combo=FULL, limits="adjusted")
            if "funnel_category" in t["meta"]}
    mart = {}
    for name, cat in query(bundled_warehouse, "select commune_name, funnel_category_adjusted from "
                                              "marts.fct_commune_vs_region where region_code = '13' and indicator = "
                                              "'imr' and period_start = 2010 and period_end = 2019"):
        mart.setdefault(cat, set()).add(name)
    assert cats == mart
    labels = [o["label"] for o in funnel["layout"]["meta"]["menu"]]
    assert "IMR · 2010-2019 · adjusted for over-dispersion" in labels


def test_country_against_un_igme(bundled_warehouse, page):
    fig = figures(page)["fig-benchmarks-CL"]
    (country,) = traces(fig, kind="country")
    rows = query(bundled_warehouse, "select year, country_rate_per_1000 from marts.fct_external_benchmarks where "
                                    "indicator = 'imr' and unavailable_reason is null order by year")
    assert country["x"] == [y for y, _ in rows] and country["y"] == pytest.approx([r for _, r in rows], rel=1e-12)
    table = embedded(page)["data-fig-benchmarks-CL"]["rows"]
    assert len(table) == len(rows) and table[0][1][0] == str(rows[0][0])


# --------------------------------------------------------------------------------------------
# The study, reproduced (marts.fct_study_findings)
# --------------------------------------------------------------------------------------------

STUDY_COLUMNS = ("study.col.statement", "study.col.study_value", "study.col.warehouse_value", "study.col.period",
                 "study.col.verdict")


def study_findings(warehouse: Path) -> pd.DataFrame:
    with duckdb.connect(str(warehouse), read_only=True) as con:
        return con.execute("select * from marts.fct_study_findings order by finding_id").df()


def study_rows(page: str) -> list[tuple[int, str, list[str]]]:
    """(finding_id, status, [cell texts]) of the study's table, as the page writes them."""
    start = page.index('<h2 id="study">')
    section = page[start:page.index("</table>", start)]
    return [(int(finding), status, [html.unescape(re.sub(r"<[^>]+>", "", cell))
                                    for cell in re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", body, re.S)])
            for finding, status, body in re.findall(r'<tr data-finding="(\d+)" data-status="(\w+)">(.*?)</tr>',
                                                    section, re.S)]


@pytest.mark.parametrize("lang", ["es", "en"])
def test_the_study_reproduced_shows_every_row_of_the_mart(bundled_warehouse, page, page_es, lang):
    text = page_es if lang == "es" else page
    use_language(lang)
    findings = study_findings(bundled_warehouse)
    assert len(findings) == 24
    start = text.index('<h2 id="study">')
    section = text[start:text.index("</table>", start)]
    assert html.unescape(section).startswith(f'<h2 id="study">{t("study.heading")}</h2>')
    # A real table: a caption, a header per column, a row header per statement.
    assert f"<caption>{html.escape(t('study.table'))}</caption>" in section
    assert re.findall(r'<th scope="col">(.*?)</th>', section) == [html.escape(t(key)) for key in STUDY_COLUMNS]
    counts = findings.status.value_counts()
    assert t("study.summary", n=24, holds=counts.get("holds", 0), does_not_hold=counts.get("does_not_hold", 0),
             not_computable=counts.get("not_computable", 0)) in visible_text(section)
    rows = study_rows(text)
    assert [(finding, status) for finding, status, _ in rows] == list(zip(findings.finding_id, findings.status))
    for (_, _, cells), row in zip(rows, findings.to_dict("records")):
        statement, study_value, warehouse_value, period, verdict = cells
        assert statement == row[f"statement_{lang}"]
        if row["finding_kind"] == "trend":
            assert study_value == trend_label(row["study_trend"])
        elif not pd.isna(row["study_value"]):
            assert fmt(row["study_value"], 2).rstrip("0") in study_value  # 12,7 / 4,05 / 1,75 as published
        if pd.isna(row["warehouse_value"]):
            assert warehouse_value == t("missing")
        elif row["finding_kind"] == "trend":
            assert fmt(row["warehouse_value"], 1, signed=True) in warehouse_value
            assert trend_label(row["prais_direction"]).lower() in warehouse_value
        else:
            assert fmt(row["warehouse_value"]) in warehouse_value
            assert fmt(row["warehouse_ci95_lower"]) in warehouse_value and fmt(row["warehouse_ci95_upper"]) in warehouse_value
        if isinstance(row["period_label"], str):
            assert period.startswith(row["period_label"])
        if isinstance(row["missing_years_reason"], str):  # every missing span, with its reason in words
            for part in row["missing_years_reason"].split("; "):
                span, _, reason = part.partition(": ")
                assert f"{span}: {t('study.reason.' + reason)}" in period, (period, part)
        # The verdict in words (never by colour alone), with the reason when it cannot be computed.
        if row["status"] == "not_computable":
            assert verdict == t("study.not_computable", reason=t(f"study.reason.{row['not_computable_reason']}"))
        else:
            assert verdict == t(f"study.{row['status']}")
    # The bundled build: Independencia's TMI the highest 2010-2014, its RT holds; the TMIT rows say why not.
    by_id = {finding: cells for finding, _, cells in rows}
    assert by_id[1][2].startswith("Independencia: ") and by_id[1][4] == t("study.holds")
    assert t("study.reason.indicator_not_in_build") in by_id[2][4]


@needs_chromium
def test_the_study_table_is_read_on_a_phone_in_both_languages(bundled_warehouse, rendered_es, rendered):
    """At 420 px the study's rows are cards: every cell beside its column's name, on screen."""
    n_rows = len(study_findings(bundled_warehouse))
    with Browser() as browser:
        for path, lang in ((rendered_es, "es"), (rendered, "en")):
            use_language(lang)
            tab = browser.open(page_url(path, "region=13"), 420, 900)
            tab.wait_rendered()
            state = tab.eval("""(function () {
              var table = document.getElementById('study-findings');
              var cells = [];
              Array.prototype.forEach.call(table.tBodies[0].rows, function (r) {
                Array.prototype.forEach.call(r.cells, function (c) {
                  var box = c.getBoundingClientRect();
                  cells.push([c.tagName, c.getAttribute('data-label'), getComputedStyle(c, '::before').content,
                              box.left, box.right, c.textContent]);
                });
              });
              return {shown: table.offsetParent !== null, rows: table.tBodies[0].rows.length,
                      caption: table.caption.textContent, cells: cells,
                      width: document.documentElement.scrollWidth};
            })()""")
            assert state["shown"] and state["rows"] == n_rows and state["caption"] == t("study.table")
            assert state["width"] <= 420
            labels = [t(key) for key in STUDY_COLUMNS]
            for tag, label, before, left, right, text in state["cells"]:
                assert left >= 0 and right <= 420.5, (text, left, right)
                if tag == "TD":
                    assert label in labels[1:] and before == f'"{label}"', (text, label, before)
