"""The HTML report (`python -m infant_mortality.report`) on a real build of the bundled data.

The figures' numbers are read back from the plotly JSON embedded in the page and compared
with the marts; a headless Chromium (Debian's `chromium`) checks that the page renders with
no JavaScript error. Only the browser tests are skipped when Chromium is missing.
"""

from __future__ import annotations

import html
import json
import math
import re
import shutil
import struct
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pytest

from conftest import query
from infant_mortality import report
from infant_mortality.poisson import funnel_count_limits
from infant_mortality.prais_winsten import prais_winsten_trend

FULL = "imr|2010|2019"
CHROMIUM = report.find_chromium()
needs_chromium = pytest.mark.skipif(
    CHROMIUM is None, reason="headless Chromium not installed (apt-get install chromium); CI installs it"
)


# --------------------------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------------------------


def figures(page: str) -> dict[str, dict]:
    """The plotly specs embedded in the report, by figure id."""
    found = re.findall(r'<script type="application/json" id="(fig-[^"]+)-data">(.*?)</script>', page, re.S)
    return {fig_id: json.loads(text) for fig_id, text in found}


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


def has_table(warehouse: Path, name: str) -> bool:
    return bool(
        query(warehouse, "select count(*) from information_schema.tables where table_schema = 'marts' "
                         "and table_name = ?", [name])[0][0]
    )


def copy_warehouse(src: Path, dst_dir: Path) -> Path:
    dst = dst_dir / "copy.duckdb"
    shutil.copyfile(src, dst)
    return dst


def stand_in_trends(warehouse: Path) -> None:
    """Replace marts.fct_trends by one computed here (Prais-Winsten on log10 rate, zero years
    dropped) so that the trend figures are tested even before the real mart exists."""
    with duckdb.connect(str(warehouse)) as con:
        rates = con.execute("select * from marts.fct_rates_commune_year where area_level in ('commune', 'region')").df()
        rows = []
        for (level, code, ind), g in rates.groupby(["area_level", "area_code", "indicator"]):
            g = g.sort_values("year")
            used = g[g.rate_per_1000 > 0]
            base = dict(area_level=level, area_code=code, area_name=g.area_name.iloc[0],
                        region_code=g.region_code.iloc[0], indicator=ind, period_start=int(g.year.min()),
                        period_end=int(g.year.max()), n_years=len(g), n_years_used=len(used),
                        n_zero_years=int((g.rate_per_1000 == 0).sum()))
            if len(used) < 5:
                rows.append(dict(base, trend="not_estimable", note="fewer than 5 usable years"))
                continue
            res = prais_winsten_trend(np.log10(used.rate_per_1000.to_numpy()), used.year.to_numpy())
            b, se, p = float(res.params[1]), float(res.bse[1]), float(res.pvalues[1])
            rows.append(dict(
                base, slope_log10=b, slope_se=se,
                t_stat=b / se, p_value=p, rho=res.rho, iterations=res.iterations, converged=res.converged,
                dw_original=res.dw_original, dw_transformed=res.dw_transformed, apc=(10**b - 1) * 100,
                apc_ci95_lower=(10 ** (b - 2.3 * se) - 1) * 100, apc_ci95_upper=(10 ** (b + 2.3 * se) - 1) * 100,
                trend=("increasing" if b > 0 else "decreasing") if p < 0.05 else "stationary", note=None,
            ))

        con.register("frame", pd.DataFrame(rows))
        con.execute("drop table if exists marts.fct_trends")
        con.execute("create table marts.fct_trends as select * from frame")


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()[:24]
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    return struct.unpack(">II", data[16:24])


def chromium(page: Path, *args: str) -> subprocess.CompletedProcess:
    with tempfile.TemporaryDirectory(prefix="imr-test-chromium-") as profile:
        cmd = [
            CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
            "--disable-component-update", "--disable-sync", "--no-first-run", f"--user-data-dir={profile}",
            *args, page.resolve().as_uri(),
        ]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


# --------------------------------------------------------------------------------------------
# Fixtures
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def rendered(bundled_warehouse, tmp_path_factory) -> Path:
    """The report of the bundled build, written through the command-line entry point."""
    out = tmp_path_factory.mktemp("report") / "report.html"
    assert report.main(["--warehouse", str(bundled_warehouse), "--output", str(out)]) == 0
    return out


@pytest.fixture(scope="module")
def page(rendered) -> str:
    return rendered.read_text(encoding="utf-8")


