"""Connect Apache Superset to the published warehouse and import the study's two dashboards.

`make superset` (bi/superset/start.py) runs these steps; by hand, with Superset's own
interpreter and SUPERSET_CONFIG_PATH set:

    .venv-superset/venv/bin/python bi/superset/superset_setup.py admin    # the person's admin user
    .venv-superset/venv/bin/python bi/superset/superset_setup.py import --warehouse /abs/warehouse/infant_mortality.duckdb
    .venv-superset/venv/bin/python bi/superset/superset_setup.py check    # JSON: what Superset sees
    .venv-superset/venv/bin/python bi/superset/superset_setup.py export --warehouse ...  # maintainers: rewrite export/

`admin` creates the admin (IMR_SUPERSET_ADMIN / IMR_SUPERSET_PASSWORD, or `admin` with a
generated password, printed once). `import` migrates Superset's metadata database if needed,
adds (or updates) the database "Infant mortality (DuckDB)" with the read-only DuckDB URI and
the engine parameters of `ENGINE_EXTRA` (no file access, no extensions, settings locked:
duckdb_lockdown.py), and imports `export/` (Superset's own dashboard export format: database,
datasets, charts, the English and the Spanish dashboard) with that URI and those parameters,
whatever the files say. `check` prints the schemas, every mart's columns with types, each
dataset's column headers and each chart's query result for the default region and for every
region, as Superset computes them. `export` creates the datasets, charts and dashboards from the
definitions below and writes them with Superset's own exporter, so the committed files are
exactly what Superset produces.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import secrets
import shutil
import sys
import textwrap
import uuid
from pathlib import Path

import yaml

from duckdb_lockdown import CONNECT_CONFIG

HERE = Path(__file__).resolve().parent
EXPORT_DIR = HERE / "export"
DATABASE_NAME = "Infant mortality (DuckDB)"
# Stable ids, so a second import updates instead of duplicating.
DATABASE_UUID = "6d1f7f64-3c55-4a58-9a8e-6a3f2f6f2b01"
URI_PLACEHOLDER = "duckdb:////ABSOLUTE/PATH/TO/warehouse/infant_mortality.duckdb"
# Read-only, and DuckDB's file access, extensions and settings closed (duckdb_lockdown.py): a
# SQL Lab user reads the warehouse's tables and nothing else.
ENGINE_EXTRA = {"engine_params": {"connect_args": {"read_only": True, "config": CONNECT_CONFIG}}}

PERIOD = "2010-2019"  # the study's full window: the ranking's period
DEFAULT_REGION = "Región Metropolitana de Santiago"
REPO_ROOT = HERE.parent.parent
# The report's catalogue of texts (pure Python, no import of the package): the one home of the
# Spanish names of the trend classes and of the comparison's labels, which the Spanish datasets
# join as a small table (below), so the dashboard and the report say the same words.
_I18N_FILE = REPO_ROOT / "python" / "infant_mortality" / "report" / "i18n.py"


def _module_from_file(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _report_messages() -> dict[str, tuple[str, str]]:
    # Superset's environment does not have the package: the catalogue's one import, the render
    # context (standard library only), is loaded from its file under its own name first.
    if "infant_mortality.report.context" not in sys.modules:
        _module_from_file("infant_mortality.report.context", _I18N_FILE.with_name("context.py"))
    return _module_from_file("imr_report_i18n", _I18N_FILE).MESSAGES


def _sql_text(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def code_labels(prefix: str, language: str) -> dict[str, str]:
    """code -> label of the report's messages `<prefix><code>` (e.g. `trend.increasing`)."""
    messages = _report_messages()
    column = 0 if language == "es" else 1
    return {key[len(prefix):]: texts[column] for key, texts in messages.items()
            if key.startswith(prefix) and re.fullmatch(r"[a-z_]+", key[len(prefix):]) and key != "trend.none"}


def _values(labels: dict[str, str], code: str, label: str) -> str:
    rows = ", ".join(f"({_sql_text(c)}, {_sql_text(t)})" for c, t in sorted(labels.items()))
    return f"(values {rows}) as labels({code}, {label})"


