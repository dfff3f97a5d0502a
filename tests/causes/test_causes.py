"""Causes of infant death (docs/methods/causes.md): the ICD mapping on edge codes, the reducible
causes list, the Clopper-Pearson interval, and generated files counted a second way.

The expectations are written by hand (the edge-code table) or computed here independently of
the SQL (scipy's beta quantiles; a Python reading of the generated files).
"""

from __future__ import annotations

import csv
import itertools

import duckdb
import numpy as np
import pytest
from scipy import stats

from conftest import REPO_ROOT, microdata_vars, microdata_warehouse, query, run_dbt
from infant_mortality.dbt_plugins.deis_files import DEATHS_COLUMNS
from infant_mortality.statistics.proportions import clopper_pearson
from infant_mortality.tools.generate_deis import Options, generate

FIXTURES = REPO_ROOT / "tests" / "data" / "deis"

# DIAG1, DIAG2, year -> cause_status, cause_group, reducible_group (hand-classified from the ICD
# chapter lists and the published list; None where the column must be NULL).
EDGE_CODES = [
    ("P96.9", "", 2015, "coded", "perinatal", "ill_defined"),          # last perinatal category; list 2
    ("P960", "", 2015, "coded", "perinatal", "newborn_care"),          # P96.0-P96.8: list 1.2.3
    ("P97", "", 2015, "cause_invalid", None, None),                    # no such category
    ("P97X", "", 2015, "cause_invalid", None, None),
    ("Q99.9", "", 2015, "coded", "congenital", "not_clearly_avoidable"),
    ("Q90", "", 2015, "coded", "congenital", "diagnosis_treatment"),  # 3 characters: the category
    ("V01", "", 2015, "coded", "external", "health_promotion"),        # first code of chapter XX
    ("Y98", "", 2015, "coded", "external", "not_clearly_avoidable"),   # last code; not on the list
    ("Y99", "", 2015, "cause_invalid", None, None),
    ("V00", "", 2015, "cause_invalid", None, None),
    (" p07.3 ", "", 2015, "coded", "perinatal", "pregnancy_care"),     # trimmed, upper case, no dot
    ("r95x", "", 2015, "coded", "ill_defined", "health_promotion"),    # R95 (sudden infant death): list 1.4
    ("R96", "", 2015, "coded", "ill_defined", "ill_defined"),
    ("", "", 2015, "cause_unknown", None, None),
    ("P07-3", "", 2015, "cause_invalid", None, None),                  # not a code shape
    ("P0730", "", 2015, "cause_invalid", None, None),                  # five characters
    ("7651", "", 2015, "cause_invalid", None, None),                   # an ICD-9 code in an ICD-10 year
    ("T71X", "W78.0", 2015, "coded", "external", "health_promotion"),  # injury: read by DIAG2 (W75-W84)
    ("T71X", "", 2015, "coded", "external", "not_clearly_avoidable"),  # injury without its external cause
    ("A37.9", "", 2015, "coded", "infectious", "immunisation"),
    ("A41.9", "", 2015, "coded", "infectious", "diagnosis_treatment"),
    ("G00.0", "", 2015, "coded", "other", "immunisation"),
    ("G009", "", 2015, "coded", "other", "diagnosis_treatment"),
    ("J189", "", 2015, "coded", "respiratory", "diagnosis_treatment"),
    ("U071", "", 2015, "coded", "other", "not_clearly_avoidable"),
    ("7651", "", 1995, "coded", "perinatal", None),                    # ICD-9 years: chapters, no list
    ("486", "", 1995, "coded", "respiratory", None),
    ("E911", "", 1995, "coded", "external", None),
    ("9947", "E911", 1995, "coded", "external", None),
    ("0339", "", 1995, "coded", "infectious", None),
    ("P073", "", 1995, "cause_invalid", None, None),                   # an ICD-10 code in an ICD-9 year
    ("677", "", 1995, "cause_invalid", None, None),                    # between ICD-9 chapters XI and XII
    ("V29", "", 1995, "cause_invalid", None, None),                    # ICD-9 V codes: no cause of death
]
REDUCIBLE = {"immunisation", "pregnancy_care", "delivery_care", "newborn_care", "diagnosis_treatment",
             "health_promotion"}


