"""One home for the trend methods: seeds/trend_methods.csv (published as marts.dim_trend_method).

Every other place that has to spell the method codes (the trend model's MART_METHODS, the
parse-time check of var `trend_method`, which cannot read a file) is held equal to the seed
here; the marts' YAML reads the seed through dim_trend_method instead of spelling a list.
"""

from __future__ import annotations

import csv
import re

import yaml

from conftest import REPO_ROOT, query, var_rules

SEED = REPO_ROOT / "seeds" / "trend_methods.csv"
ROWS = list(csv.DictReader(SEED.open(encoding="utf-8")))
METHODS = [row["method"] for row in sorted(ROWS, key=lambda r: int(r["sort_order"]))]
VALIDATE_VARS = (REPO_ROOT / "macros" / "validate_vars.sql").read_text(encoding="utf-8")
DECLARED = yaml.safe_load((REPO_ROOT / "dbt_project.yml").read_text(encoding="utf-8"))["vars"]


def test_the_seed_lists_each_method_once_with_both_labels_and_its_p_value_test():
    assert len(METHODS) == len(set(METHODS)) >= 3
    assert [int(r["sort_order"]) for r in ROWS] == list(range(1, len(ROWS) + 1))
    for row in ROWS:
        assert all(row[c].strip() for c in ("label_en", "label_es", "p_value_test_en", "p_value_test_es")), row
        # No p is "mid-p" here: each is its method's own test of its slope (or AAPC).
        assert "mid-p" not in row["p_value_test_en"] and "medio" not in row["p_value_test_es"], row


def test_the_trend_model_fits_exactly_the_seed_s_methods_with_the_seed_s_fitters():
    from infant_mortality.statistics import trends
    from infant_mortality.statistics.trend_fitters import FITTERS, get_fitter

    assert list(trends.MART_METHODS) == METHODS  # the order is methods_disagreeing's
    for row in ROWS:
        # MART_METHODS' None: the fitter of var trend_prais_variant (default: the seed's).
        fitter = trends.MART_METHODS[row["method"]] or DECLARED["trend_prais_variant"]
        assert row["fitter"] == fitter and fitter in FITTERS, row
        # fct_trends.method_label on its rows is the fitter's label: the seed's English name must be it.
        assert get_fitter(fitter).label == row["label_en"], (
            f"{row['method']}: label_en {row['label_en']!r} is not its fitter {fitter!r}'s label "
            f"{get_fitter(fitter).label!r} (dim_trend_method.label_en is the default fitter's own)")


def test_the_var_check_accepts_exactly_the_seed_s_methods():
    spec = var_rules()
    assert spec["trend_method"]["values"] == METHODS
    assert DECLARED["trend_method"] in METHODS
    # The floor check fits every method's fitter, the study's by var trend_prais_variant.
    fitted = re.search(r"set fitted = \[var\('trend_prais_variant'\), (.*?)\]", VALIDATE_VARS).group(1)
    assert [f.strip(" '") for f in fitted.split(",")] == [r["fitter"] for r in ROWS if r["method"] != "prais_winsten"]


def test_no_model_yaml_or_sql_spells_the_list_of_methods():
    """A check like `method in ('prais_winsten', 'poisson', 'joinpoint')` is a second home: the
    marts take the methods from dim_trend_method (a relationships test)."""
    spelled = re.compile(r"""['"]?(%s)['"]?\s*[,|]\s*['"]?(%s)""" % ("|".join(METHODS), "|".join(METHODS)))
    found = []
    for path in [*(REPO_ROOT / "models").rglob("*.yml"), *(REPO_ROOT / "models").rglob("*.sql"),
                 *(REPO_ROOT / "tests" / "dbt").rglob("*.sql")]:
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if spelled.search(line):
                found.append(f"{path.relative_to(REPO_ROOT)}:{number}: {line.strip()}")
    assert found == []
    trends = yaml.safe_load((REPO_ROOT / "models" / "trends" / "fct_trends.yml").read_text(encoding="utf-8"))
    method = next(c for c in trends["models"][0]["columns"] if c["name"] == "method")
    assert {"to": "ref('dim_trend_method')", "field": "method"} in [
        t["relationships"]["arguments"] for t in method.get("data_tests", []) if "relationships" in t]


def test_the_report_s_spanish_method_names_are_the_seed_s():
    """The report's catalogue still names two methods in Spanish (method.*); until it reads
    dim_trend_method, its names must be the seed's."""
    from infant_mortality.report.i18n import MESSAGES

    for row in ROWS:
        key = f"method.{row['method']}"
        if key in MESSAGES:
            assert MESSAGES[key] == (row["label_es"], row["label_en"]), key


def test_dim_trend_method_publishes_the_seed_and_labels_every_fct_trends_method(bundled_warehouse):
    rows = query(bundled_warehouse, "select method, sort_order, fitter, label_en, label_es, p_value_test_en, "
                                    "p_value_test_es from marts.dim_trend_method order by sort_order")
    assert [list(r) for r in rows] == [[r["method"], int(r["sort_order"]), r["fitter"], r["label_en"], r["label_es"],
                                        r["p_value_test_en"], r["p_value_test_es"]] for r in ROWS]
    unlabelled = query(bundled_warehouse, "select distinct t.method from marts.fct_trends as t "
                                          "anti join marts.dim_trend_method using (method)")
    assert unlabelled == []
    # Each row filled by the method's default fitter carries that fitter's label, the seed's label_en.
    mismatched = query(bundled_warehouse, "select distinct t.method, t.method_label, d.label_en from marts.fct_trends as t "
                                          "join marts.dim_trend_method as d using (method) "
                                          "where t.fitter = d.fitter and t.method_label <> d.label_en")
    assert mismatched == []