# Virtual datasets: the marts' rows shaped for a chart, nothing recomputed. Every dataset has
# `region_name`, the column the dashboards' region filter sets. The English dashboard reads the
# first three, the Spanish one the last three; a method's name and the test behind its p-value
# come from dim_trend_method (seed trend_methods), in the dashboard's language.
DATASETS = {
    "fct_commune_vs_region": None,  # the mart itself
    "region_year_rates": """
        -- Each region's yearly infant mortality with its exact 95% interval, beside Chile's.
        select region.area_name as region_name, region.year, region.deaths, region.live_births,
               region.rate_per_1000, region.ci95_lower, region.ci95_upper,
               country.rate_per_1000 as chile_rate_per_1000
        from marts.fct_area_year_rates as region
        left join marts.fct_area_year_rates as country
            on country.area_level = 'country' and country.indicator = region.indicator
            and country.year = region.year
        where region.area_level = 'region' and region.indicator = 'imr'
    """,
    "region_trends": """
        -- Each region's trend over each analysis period by the build's headline method (var
        -- trend_method, the calibrated count model by default; fct_trends has a row per method):
        -- its APC, interval, p with the test that gave it (dim_trend_method), class, and the
        -- methods that class it otherwise, by name.
        select t.area_name as region_name, t.period_start, t.period_end, t.n_years_used, t.method_label,
               t.apc, t.apc_ci95_lower, t.apc_ci95_upper, t.p_value,
               case when t.fitter = m.fitter then m.p_value_test_en
                    else 't test of slope = 0 (' || t.method_label || ')' end as p_value_test,
               t.trend,
               case when t.methods_disagreeing = '' then 'none' else
                   (select string_agg(other.label_en, ', ' order by other.sort_order) from marts.dim_trend_method as other
                    where list_contains(string_split(t.methods_disagreeing, ', '), other.method)) end
                   as methods_disagreeing,
               t.note
        from marts.fct_trends as t
        join marts.dim_trend_method as m on m.method = t.method
        where t.area_level = 'region' and t.indicator = 'imr'
            and t.method = (select trend_method from marts.meta_build)
    """,
    "comunas_vs_region": f"""
        -- Cada comuna frente a su región (fct_commune_vs_region), con la comparación y la marca de
        -- poco confiable en español (la comparación con los textos del informe).
        select c.region_name, c.commune_code, c.commune_name, c.indicator, c.period_label, c.period_start,
               c.rank_in_region, c.deaths, c.live_births, c.rate_per_1000, c.ci95_lower, c.ci95_upper,
               case when c.is_unreliable then 'sí' else 'no' end as is_unreliable,
               c.rate_ratio, c.rate_ratio_ci95_lower, c.rate_ratio_ci95_upper,
               c.rest_rate_per_1000, c.rest_rate_ratio, c.rest_rate_ratio_ci95_lower, c.rest_rate_ratio_ci95_upper,
               c.p_value, c.comparison as comparison_code, labels.comparison
        from marts.fct_commune_vs_region as c
        left join {_values(code_labels("comparison.short.", "es"), "comparison_code", "comparison")}
            on labels.comparison_code = c.comparison
    """,
    "tasas_anuales_region": """
        -- La TMI anual de cada región con su intervalo exacto del 95 %, junto a la de Chile.
        select region.area_name as region_name, region.year, region.deaths, region.live_births,
               region.rate_per_1000, region.ci95_lower, region.ci95_upper,
               country.rate_per_1000 as chile_rate_per_1000
        from marts.fct_area_year_rates as region
        left join marts.fct_area_year_rates as country
            on country.area_level = 'country' and country.indicator = region.indicator
            and country.year = region.year
        where region.area_level = 'region' and region.indicator = 'imr'
    """,
    "tendencias_region": f"""
        -- La tendencia de cada región en cada período de análisis por el método principal del
        -- build (var trend_method): PCA, intervalo, p con la prueba que la dio, clase y los
        -- métodos que la clasifican de otro modo, con los nombres de dim_trend_method en español.
        select t.area_name as region_name, t.period_start, t.period_end, t.n_years_used,
               case when t.fitter = m.fitter then m.label_es else t.method_label end as method_label,
               t.apc, t.apc_ci95_lower, t.apc_ci95_upper, t.p_value,
               case when t.fitter = m.fitter then m.p_value_test_es
                    else 'prueba t de pendiente = 0 (' || t.method_label || ')' end as p_value_test,
               t.trend as trend_code, labels.trend,
               case when t.methods_disagreeing = '' then 'ninguno' else
                   (select string_agg(other.label_es, ', ' order by other.sort_order) from marts.dim_trend_method as other
                    where list_contains(string_split(t.methods_disagreeing, ', '), other.method)) end
                   as methods_disagreeing
        from marts.fct_trends as t
        join marts.dim_trend_method as m on m.method = t.method
        left join {_values(code_labels("trend.", "es"), "trend_code", "trend")} on labels.trend_code = t.trend
        where t.area_level = 'region' and t.indicator = 'imr'
            and t.method = (select trend_method from marts.meta_build)
    """,
}
LANGUAGE = {"fct_commune_vs_region": "en", "region_year_rates": "en", "region_trends": "en",
            "comunas_vs_region": "es", "tasas_anuales_region": "es", "tendencias_region": "es"}