def _death_line(year: int, diag1: str, diag2: str, unit: str = "3", amount: str = "2") -> str:
    fields = dict.fromkeys(DEATHS_COLUMNS, "")
    fields.update({"ANO_DEF": str(year), "FECHA_DEF": f"{year}-06-15", "GLOSA_SEXO": "Mujer", "EDAD_TIPO": unit,
                   "EDAD_CANT": amount, "CODIGO_COMUNA_RESIDENCIA": "13120", "GLOSA_COMUNA_RESIDENCIA": "Ñuñoa",
                   "GLOSA_REG_RES": "Metropolitana de Santiago", "DIAG1": diag1, "DIAG2": diag2,
                   "LUGAR_DEFUNCION": "Hospital o Clínica"})
    return ";".join(fields[c] for c in DEATHS_COLUMNS)


@pytest.fixture(scope="module")
def edge_warehouse(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("causes_edges")
    lines = [_death_line(year, d1, d2) for d1, d2, year, *_ in EDGE_CODES]
    lines.append(_death_line(2015, "P97", "", unit="1", amount="40"))  # an adult: in no infant count
    deaths = tmp / "deaths_causes.csv"
    deaths.write_bytes(("\n".join(lines) + "\n").encode("latin-1"))
    path = tmp / "edges.duckdb"
    run_dbt(["build", "--indirect-selection", "cautious", "--select", "+int_deis__commune_year_counts", "+fct_reducible_infant_deaths", "+audit_data_quality"],
            path, microdata_vars(deaths, FIXTURES / "births_headerless_latin1.csv", tmp / "cache",
                        custom_period={"start": 2015, "end": 2015}))
    return path


def test_each_edge_code_is_classified_as_worked_out_by_hand(edge_warehouse):
    rows = query(edge_warehouse, "select source_line, cause_status, cause_group, reducible_group "
                                 "from intermediate.int_deis__infant_deaths order by source_line")
    assert [tuple(r[1:]) for r in rows] == [tuple(e[3:]) for e in EDGE_CODES]
    assert [r[0] for r in rows] == list(range(1, len(EDGE_CODES) + 1))  # the adult on the last line is not here


def test_the_cause_counts_add_up_to_the_infant_deaths(edge_warehouse):
    expected = {}
    for *_, year, status, group, _ in EDGE_CODES:
        key = group if status == "coded" else status
        expected.setdefault(year, {}).setdefault(key, 0)
        expected[year][key] += 1
    rows = query(edge_warehouse, """
        select year, infant_deaths, perinatal_cause_deaths, congenital_cause_deaths, respiratory_cause_deaths,
               infectious_cause_deaths, external_cause_deaths, ill_defined_cause_deaths, other_cause_deaths,
               cause_unknown_deaths, cause_invalid_deaths
        from intermediate.int_deis__commune_year_counts where indicator = 'imr' and commune_code = '13120'
        order by year""")
    names = ["perinatal", "congenital", "respiratory", "infectious", "external", "ill_defined", "other",
             "cause_unknown", "cause_invalid"]
    for year, infants, *counts in rows:
        assert infants == sum(expected[year].values()) == sum(counts)
        assert dict(zip(names, counts)) == {n: expected[year].get(n, 0) for n in names}
    # The cause indicators carry these counts to core, where every rate mart reads them (here 25
    # deaths for one birth: deaths_exceed_births, so the rate marts publish no rate).
    rates = dict(query(edge_warehouse, "select indicator, deaths from intermediate.int_commune_year_counts "
                                       "where commune_code = '13120' and year = 2015"))
    assert rates["imr_perinatal"] == expected[2015]["perinatal"] and rates["imr_external"] == expected[2015]["external"]


def test_unknown_and_invalid_causes_are_audited_per_file_commune_and_year(edge_warehouse):
    rows = query(edge_warehouse, """
        select year, check_name, records_affected, observed_value from marts.audit_data_quality
        where check_name like 'cause%' and record_key <> 'all records' order by year, check_name""")
    invalid_2015 = [e[0].strip().upper().replace(".", "") for e in EDGE_CODES
                    if e[2] == 2015 and e[3] == "cause_invalid"]
    assert rows == [
        (1995, "cause_icd9_year", 8, "8 infant death(s) in a year coded in ICD-9"),  # the 5 coded and 3 invalid
        (1995, "cause_invalid", 3, "3 infant death(s); DIAG1 as read: 677, P073, V29"),
        (2015, "cause_external_code_missing", 1, "1 infant death(s); DIAG2 as read: blank"),
        (2015, "cause_invalid", len(invalid_2015),
         f"{len(invalid_2015)} infant death(s); DIAG1 as read: " + ", ".join(sorted(invalid_2015))),
        (2015, "cause_unknown", 1, "1 infant death(s); DIAG1 as read: blank"),
    ]


def test_reducible_share_and_its_interval(edge_warehouse):
    coded_2015 = [e for e in EDGE_CODES if e[2] == 2015 and e[3] == "coded"]
    reducible = sum(e[5] in REDUCIBLE for e in coded_2015)
    rows = query(edge_warehouse, """
        select period_label, infant_deaths, classified_deaths, reducible_deaths, reducible_share,
               reducible_share_ci95_lower, reducible_share_ci95_upper, unavailable_reason
        from marts.fct_reducible_infant_deaths where area_level = 'commune' and area_code = '13120'
        order by period_label""")
    by_period = {r[0]: r[1:] for r in rows}
    n, x = len(coded_2015), reducible
    infants, classified, red, share, lower, upper, reason = by_period["2015-2015"]
    assert (infants, classified, red, reason) == (sum(e[2] == 2015 for e in EDGE_CODES), n, x, None)
    assert share == pytest.approx(x / n)
    assert lower == pytest.approx(stats.beta.ppf(0.025, x, n - x + 1), abs=1e-12)
    assert upper == pytest.approx(stats.beta.ppf(0.975, x + 1, n - x), abs=1e-12)
    # A period holding an ICD-9 year (the full window 1995-2015) has its counts and no share.
    assert by_period["1995-2015"][-1] == "period_has_icd9_years" and by_period["1995-2015"][3] is None
    assert by_period["1995-2015"][0] == len(EDGE_CODES)


@pytest.mark.parametrize("x, n", [(0, 1), (0, 10), (1, 10), (3, 10), (10, 10), (37, 58), (4192, 6581), (1, 1)])
def test_clopper_pearson_matches_scipy_beta_quantiles(x, n):
    lower, upper = clopper_pearson(x, n, 0.95)
    expected_lower = 0.0 if x == 0 else stats.beta.ppf(0.025, x, n - x + 1)
    expected_upper = 1.0 if x == n else stats.beta.ppf(0.975, x + 1, n - x)
    assert lower == pytest.approx(expected_lower, abs=1e-12)
    assert upper == pytest.approx(expected_upper, abs=1e-12)


def test_clopper_pearson_closed_forms_and_bad_input():
    # x = 0: upper = 1 - (a/2)^(1/n); x = n: lower = (a/2)^(1/n) (Clopper & Pearson 1934).
    for n in (1, 5, 20):
        assert clopper_pearson(0, n)[1] == pytest.approx(1 - 0.025 ** (1 / n))
        assert clopper_pearson(n, n)[0] == pytest.approx(0.025 ** (1 / n))
    lower, upper = clopper_pearson(np.array([0, 2]), np.array([0, 4]))
    assert np.isnan(lower[0]) and np.isnan(upper[0]) and 0 < lower[1] < 0.5 < upper[1] < 1
    with pytest.raises(ValueError):
        clopper_pearson(5, 4)
    with pytest.raises(ValueError):
        clopper_pearson(1.5, 4)


def _seed(name):
    with open(REPO_ROOT / "seeds" / name, encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def _in_range(code: str, low: str, high: str) -> bool:
    return code[:len(low)] >= low and code[:len(high)] <= high


def test_reducible_list_ranges_do_not_overlap_and_cover_the_groups_of_the_list():
    rows = _seed("reducible_causes_under5.csv")
    codes = [f"{letter}{n:02d}{d}" for letter in "ABCDEFGHIJKLMNOPQRSTUVWXYZ" for n in range(100) for d in "0123456789"]
    overlaps = [(code, [r["code_from"] for r in rows if _in_range(code, r["code_from"], r["code_to"])])
                for code in codes]
    assert [o for o in overlaps if len(o[1]) > 1] == []
    assert {r["list_item"] for r in rows} == {"1.1", "1.2.1", "1.2.2", "1.2.3", "1.3", "1.4", "2"}
    assert all(r["code_from"] <= r["code_to"] for r in rows)
    # Spot checks against the published list: P96.9 ill-defined, P96.0-P96.8 newborn care, R95 promotion.
    group = {code: [r["reducible_group"] for r in rows if _in_range(code, r["code_from"], r["code_to"])]
             for code in ("P969", "P965", "R95X", "R949", "J219", "A379", "P073", "Q249")}
    assert group == {"P969": ["ill_defined"], "P965": ["newborn_care"], "R95X": ["health_promotion"],
                     "R949": ["ill_defined"], "J219": ["diagnosis_treatment"], "A379": ["immunisation"],
                     "P073": ["pregnancy_care"], "Q249": []}


def test_icd_chapters_do_not_overlap():
    rows = _seed("icd_cause_groups.csv")
    for revision in ("9", "10"):
        ranges = sorted((r["category_from"], r["category_to"]) for r in rows if r["icd_revision"] == revision)
        for (_, end), (start, _) in itertools.pairwise(ranges):
            assert end < start, (revision, end, start)


# --------------------------------------------------------------------------------------------
# Generated files, counted a second way (Python over the CSV, not the SQL)
# --------------------------------------------------------------------------------------------

def _group_of(code: str | None, year: int) -> str:
    """Chapter group of a DIAG1, written from the chapter lists (independently of the seed)."""
    if code is None:
        return "cause_unknown"
    if year >= 1997:
        if len(code) not in (3, 4) or not (code[0].isalpha() and code[1:3].isdigit()):
            return "cause_invalid"
        cat = code[:3]
        for low, high, group in [("A00", "B99", "infectious"), ("J00", "J99", "respiratory"),
                                 ("P00", "P96", "perinatal"), ("Q00", "Q99", "congenital"),
                                 ("R00", "R99", "ill_defined"), ("S00", "T98", "external"),
                                 ("V01", "Y98", "external")]:
            if low <= cat <= high:
                return group
        return "cause_invalid" if cat in ("P97", "D49") else "other"
    if not code[:3].isdigit():
        return "cause_invalid"
    number = int(code[:3])
    for low, high, group in [(1, 139, "infectious"), (460, 519, "respiratory"), (740, 759, "congenital"),
                             (760, 779, "perinatal"), (780, 799, "ill_defined"), (800, 999, "external")]:
        if low <= number <= high:
            return group
    return "other"


@pytest.fixture(scope="module")
def generated_1990s(tmp_path_factory):
    """Arica y Parinacota (15) across the change of revision, 1994-1999."""
    built = microdata_warehouse(tmp_path_factory.mktemp("causes_generated"), ("15",), range(1994, 2000),
                                ["+int_deis__commune_year_counts", "+fct_reducible_infant_deaths"])
    return built.deaths, built.path


def test_generated_causes_counted_by_python_equal_the_warehouse(generated_1990s):
    deaths, path = generated_1990s
    records = duckdb.sql(f"""
        select column00::int as year, column03 as unit, column04::int as amount, column08 as diag1
        from read_csv('{deaths}', delim=';', header=false, all_varchar=true, encoding='latin-1')
    """).fetchall()
    expected = {}
    for year, unit, amount, diag1 in records:
        if unit in ("2", "3", "4") or (unit == "1" and amount == 0):
            key = (year, _group_of(diag1, year))
            expected[key] = expected.get(key, 0) + 1
    rows = query(path, """
        select year, coalesce(cause_group, cause_status), sum(deaths) from intermediate.int_input__infant_death_causes
        group by all""")
    assert {(y, g): n for y, g, n in rows} == expected
    # ICD-9 before 1997 and ICD-10 from 1997: both revisions are present and classified.
    assert {y for (y, g) in expected if g == "perinatal"} == set(range(1994, 2000))


def test_generated_cause_mix_is_realistic_by_age(tmp_path):
    manifest = generate(Options(out_dir=tmp_path, regions=("13",), years=tuple(range(2010, 2020)), project_dir=REPO_ROOT))
    shares = duckdb.sql(f"""
        with infants as (
            select case when column03 = '4' or (column03 = '3' and column04::int <= 27) then 'neonatal'
                        else 'post_neonatal' end as age, left(column08, 1) as letter
            from read_csv('{tmp_path / manifest['deaths_file']}', delim=';', header=false, all_varchar=true,
                          encoding='latin-1')
            where column03 in ('2', '3', '4') or (column03 = '1' and column04 = '0')
        )
        select age, letter, count(*) / sum(count(*)) over (partition by age) from infants group by age, letter
    """).fetchall()
    share = {(age, letter): s for age, letter, s in shares}
    assert share[("neonatal", "P")] + share[("neonatal", "Q")] > 0.9
    assert share[("post_neonatal", "P")] < 0.15
    for letter in ("J", "A", "T", "R"):  # respiratory, infectious, external (injury), ill-defined
        assert share[("post_neonatal", letter)] > 3 * share.get(("neonatal", letter), 0), letter
    blank = sum(s for (age, letter), s in share.items() if letter is None)
    assert 0 < blank < 0.02
