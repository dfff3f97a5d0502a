"""The report's code as a room a newcomer can live in (issue 43): small functions, no grab-bag
module, one render context, the unit of each rate from its indicator, and the marts it reads
named once. Static checks on the source and small renders: no warehouse needed."""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from pathlib import Path

import pytest
import yaml

from conftest import REPO_ROOT
from infant_mortality.report import page
from infant_mortality.report.context import Indicator, RenderContext, current
from infant_mortality.report.formats import fmt_apc, unit
from infant_mortality.report.i18n import MESSAGES, t
from infant_mortality.report.marts import REQUIRED_MARTS, Settings
from infant_mortality.report.style import NARROW_PX

REPORT = REPO_ROOT / "python" / "infant_mortality" / "report"
MAX_FUNCTION_LINES = 100
# A rate's unit written out: 1000 / 1.000 / 1,000, not part of a longer number (100.000 is not one).
UNIT_1000 = re.compile(r"(?<![\d.,])1[.,]?000(?![\d]|[.,]\d)")
# An indicator at 1000 live births and one at 100,000 (a rare cause of death), as dim_indicator names them.
IMR = Indicator("imr", "TMI", "mortalidad infantil", "menores de 1 año", "IMR", "infant mortality", "under 1 year",
                multiplier=1000)
RARE = Indicator("imr_rare", "TMR", "mortalidad por una causa rara", "menores de 1 año", "RIMR",
                 "rare-cause infant mortality", "under 1 year", multiplier=100_000)


def _modules() -> list[Path]:
    return sorted(REPORT.glob("*.py"))


def test_no_function_of_the_report_is_over_100_lines():
    long = []
    for path in _modules():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = node.end_lineno - node.lineno + 1
                if n > MAX_FUNCTION_LINES:
                    long.append(f"{path.name}:{node.lineno} {node.name} ({n} lines)")
    assert long == []


def test_the_report_has_no_grab_bag_module_and_no_module_level_setters():
    names = {p.stem for p in _modules()}
    assert "common" not in names and {"formats", "style", "labels", "combos", "context"} <= names
    setters = [f"{p.name}: {m.group(0)}" for p in _modules()
               for m in re.finditer(r"def use_\w+\(", p.read_text(encoding="utf-8"))]
    assert setters == []


def test_the_narrow_width_is_one_number_in_python_and_in_report_js():
    script = (REPORT / "static" / "report.js").read_text(encoding="utf-8")
    assert re.findall(r"var NARROW_PX = (\d+);", script) == [str(NARROW_PX)]


def test_no_literal_1000_multiplier_in_the_reports_python_or_texts():
    """The rates are per multiplier in the marts; the page's unit is each indicator's."""
    literals = [f"{p.name}:{node.lineno}" for p in _modules()
                for node in ast.walk(ast.parse(p.read_text(encoding="utf-8")))
                if isinstance(node, ast.Constant) and type(node.value) in (int, float) and node.value in (1000, 1e3)]
    assert literals == []
    written = [key for key, texts in MESSAGES.items() for text in texts if UNIT_1000.search(text)]
    assert written == []


def _filled(text: str, **values) -> str:
    return text.format_map(defaultdict(str, values))


@pytest.mark.parametrize("lang, expected", [("es", "100.000"), ("en", "100,000")])
def test_a_per_100000_indicator_is_labelled_per_100000(lang, expected):
    """Every text that states a rate's unit, for an indicator with multiplier 100000, says
    100,000 (por 100.000) and never 1000; a per-1000 indicator keeps `por 1.000` / `per 1000`."""
    ctx = RenderContext(language=lang, indicators=(IMR, RARE))
    idx = 0 if lang == "es" else 1
    with ctx.active():
        rare, imr = unit(RARE.code), unit("imr")
        assert rare == expected and imr == ("1.000" if lang == "es" else "1000")
        keys = [key for key, texts in MESSAGES.items() if "{unit}" in texts[idx]]
        assert len(keys) > 30
        for key in keys:
            label = _filled(MESSAGES[key][idx], unit=rare)
            assert expected in label and not UNIT_1000.search(label), (key, label)
        # The indicator's own texts as the page builds them (the glossary), and a title.
        settings = Settings(unreliable_below_deaths=5, comparison_alpha=0.05, trend_p_threshold=0.05,
                            trend_min_deaths=10, exceedance_probability_threshold=0.8, cluster_fdr_alpha=0.05)
        glossary = page.glossary_html([RARE.code], settings, ctx)
        row = glossary[glossary.index("TMR" if lang == "es" else "RIMR"):]
        row = row[:row.index("</tr>")]
        assert expected in row and not UNIT_1000.search(row)
        title = t("ranking.title", combo="X", region="R", unit=unit(RARE.code))
        assert expected in title and not UNIT_1000.search(title)
        # Several indicators with different units: both are named.
        assert unit(["imr", RARE.code]) == ("1.000 o 100.000" if lang == "es" else "1000 or 100,000")
        with pytest.raises(ValueError, match="no multiplier"):
            unit("not_in_dim_indicator")


def test_a_render_context_is_made_once_and_left_behind():
    """The language, the indicators and the interval level travel in one frozen context; a
    render's context does not outlive it."""
    outside = current()
    ctx = RenderContext(language="en", trend_ci_level=0.9)
    with pytest.raises(AttributeError):
        ctx.language = "es"  # frozen
    with ctx.active():
        assert current() is ctx
        assert fmt_apc({"apc": 1.0, "apc_ci95_lower": 0.5, "apc_ci95_upper": 1.5}).startswith("APC +1.0% (90% CI")
    assert current() is outside
    with pytest.raises(ValueError):
        RenderContext(language="fr")


def test_the_reports_exposure_names_the_marts_the_report_reads():
    """models/_exposures.yml's `report` depends on exactly report/marts.py's REQUIRED_MARTS (so
    `dbt ls -s +exposure:report` is what the report needs)."""
    exposures = yaml.safe_load((REPO_ROOT / "models" / "_exposures.yml").read_text(encoding="utf-8"))["exposures"]
    report = next(e for e in exposures if e["name"] == "report")
    named = [re.fullmatch(r"ref\('(\w+)'\)", ref).group(1) for ref in report["depends_on"]]
    assert sorted(named) == sorted(REQUIRED_MARTS)
    assert len(set(REQUIRED_MARTS)) == len(REQUIRED_MARTS)