# Numbers as the report shows them: rates and ratios with 2 decimals, p with 3, counts grouped.
# (Superset formats every number with one server-wide d3 locale: a decimal point in both.)
RATE, P, COUNT = ".2f", ".3f", ",d"
FORMATS = {
    "deaths": COUNT, "live_births": COUNT, "rate_per_1000": RATE, "ci95_lower": RATE, "ci95_upper": RATE,
    "rate_ratio": RATE, "rate_ratio_ci95_lower": RATE, "rate_ratio_ci95_upper": RATE,
    "rest_rate_per_1000": RATE, "rest_rate_ratio": RATE, "rest_rate_ratio_ci95_lower": RATE,
    "rest_rate_ratio_ci95_upper": RATE, "rest_rate_ratio_exact_lower": RATE, "rest_rate_ratio_exact_upper": RATE,
    "p_value": P, "apc": RATE, "apc_ci95_lower": RATE, "apc_ci95_upper": RATE,
}
# Column headers as the report words them; an interval and a p-value say which method gave them.
LABELS = {
    "en": {
        "region_name": "Region", "rank_in_region": "Rank", "commune_name": "Commune", "commune_code": "Code",
        "period_label": "Period", "deaths": "Deaths", "live_births": "Live births", "rate_per_1000": "Rate /1000",
        "ci95_lower": "CI low", "ci95_upper": "CI high", "is_unreliable": "Unreliable",
        "rate_ratio": "RT vs region", "rate_ratio_ci95_lower": "RT CI low", "rate_ratio_ci95_upper": "RT CI high",
        "rest_rate_per_1000": "Rest of region /1000", "rest_rate_ratio": "RR vs rest",
        "rest_rate_ratio_ci95_lower": "RR 95% CI (mid-p) low", "rest_rate_ratio_ci95_upper": "RR 95% CI (mid-p) high",
        "rest_rate_ratio_exact_lower": "RR exact CI (conservative) low",
        "rest_rate_ratio_exact_upper": "RR exact CI (conservative) high", "comparison": "vs rest (mid-p test)",
        "period_start": "From", "period_end": "To", "n_years_used": "Years fitted",
        "apc": "APC %", "apc_ci95_lower": "APC 95% CI low", "apc_ci95_upper": "APC 95% CI high", "trend": "Trend",
        "method_label": "Method", "methods_disagreeing": "Methods that disagree", "p_value_test": "Test of p",
    },
    "es": {
        "region_name": "Región", "rank_in_region": "Lugar", "commune_name": "Comuna", "commune_code": "Código",
        "period_label": "Período", "period_start": "Desde", "period_end": "Hasta", "indicator": "Indicador",
        "year": "Año", "deaths": "Defunciones", "live_births": "Nacidos vivos",
        "rate_per_1000": "Tasa por 1.000 NV", "ci95_lower": "IC 95% inf.", "ci95_upper": "IC 95% sup.",
        "chile_rate_per_1000": "Chile, tasa por 1.000 NV", "is_unreliable": "Poco confiable",
        "rate_ratio": "RT frente a la región", "rate_ratio_ci95_lower": "RT IC 95% inf.",
        "rate_ratio_ci95_upper": "RT IC 95% sup.", "rest_rate_per_1000": "Resto de la región por 1.000 NV",
        "rest_rate_ratio": "RT frente al resto", "rest_rate_ratio_ci95_lower": "RT IC 95% (p medio) inf.",
        "rest_rate_ratio_ci95_upper": "RT IC 95% (p medio) sup.",
        "comparison": "Frente al resto (prueba p medio)", "comparison_code": "Comparación (código)",
        "n_years_used": "Años ajustados", "method_label": "Método", "apc": "PCA (APC) %",
        "apc_ci95_lower": "PCA IC 95% inf.", "apc_ci95_upper": "PCA IC 95% sup.", "p_value_test": "Prueba de p",
        "trend": "Tendencia", "trend_code": "Tendencia (código)", "methods_disagreeing": "Métodos en desacuerdo",
    },
}
# A column whose header depends on its dataset: every p-value is labelled by its test.
DATASET_LABELS = {
    "fct_commune_vs_region": {"p_value": "p (mid-p, conditional binomial)"},
    "region_trends": {"p_value": "p (of the test beside it)"},
    "comunas_vs_region": {"p_value": "p (p medio, binomial condicional)"},
    "tendencias_region": {"p_value": "p (de la prueba al lado)"},
}


