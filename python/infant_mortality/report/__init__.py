"""A self-contained HTML report of the warehouse: the country, then per region the ranking,
trends, funnel plot, choropleth map, inequity section and comparison table, then the study
reproduced, from the marts only.

    python -m infant_mortality.report [--warehouse PATH] [--output PATH] [--lang es|en] [--screenshots DIR]

Reads the marts of a built warehouse (default: the published ``warehouse/infant_mortality.duckdb``,
or ``$IMR_DUCKDB_PATH``; opened read-only and closed as soon as the tables are read) and writes
one HTML file (default ``reports/infant_mortality_report.html``), in Spanish (default) or English
(``--lang en``; every text is in the catalogue ``i18n``), that needs no server and no
internet: plotly.js, the style sheet and script (``static/``) and every figure's data are
inlined; a figure is decoded and drawn when its region is selected. Modules: ``marts`` (reading),
one module per figure (``ranking``, ``trends``, ``funnel``, ``choropleth`` with the BYM2 and
cluster options of ``bym2_clusters``, ``inequity``, ``benchmarks``), ``study`` (the study's results as ``fct_study_findings`` checks them), ``findings``
(the figures' text alternatives), ``tables``, ``page`` (the HTML), ``browser`` (headless Chromium
over the DevTools pipe); what they share: ``context`` (the render context: language, indicators,
interval level), ``i18n`` (the catalogue), ``formats`` (numbers, intervals, a rate's unit),
``labels`` (names of indicators and classes), ``style`` (colours, layout), ``combos`` (indicator x
period options and menus), ``mart_text`` (the marts' English texts in Spanish).

``--screenshots DIR`` also writes PNGs of the top of the page and of each figure of the
Metropolitan Region at 1400 and 420 px wide, drawn by headless Chromium (``/usr/bin/chromium`` or ``$CHROMIUM``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from infant_mortality.report.browser import find_chromium, write_screenshots
from infant_mortality.report.i18n import DEFAULT_LANGUAGE, LANGUAGES
from infant_mortality.report.marts import DEFAULT_WAREHOUSE, ReportError, default_warehouse, load_marts
from infant_mortality.report.page import build_html, region_figures
from infant_mortality.report.page import write_report as _write

DEFAULT_OUTPUT = Path("reports/infant_mortality_report.html")

__all__ = ["ReportError", "build_html", "find_chromium", "load_marts", "main", "region_figures", "write_report",
           "write_screenshots"]


def write_report(warehouse, output, lang: str = DEFAULT_LANGUAGE) -> Path:
    """Read the marts of `warehouse` and write the report to `output` in the language `lang`."""
    return _write(load_marts(warehouse), output, lang)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m infant_mortality.report", description=__doc__.split("\n")[0])
    parser.add_argument("--warehouse", type=Path, default=None,
                        help=f"built DuckDB warehouse (default: $IMR_DUCKDB_PATH or {DEFAULT_WAREHOUSE})")
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT, help=f"HTML file to write (default: {DEFAULT_OUTPUT})")
    parser.add_argument("--lang", choices=LANGUAGES, default=DEFAULT_LANGUAGE,
                        help=f"language of the report (default: {DEFAULT_LANGUAGE}, Spanish; en: English)")
    parser.add_argument("--screenshots", type=Path, default=None, metavar="DIR",
                        help="also write PNGs of the page and its figures at 1400 and 420 px (needs headless Chromium)")
    args = parser.parse_args(argv)
    warehouse = args.warehouse or default_warehouse()
    try:
        out = write_report(warehouse, args.output, args.lang)
        print(f"report written to {out} ({out.stat().st_size / 1e6:.1f} MB)")
        if args.screenshots is not None:
            for p in write_screenshots(out, args.screenshots):
                print(f"screenshot written to {p}")
    except ReportError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0