# --------------------------------------------------------------------------------------------
# Content
# --------------------------------------------------------------------------------------------


def test_every_commune_appears_in_figures_and_table(bundled_warehouse, page):
    names = [n for (n,) in query(bundled_warehouse, "select distinct commune_name from marts.fct_commune_vs_region")]
    assert len(names) == 52
    figs = figures(page)
    ranking = figs["fig-ranking-13"]
    in_ranking = {y for t in traces(ranking, combo=FULL) for y in t["y"]}
    in_funnel = {x for t in traces(figs["fig-funnel-13"], combo=FULL) if "funnel_category" in t["meta"] for x in t["text"]}
    in_map = {row[0] for t in traces(figs["fig-map-13"], combo=FULL, panel="overview") for row in t["customdata"]}
    table = page[page.index('id="comparison-table-13"'):]
    for name in names:
        assert name in in_ranking and name in in_funnel and name in in_map, name
        assert f"<td>{html.escape(name)}</td>" in table, name
    # The ranking's categories are every commune sorted by rate (highest on top = last).
    order = ranking["layout"]["yaxis"]["categoryarray"]
    rates = dict(query(bundled_warehouse, "select commune_name, rate_per_1000 from marts.fct_commune_vs_region "
                                          "where period_start = 2010 and period_end = 2019"))
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
    cd = dict(zip(report.rf.RANKING_CUSTOMDATA, t["customdata"][i]))
    for col in ("ci95_lower", "ci95_upper", "rate_ratio", "rate_ratio_ci95_lower", "rate_ratio_ci95_upper",
                "excess_rate_per_1000", "attributable_percent", "p_value", "deaths", "live_births"):
        assert close(cd[col], mart[col]), col
    assert close(t["x"][i] + t["error_x"]["array"][i], mart["ci95_upper"])
    assert close(t["x"][i] - t["error_x"]["arrayminus"][i], mart["ci95_lower"])
    assert mart["rate_per_1000"] == pytest.approx(8.653846, abs=1e-6)

    # The regional line: the region's own pooled rate (sum/sum of its yearly rows).
    deaths, births = query(bundled_warehouse, "select sum(deaths), sum(live_births) from marts.fct_rates_commune_year "
                                              "where area_level = 'region' and indicator = 'imr'")[0]
    line = [s for s in figs["fig-ranking-13"]["layout"]["shapes"] if s["type"] == "line"][0]
    assert close(line["x0"], 1000 * float(deaths) / float(births))

    # Map: RT and RAP in the hover data; funnel: births, rate and the mart's category.
    t, i = point(traces(figs["fig-map-13"], combo=FULL, panel="overview"), "Independencia", "customdata")
    name, rate, lo, hi, rt, rap, rap_pct = t["customdata"][i]
    assert close(rt, mart["rate_ratio"]) and close(rap, mart["excess_rate_per_1000"]) and close(rate, mart["rate_per_1000"])
    assert "RT 1.28 (95% CI 1.08 to 1.52)" in t["hovertext"][i]
    t, i = point([t for t in traces(figs["fig-funnel-13"], combo=FULL) if "funnel_category" in t["meta"]],
                 "Independencia", "text")
    assert t["meta"]["funnel_category"] == mart["funnel_category"]
    assert close(t["x"][i], mart["live_births"]) and close(t["y"][i], mart["rate_per_1000"])


def test_funnel_limits_are_the_exact_poisson_limits(page):
    funnel = figures(page)["fig-funnel-13"]
    (line,) = [t for t in traces(funnel, combo=FULL) if "region_rate" in t["meta"]]
    region_rate = line["meta"]["region_rate"]
    for level in (0.95, 0.998):
        (t,) = traces(funnel, combo=FULL, level=level)
        gap = t["x"].index(None)
        births, upper, lower = t["x"][5], t["y"][5], t["y"][gap + 1 + 5]
        lo, hi = funnel_count_limits(region_rate * births / 1000, level)
        assert upper == pytest.approx(1000 * hi[0] / births, rel=1e-9)
        assert lower == pytest.approx(1000 * lo[0] / births, rel=1e-9)