def label(dataset: str, column: str) -> str | None:
    return DATASET_LABELS.get(dataset, {}).get(column, LABELS[LANGUAGE[dataset]].get(column))


# Charts: `key` says what each is (the region is the filter's, so no table repeats it on every row) (the same four in both dashboards). Each ratio, rate and APC
# sits beside its own interval, and each label beside the p-value and interval of its own test.
RANKING_COLUMNS = ["rank_in_region", "commune_name", "commune_code", "deaths", "live_births",
                   "rate_per_1000", "ci95_lower", "ci95_upper", "is_unreliable", "rate_ratio",
                   "rate_ratio_ci95_lower", "rate_ratio_ci95_upper"]
# The label first, then its statistic, interval and p: what a phone shows before the table scrolls.
TREND_TABLE_COLUMNS = ["period_start", "period_end", "trend", "apc", "apc_ci95_lower", "apc_ci95_upper", "p_value",
                       "p_value_test", "method_label", "n_years_used", "methods_disagreeing"]
COMPARISON_COLUMNS = ["commune_name", "period_label", "comparison", "rest_rate_ratio", "rest_rate_ratio_ci95_lower",
                      "rest_rate_ratio_ci95_upper", "p_value", "rate_per_1000", "rest_rate_per_1000", "deaths",
                      "live_births", "commune_code"]
CHARTS = [
    {
        # RT against the whole region (log-scale interval with variance 1/d - 1/D), as the
        # report's ranking shows it.
        "key": "ranking",
        "name": f"Ranking of the region's communes, infant mortality {PERIOD} (ranking)",
        "description": "Communes of the region by infant mortality per 1000 live births over the period, "
                       "highest first, with the rate's exact 95% confidence interval and RT (rate ratio against "
                       "the whole region) with its own 95% interval. Unreliable: fewer than 20 deaths "
                       "(var unreliable_below_deaths).",
        "table": "fct_commune_vs_region",
        "viz_type": "table",
        "columns": RANKING_COLUMNS,
        "where": f"indicator = 'imr' AND period_label = '{PERIOD}'",
        "orderby": [["rank_in_region", True]],
        "width": 12, "height": 70,
    },
    {
        "key": "trend",
        "name": "Infant mortality of the region per 1000 live births by year, with its 95% interval and Chile (trend)",
        "description": "The region's yearly infant mortality rate per 1000 live births with its exact 95% "
                       "confidence interval, and Chile's rate. Black line: the region; light grey: the bounds of "
                       "its interval; orange: Chile.",
        "table": "region_year_rates",
        "viz_type": "echarts_timeseries_line",
        "x_axis": "year",
        "metrics": [
            {"label": "Region", "expressionType": "SQL", "sqlExpression": "MAX(rate_per_1000)"},
            {"label": "CI low", "expressionType": "SQL", "sqlExpression": "MAX(ci95_lower)"},
            {"label": "CI high", "expressionType": "SQL", "sqlExpression": "MAX(ci95_upper)"},
            {"label": "Chile", "expressionType": "SQL", "sqlExpression": "MAX(chile_rate_per_1000)"},
        ],
        "where": "1 = 1",
        "width": 12, "height": 50,
    },
    {
        "key": "trend table",
        "name": "Trend of the region: annual percent change by the headline method (trend table)",
        "description": "The region's annual percent change (APC) over each analysis period by the build's "
                       "headline trend method, with its 95% interval, its p-value and the test that gave it, "
                       "the trend class (which agrees with the interval) and the methods that class it otherwise.",
        "table": "region_trends",
        "viz_type": "table",
        "columns": TREND_TABLE_COLUMNS,
        "where": "1 = 1",
        "orderby": [["period_start", True], ["period_end", False]],
        "width": 12, "height": 50,
    },
    {
        # The test behind `comparison`: the commune against the rest of the region, with that
        # ratio's mid-p interval (the one the test's mid-p p-value agrees with).
        "key": "table",
        "name": "Communes against the rest of the region, every period (table)",
        "description": "Each commune against the rest of its region over every period: RR (rate ratio against "
                       "the rest of the region) with its mid-p 95% interval, the mid-p p-value of the exact "
                       "conditional test and its label; the label always agrees with the interval beside it.",
        "table": "fct_commune_vs_region",
        "viz_type": "table",
        "columns": COMPARISON_COLUMNS,
        "where": "indicator = 'imr'",
        "orderby": [["commune_name", True], ["period_label", True]],
        "width": 12, "height": 70,
    },
]
CHARTS_ES = [
    {**CHARTS[0], "table": "comunas_vs_region",
     "name": f"Comunas de la región según su mortalidad infantil (TMI) {PERIOD} (clasificación)",
     "description": "Comunas de la región ordenadas por su tasa de mortalidad infantil (TMI) por 1.000 nacidos "
                    "vivos en el período, de la más alta a la más baja, con su intervalo de confianza exacto "
                    "(Poisson) del 95 % y la razón de tasas (RT) frente a toda la región con su propio IC 95 %. "
                    "Poco confiable: menos de 20 defunciones (var unreliable_below_deaths)."},
    {**CHARTS[1], "table": "tasas_anuales_region",
     "name": "Tasa de mortalidad infantil de la región por 1.000 nacidos vivos por año, con su IC 95 % y Chile "
             "(serie anual)",
     "description": "La TMI anual de la región por 1.000 nacidos vivos con su intervalo de confianza exacto del "
                    "95 %, y la de Chile. Línea negra: la región; gris claro: los límites de su intervalo; "
                    "naranja: Chile.",
     "metrics": [{**metric, "label": name} for metric, name in zip(
         CHARTS[1]["metrics"], ["Región", "IC 95% inf.", "IC 95% sup.", "Chile"])]},
    {**CHARTS[2], "table": "tendencias_region",
     "name": "Tendencia de la región: porcentaje de cambio anual (PCA) por el método principal (tabla de tendencia)",
     "description": "El porcentaje de cambio anual (PCA, en inglés APC) de la región en cada período de análisis "
                    "por el método de tendencia principal, con su IC 95 %, su valor p y la prueba que lo dio, la "
                    "clase de tendencia (concuerda con el intervalo) y los métodos que la clasifican de otro modo."},
    {**CHARTS[3], "table": "comunas_vs_region",
     "name": "Comunas frente al resto de la región, cada período (tabla de comparación)",
     "description": "Cada comuna frente al resto de su región en cada período: razón de tasas (RT) frente al "
                    "resto con su IC 95 % de p medio, el valor p medio de la prueba condicional exacta y su "
                    "resultado (mayor, menor o similar), que siempre concuerda con el intervalo a su lado."},
]
DASHBOARDS = [
    {"language": "en", "title": "Infant mortality by commune (Chile)", "slug": "infant-mortality-chile",
     "charts": CHARTS, "filter": "Region", "filter_dataset": "fct_commune_vs_region",
     "filter_description": "The region whose communes, trend and comparisons are shown."},
    {"language": "es", "title": "Mortalidad infantil por comuna (Chile)", "slug": "mortalidad-infantil-chile",
     "charts": CHARTS_ES, "filter": "Región", "filter_dataset": "comunas_vs_region",
     "filter_description": "La región cuyas comunas, tendencia y comparaciones se muestran."},
]
DASHBOARD_TITLE = DASHBOARDS[0]["title"]
# The trend chart's series told apart by lightness, not by hue alone (readers who cannot tell red
# from green, a page printed in grey): the region black, its interval's two bounds light grey (the
# lower always below the rate, the upper above it), Chile vermillion (Okabe-Ito), between the two
# in lightness. In the order of the trend chart's metrics; a test checks the lightness steps.
SERIES_COLOURS = ("#000000", "#BBBBBB", "#BBBBBB", "#D55E00")


def series_colours(charts: list[dict]) -> dict:
    """The dashboard's `label_colors`: each series of its trend chart, by its label, to its colour."""
    trend = next(chart for chart in charts if chart["key"] == "trend")
    return {metric["label"]: colour for metric, colour in zip(trend["metrics"], SERIES_COLOURS, strict=True)}
# The dashboard's title in full: Superset lets its header's tags and dates squeeze it to a few
# letters ("Mor...") when the filter bar is open on a narrow screen or a phone.
DASHBOARD_CSS = """.header-with-actions .title-panel > div:first-child { flex-shrink: 0; max-width: 100%; }
.header-with-actions .title-panel > div:nth-child(2) { min-width: 0; overflow: hidden; flex-wrap: nowrap; }
"""
CHART_KEYS = {chart["name"]: chart["key"] for dashboard in DASHBOARDS for chart in dashboard["charts"]}
REGION_FILTER_ID = "NATIVE_FILTER-region"


def _app():
    from superset.app import create_app

    app = create_app()
    return app


def _migrate():
    from flask_migrate import upgrade

    upgrade()