def test_headline_counts_and_data_quality(bundled_warehouse, page):
    hi, lo, n = query(bundled_warehouse, "select count(*) filter (where comparison = 'higher'), "
                                         "count(*) filter (where comparison = 'lower'), count(*) "
                                         "from marts.fct_commune_vs_region where period_start = 2010 and period_end = 2019")[0]
    assert f"<b>{hi}</b> of {n} communes significantly" in page
    assert f"<b>{lo}</b> significantly <span class='lower'>lower</span>" in page
    for term in ("TMI", "TMN", "TMNP", "TMIT", "RT, razón de tasas", "RAP, riesgo atribuible", "RAP%"):
        assert term in page
    affects = query(bundled_warehouse, "select record_key from marts.audit_data_quality where affects_results")
    others = query(bundled_warehouse, "select count(*) from marts.audit_data_quality where not affects_results")[0][0]
    quality = page[page.index("<h2>Data quality</h2>"):]
    assert f"<b>{len(affects)}</b> finding(s) change published numbers" in quality
    for (key,) in affects:
        assert html.escape(key) in quality
    assert f"{others} other finding(s)" in quality
    assert "derived: INE deaths all ages - DEIS deaths aged 1+" in page  # the count basis is stated


def test_no_external_references(page):
    tags = re.findall(r"<(?:script|link|img|iframe|source|embed|object)\b[^>]*>", page, re.I)
    for tag in tags:
        assert not re.search(r"\b(?:src|href|data)\s*=", tag, re.I), tag
    assert not re.search(r"@import|url\(\s*['\"]?https?:", page.split("<script>")[0], re.I)
    assert page.count("<script>") >= 3 and "Plotly.newPlot" in page  # plotly.js is inlined


# --------------------------------------------------------------------------------------------
# Trends: with the mart, with a stand-in, and without it
# --------------------------------------------------------------------------------------------


def check_trend_figure(warehouse: Path, page: str) -> None:
    fig = figures(page)["fig-trends-13-imr"]
    trends = {(level, code): (slope, apc, cls) for level, code, slope, apc, cls in query(
        warehouse,
        # The figure shows the widest trend window (the full window of the data).
        "select area_level, area_code, slope_log10, apc, trend from marts.fct_trends where indicator = 'imr' "
        "and period_end - period_start = (select max(period_end - period_start) from marts.fct_trends)",
    )}
    rate_traces = traces(fig, kind="rates")
    assert len(rate_traces) == 53 and rate_traces[0]["meta"]["area_code"] == "13"  # the region first
    fits = {t["meta"]["area_code"]: t for t in traces(fig, kind="fit")}
    expected = {code for (level, code), (slope, _, _) in trends.items() if slope is not None and not math.isnan(slope)}
    assert set(fits) == expected
    for code, t in fits.items():
        level = "region" if code == "13" else "commune"
        slope, apc, cls = trends[(level, code)]
        assert t["meta"]["slope_log10"] == pytest.approx(slope, rel=1e-12)
        assert t["meta"]["trend"] == cls
        x, y = t["x"], t["y"]
        assert (math.log10(y[-1]) - math.log10(y[0])) / (x[-1] - x[0]) == pytest.approx(slope, rel=1e-9, abs=1e-12)
    # Subplot titles carry the class and the APC.
    titles = [a["text"] for a in fig["layout"]["annotations"]]
    slope, apc, cls = trends[("commune", "13108")]
    title = next(t for t in titles if "Independencia" in t)
    assert report.rf.TREND_LABELS[cls].lower() in title and f"APC {report.fmt(apc, 1, signed=True)}%" in title
    assert 'id="trends-missing-note"' not in page


def test_trend_section_with_the_real_mart(bundled_warehouse, page):
    if not has_table(bundled_warehouse, "fct_trends"):
        pytest.skip("marts.fct_trends is not built by this project yet (covered by the stand-in test)")
    check_trend_figure(bundled_warehouse, page)


def test_trend_section_with_a_stand_in_mart(bundled_warehouse, tmp_path):
    warehouse = copy_warehouse(bundled_warehouse, tmp_path)
    stand_in_trends(warehouse)
    out = report.write_report(warehouse, tmp_path / "r.html")
    text = out.read_text(encoding="utf-8")
    check_trend_figure(warehouse, text)
    # The intercept came from the Prais-Winsten refit (slope identical), not the approximate anchor.
    fits = traces(figures(text)["fig-trends-13-imr"], kind="fit")
    assert {t["meta"]["line_method"] for t in fits} == {"refit"}
    # The headline states the region's trend class and APC.
    cls, apc = query(warehouse, "select trend, apc from marts.fct_trends where area_level = 'region'")[0]
    headline = text[text.index('<div class="headline">'):]
    headline = headline[:headline.index("</div>")]
    assert f"<b>{cls}</b>" in headline and f"APC {report.fmt(apc, 1, signed=True)}%" in headline