def _admin():
    """A user for commands that check ownership (the importer, the exporter). Its password is
    random and never shown: nobody logs in as it."""
    from superset import security_manager

    security_manager.sync_role_definitions()
    user = security_manager.find_user("imr-setup")
    if user is None:
        user = security_manager.add_user("imr-setup", "IMR", "setup", "imr-setup@example.invalid",
                                         security_manager.find_role("Admin"), password=secrets.token_urlsafe(32))
    return user


def create_admin() -> str:
    """The person's admin: IMR_SUPERSET_ADMIN / IMR_SUPERSET_PASSWORD, or `admin` with a
    generated password, said once (when the user is created)."""
    from superset import security_manager

    name = os.environ.get("IMR_SUPERSET_ADMIN") or "admin"
    if security_manager.find_user(name) is not None:
        return f"Log in as {name!r} (the password was printed when the user was created, or set by IMR_SUPERSET_PASSWORD)."
    given = os.environ.get("IMR_SUPERSET_PASSWORD")
    password = given or secrets.token_urlsafe(12)
    security_manager.add_user(name, "Superset", "admin", f"{name}@example.invalid",
                              security_manager.find_role("Admin"), password=password)
    shown = "from IMR_SUPERSET_PASSWORD" if given else repr(password) + " (printed this once; keep it)"
    return f"Log in as {name!r} with the password {shown}."


def _database(uri: str):
    from superset import db
    from superset.models.core import Database

    database = db.session.query(Database).filter_by(database_name=DATABASE_NAME).one_or_none()
    if database is None:
        database = Database(database_name=DATABASE_NAME, uuid=uuid.UUID(DATABASE_UUID))
        db.session.add(database)
    database.sqlalchemy_uri = uri
    database.extra = json.dumps(ENGINE_EXTRA)
    database.expose_in_sqllab = True
    database.allow_dml = database.allow_ctas = database.allow_cvas = database.allow_file_upload = False
    db.session.commit()
    return database


def _stable_uuid(name: str) -> uuid.UUID:
    """The same id at every export: a new export re-imported updates, never duplicates."""
    return uuid.uuid5(uuid.UUID(DATABASE_UUID), name)


def _query_obj(chart: dict) -> dict:
    if chart["viz_type"] == "table":
        return {"columns": chart["columns"], "metrics": [], "orderby": chart["orderby"], "row_limit": 10000,
                "filters": [], "extras": {"where": chart["where"]}}
    return {"columns": [chart["x_axis"]], "metrics": chart["metrics"],
            "orderby": [[chart["x_axis"], True]], "row_limit": 10000, "filters": [],
            "extras": {"where": chart["where"]}}


def _form_data(chart: dict, dataset_uid: str) -> dict:
    form = {"datasource": dataset_uid, "viz_type": chart["viz_type"], "adhoc_filters": [
        {"expressionType": "SQL", "sqlExpression": chart["where"], "clause": "WHERE"}]}
    if chart["viz_type"] == "table":
        form.update(query_mode="raw", all_columns=chart["columns"], order_by_cols=[
            json.dumps([c, asc]) for c, asc in chart["orderby"]], row_limit=10000, server_pagination=False, show_cell_bars=False,
            column_config={c: {"d3NumberFormat": FORMATS[c]} for c in chart["columns"] if c in FORMATS})
    else:
        form.update(x_axis=chart["x_axis"], metrics=chart["metrics"], groupby=[], row_limit=10000,
                    y_axis_format=RATE, x_axis_time_format="%Y", show_legend=True, markerEnabled=True,
                    truncateYAxis=True, y_axis_bounds=[0, None], rich_tooltip=True)
    return form


def _region_filter(dataset_id: int, dashboard: dict) -> dict:
    """One region at a time (required, so a ranking never mixes regions), the RM first."""
    value = [DEFAULT_REGION]
    return {
        "id": REGION_FILTER_ID + ("" if dashboard["language"] == "en" else "-" + dashboard["language"]),
        "name": dashboard["filter"], "filterType": "filter_select", "type": "NATIVE_FILTER",
        "targets": [{"datasetId": dataset_id, "column": {"name": "region_name"}}],
        "defaultDataMask": {"filterState": {"value": value, "label": DEFAULT_REGION},
                            "extraFormData": {"filters": [{"col": "region_name", "op": "IN", "val": value}]}},
        "controlValues": {"enableEmptyFilter": True, "multiSelect": False, "defaultToFirstItem": False,
                          "inverseSelection": False, "searchAllOptions": False, "sortAscending": True},
        "cascadeParentIds": [], "scope": {"rootPath": ["ROOT_ID"], "excluded": []},
        "description": dashboard["filter_description"],
    }


def _positions(slices: list, charts: list[dict]) -> dict:
    """Rows of charts: a chart 12 columns wide has a row of its own, narrower ones share one."""
    positions = {"DASHBOARD_VERSION_KEY": "v2", "ROOT_ID": {"id": "ROOT_ID", "type": "ROOT", "children": ["GRID_ID"]},
                 "GRID_ID": {"id": "GRID_ID", "type": "GRID", "children": [], "parents": ["ROOT_ID"]}}
    row, used = None, 12
    for number, (slc, chart) in enumerate(zip(slices, charts)):
        if used + chart["width"] > 12:
            row, used = f"ROW-{len(positions['GRID_ID']['children'])}", 0
            positions["GRID_ID"]["children"].append(row)
            positions[row] = {"id": row, "type": "ROW", "children": [], "parents": ["ROOT_ID", "GRID_ID"],
                              "meta": {"background": "BACKGROUND_TRANSPARENT"}}
        key = f"CHART-{number}"
        positions[row]["children"].append(key)
        used += chart["width"]
        positions[key] = {"id": key, "type": "CHART", "children": [], "parents": ["ROOT_ID", "GRID_ID", row],
                          "meta": {"chartId": slc.id, "uuid": str(slc.uuid), "width": chart["width"],
                                   "height": chart["height"], "sliceName": slc.slice_name}}
    return positions


def export(uri: str) -> None:
    """Create datasets, charts and the two dashboards, then write them with Superset's exporter."""
    from superset import db
    from superset.commands.dashboard.export import ExportDashboardsCommand
    from superset.connectors.sqla.models import SqlaTable
    from superset.models.dashboard import Dashboard
    from superset.models.slice import Slice
    from superset.utils.core import override_user

    user = _admin()
    database = _database(URI_PLACEHOLDER if uri is None else uri)
    datasets = {}
    for name, sql in DATASETS.items():
        table = SqlaTable(table_name=name, schema="marts", database=database, uuid=_stable_uuid(name),
                          sql=None if sql is None else textwrap.dedent(sql).strip())
        db.session.add(table)
        db.session.flush()
        table.fetch_metadata()
        for column in table.columns:
            column.verbose_name = label(name, column.column_name)
        datasets[name] = table
    dashboards = []
    for spec in DASHBOARDS:
        slices = []
        for chart in spec["charts"]:
            table = datasets[chart["table"]]
            slc = Slice(slice_name=chart["name"], viz_type=chart["viz_type"], datasource_type="table",
                        uuid=_stable_uuid(chart["name"]), description=chart["description"],
                        datasource_id=table.id, params=json.dumps(_form_data(chart, table.uid)))
            slc.query_context = json.dumps({"datasource": {"id": table.id, "type": "table"}, "force": False,
                                            "queries": [_query_obj(chart)], "result_format": "json",
                                            "result_type": "full"})
            db.session.add(slc)
            slices.append(slc)
        db.session.flush()
        metadata = {"native_filter_configuration": [_region_filter(datasets[spec["filter_dataset"]].id, spec)],
                    "color_scheme": "", "label_colors": series_colours(spec["charts"]),
                    "cross_filters_enabled": False}
        dashboard = Dashboard(dashboard_title=spec["title"], slug=spec["slug"], published=True, css=DASHBOARD_CSS,
                              uuid=_stable_uuid(spec["title"]),
                              position_json=json.dumps(_positions(slices, spec["charts"])),
                              json_metadata=json.dumps(metadata), slices=slices)
        db.session.add(dashboard)
        dashboards.append(dashboard)
    db.session.commit()
    with override_user(user):  # a file's content is read later, by a call that checks the user too
        files = [(name, content() if callable(content) else content)
                 for name, content in ExportDashboardsCommand([d.id for d in dashboards]).run()]
    if EXPORT_DIR.exists():
        shutil.rmtree(EXPORT_DIR)
    for name, content in files:
        relative = Path(name)
        target = EXPORT_DIR / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        text = content
        if relative.parts[0] == "databases":  # no machine's path in the repository
            text = _database_file(text, URI_PLACEHOLDER)
        target.write_text(text)
    print(f"wrote {len(files)} files to {EXPORT_DIR}")


def _database_file(text: str, uri: str) -> str:
    """The database's file of an export with `uri` and the locked-down engine parameters."""
    config = yaml.safe_load(text)
    config.update(sqlalchemy_uri=uri, extra=ENGINE_EXTRA, allow_dml=False, allow_ctas=False, allow_cvas=False,
                  allow_file_upload=False)
    return yaml.safe_dump(config, sort_keys=False, allow_unicode=True)