def test_trend_section_degrades_without_the_mart(bundled_warehouse, tmp_path):
    warehouse = copy_warehouse(bundled_warehouse, tmp_path)
    with duckdb.connect(str(warehouse)) as con:
        con.execute("drop table if exists marts.fct_trends")
    text = report.write_report(warehouse, tmp_path / "r.html").read_text(encoding="utf-8")
    assert 'id="trends-missing-note"' in text and "no <code>marts.fct_trends</code> table" in text
    fig = figures(text)["fig-trends-13-imr"]
    assert len(traces(fig, kind="rates")) == 53 and not traces(fig, kind="fit")
    assert not [t for t in traces(figures(text)["fig-map-13"]) if t["meta"].get("colour") == "trend"]


# --------------------------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------------------------


def test_missing_warehouse_tells_to_build_it(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("IMR_DUCKDB_PATH", str(tmp_path / "absent.duckdb"))
    assert report.main(["--output", str(tmp_path / "r.html")]) == 1
    err = capsys.readouterr().err
    assert "absent.duckdb" in err and "make warehouse" in err
    assert not (tmp_path / "r.html").exists()


def test_env_path_is_the_default_and_the_file_is_closed(bundled_warehouse, tmp_path, monkeypatch):
    warehouse = copy_warehouse(bundled_warehouse, tmp_path)
    monkeypatch.setenv("IMR_DUCKDB_PATH", str(warehouse))
    out = tmp_path / "nested" / "r.html"
    assert report.main(["--output", str(out)]) == 0 and out.stat().st_size > 1_000_000
    with duckdb.connect(str(warehouse)) as con:  # read-write: only possible once the report closed it
        assert con.execute("select count(*) from marts.dim_commune").fetchone()[0] > 0


# --------------------------------------------------------------------------------------------
# Headless browser
# --------------------------------------------------------------------------------------------


@needs_chromium
def test_report_renders_in_headless_chromium(rendered, page, tmp_path):
    shot = tmp_path / "report.png"
    with ThreadPoolExecutor(2) as pool:
        dom_run = pool.submit(chromium, rendered, "--enable-logging=stderr", "--v=0", "--virtual-time-budget=10000",
                              "--dump-dom")
        shot_run = pool.submit(chromium, rendered, "--virtual-time-budget=10000", "--hide-scrollbars",
                               f"--screenshot={shot}", "--window-size=1400,2400")
        dom, shot_res = dom_run.result(), shot_run.result()
    assert dom.returncode == 0, dom.stderr[-3000:]
    text = dom.stdout
    # Figures drawn at load: every figure of the (first) region that is not inside a closed <details>.
    first_region = page[page.index('<section class="region-block"'):page.index("</section>")]
    shown = [f for f in re.findall(r'<div class="figure" id="([^"]+)"', first_region)
             if f not in "".join(re.findall(r"<details>.*?</details>", first_region, re.S))]
    assert len(shown) >= 4
    starts = sorted(text.index(f'id="{fig_id}"') for fig_id in shown)
    for fig_id in shown:
        start = text.index(f'id="{fig_id}"')
        later = [s for s in starts if s > start]
        chunk = text[start:later[0] if later else len(text)]  # this figure's DOM, up to the next one
        assert 'data-rendered="1"' in chunk[:300], fig_id
        assert re.search(r'<svg[^>]*class="main-svg"', chunk) and "<path" in chunk, fig_id
    assert text.count('class="main-svg"') >= len(shown)
    errors = re.search(r'<div id="js-errors"[^>]*>(.*?)</div>', text, re.S)
    assert errors is not None and errors.group(1).strip() == "", errors.group(1) if errors else text[:500]
    console = [line for line in dom.stderr.splitlines() if ":CONSOLE" in line]
    bad = [line for line in console if re.search(r"error|uncaught|exception|failed", line, re.I)]
    assert not bad, bad
    assert shot.is_file(), shot_res.stderr[-3000:]
    assert png_size(shot) == (1400, 2400) and shot.stat().st_size > 50_000


@needs_chromium
def test_figure_screenshots(bundled_warehouse, tmp_path):
    paths = report.write_screenshots(bundled_warehouse, tmp_path)
    assert [p.name for p in paths] == ["ranking.png", "map.png"]
    for p in paths:
        width, height = png_size(p)
        assert width == report.rf.MAP_ASSUMED_WIDTH and height >= 700 and p.stat().st_size > 30_000