def import_dashboard(uri: str) -> dict:
    """Add the database and import export/ with `uri`; returns what was imported."""
    from superset.commands.dashboard.importers.dispatcher import ImportDashboardsCommand
    from superset.models.dashboard import Dashboard
    from superset import db
    from superset.utils.core import override_user

    user = _admin()
    _database(uri)
    contents = {}
    for path in sorted(EXPORT_DIR.rglob("*.yaml")):
        text = path.read_text()
        if path.parent.name == "databases":
            text = _database_file(text, uri)
        contents[str(path.relative_to(EXPORT_DIR))] = text  # as Superset's API passes a bundle's files
    with override_user(user):
        ImportDashboardsCommand(contents, overwrite=True).run()
    imported = {}
    for spec in DASHBOARDS:
        dashboard = db.session.query(Dashboard).filter_by(slug=spec["slug"]).one()
        imported[dashboard.dashboard_title] = sorted(s.slice_name for s in dashboard.slices)
    return imported


def check() -> dict:
    """What Superset sees: schemas, every mart's columns and types, each dashboard's charts with
    their query result for the dashboards' default region (first rows) and for every region."""
    from superset import db
    from superset.models.core import Database
    from superset.models.dashboard import Dashboard
    from superset.sql.parse import Table

    database = db.session.query(Database).filter_by(database_name=DATABASE_NAME).one()
    report = {"database": database.database_name, "backend": database.backend,
              "uri": database.sqlalchemy_uri_decrypted,
              "engine_params": json.loads(database.extra)["engine_params"]}
    report["schemas"] = sorted(database.get_all_schema_names())
    tables = sorted(name for name, *_ in database.get_all_table_names_in_schema(catalog=None, schema="marts"))
    report["marts"] = {
        name: [[column["column_name"], str(column["type"])] for column in database.get_columns(Table(name, "marts"))]
        for name in tables
    }
    report["datasets"], report["dashboards"] = {}, {}
    for spec in DASHBOARDS:
        dashboard = db.session.query(Dashboard).filter_by(slug=spec["slug"]).one()
        report["datasets"].update({  # each column's header, as Superset shows it
            table.table_name: {column.column_name: column.verbose_name for column in table.columns}
            for table in {slc.datasource for slc in dashboard.slices}})
        charts = {}
        for slc in dashboard.slices:
            # As the dashboard opens (the region filter's default), and every region at once.
            default = _chart_data(slc, [{"col": "region_name", "op": "IN", "val": [DEFAULT_REGION]}])
            everywhere = _chart_data(slc, [])
            charts[CHART_KEYS[slc.slice_name]] = {
                "name": slc.slice_name, "description": slc.description, "dataset": slc.datasource.table_name,
                "rows": default["rowcount"], "query": default["query"], "first_rows": default["data"][:3],
                "colnames": default["colnames"], "rows_every_region": everywhere["data"]}
        report["dashboards"][spec["slug"]] = {"title": dashboard.dashboard_title, "language": spec["language"],
                                              "charts": charts}
    return report


def _chart_data(slc, filters: list[dict]) -> dict:
    """A chart's query result through Superset's own query context, with `filters`."""
    from superset.common.query_context_factory import QueryContextFactory

    context = json.loads(slc.query_context)
    context["datasource"] = {"id": slc.datasource_id, "type": "table"}
    for query in context["queries"]:
        query["filters"] = filters
    query_context = QueryContextFactory().create(
        datasource=context["datasource"], queries=context["queries"], result_type="full", result_format="json")
    payload = query_context.get_payload()["queries"][0]
    if payload.get("error"):
        raise SystemExit(f"chart {slc.slice_name!r} failed: {payload['error']}")
    return payload


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("command", choices=["admin", "import", "check", "export"])
    parser.add_argument("--warehouse", type=Path, help="absolute path of warehouse/infant_mortality.duckdb")
    args = parser.parse_args(argv)
    # The stable path (a link to the current release), never the release it points to today.
    uri = f"duckdb:///{args.warehouse.absolute()}" if args.warehouse else None
    if uri and not args.warehouse.exists():
        print(f"{args.warehouse} does not exist; run `make warehouse` first", file=sys.stderr)
        return 1
    if args.command.startswith("import") and uri is None:
        parser.error("import needs --warehouse")
    app = _app()
    with app.app_context():
        _migrate()
        if args.command == "admin":
            print(create_admin())
        elif args.command == "export":
            export(uri)
        elif args.command == "import":
            print(json.dumps(import_dashboard(uri), indent=2, ensure_ascii=False))
        else:
            print(json.dumps(check(), indent=2, ensure_ascii=False, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
