"""Connect Apache Superset to the published warehouse and import the study's dashboard.

`make superset` (bi/superset/start.py) runs these steps; by hand, with Superset's own
interpreter and SUPERSET_CONFIG_PATH set:

    .venv-superset/venv/bin/python bi/superset/superset_setup.py admin    # the person's admin user
    .venv-superset/venv/bin/python bi/superset/superset_setup.py import --warehouse /abs/warehouse/infant_mortality.duckdb
    .venv-superset/venv/bin/python bi/superset/superset_setup.py check    # JSON: what Superset sees
    .venv-superset/venv/bin/python bi/superset/superset_setup.py export   # maintainers: rewrite export/

`admin` creates the admin (IMR_SUPERSET_ADMIN / IMR_SUPERSET_PASSWORD, or `admin` with a
generated password, printed once). `import` migrates Superset's metadata database if needed,
adds (or updates) the database "Infant mortality (DuckDB)" with the read-only DuckDB URI and
the engine parameters of `ENGINE_EXTRA` (no file access, no extensions, settings locked:
duckdb_lockdown.py), and imports `export/` (Superset's own dashboard export format: database,
datasets, charts, dashboard) with that URI and those parameters, whatever the files say.
`check` prints the schemas, every mart's columns with types, each dataset's column headers and
each chart's query result for the dashboard's default region, as Superset computes them. `export`
creates the datasets, charts and dashboard from the definitions below and writes them with
Superset's own exporter, so the committed files are exactly what Superset produces.
"""

from __future__ import annotations

import argparse
import json
import os
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
# Virtual datasets: the marts' rows shaped for a chart, nothing recomputed. Every dataset has
# `region_name`, the column the dashboard's region filter sets.
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
        -- its APC, interval, p, class, and the methods that class it otherwise.
        select area_name as region_name, period_start, period_end, n_years_used, method_label,
               apc, apc_ci95_lower, apc_ci95_upper, p_value, trend, methods_disagreeing, note
        from marts.fct_trends
        where area_level = 'region' and indicator = 'imr'
            and method = (select trend_method from marts.meta_build)
    """,
}
# Numbers as the report shows them: rates and ratios with 2 decimals, p with 3, counts grouped.
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
    "region_name": "Region", "rank_in_region": "Rank", "commune_name": "Commune", "commune_code": "Code",
    "period_label": "Period", "deaths": "Deaths", "live_births": "Live births", "rate_per_1000": "Rate /1000",
    "ci95_lower": "CI low", "ci95_upper": "CI high", "is_unreliable": "Unreliable",
    "rate_ratio": "RT vs region", "rate_ratio_ci95_lower": "RT CI low", "rate_ratio_ci95_upper": "RT CI high",
    "rest_rate_per_1000": "Rest of region /1000", "rest_rate_ratio": "RR vs rest",
    "rest_rate_ratio_ci95_lower": "RR 95% CI (mid-p) low", "rest_rate_ratio_ci95_upper": "RR 95% CI (mid-p) high",
    "rest_rate_ratio_exact_lower": "RR exact CI (conservative) low",
    "rest_rate_ratio_exact_upper": "RR exact CI (conservative) high", "comparison": "vs rest",
    "period_start": "From", "period_end": "To", "n_years_used": "Years fitted",
    "apc": "APC %", "apc_ci95_lower": "APC CI low", "apc_ci95_upper": "APC CI high", "trend": "Trend",
    "method_label": "Method", "methods_disagreeing": "Methods that disagree",
}
# A column whose header depends on its dataset: every p-value is labelled by its test.
DATASET_LABELS = {
    "fct_commune_vs_region": {"p_value": "p (mid-p, conditional binomial)"},
    "region_trends": {"p_value": "p (trend test of the method shown, slope = 0)"},
}


def label(dataset: str, column: str) -> str | None:
    return DATASET_LABELS.get(dataset, {}).get(column, LABELS.get(column))


CHARTS = [
    {
        # Each ratio beside its own interval: RT against the whole region (log-scale interval with
        # variance 1/d - 1/D), as the report's ranking shows it.
        "name": f"Ranking of the region's communes, infant mortality {PERIOD} (ranking)",
        "table": "fct_commune_vs_region",
        "viz_type": "table",
        "columns": ["region_name", "rank_in_region", "commune_name", "commune_code", "deaths", "live_births",
                    "rate_per_1000", "ci95_lower", "ci95_upper", "is_unreliable", "rate_ratio",
                    "rate_ratio_ci95_lower", "rate_ratio_ci95_upper"],
        "where": f"indicator = 'imr' AND period_label = '{PERIOD}'",
        "orderby": [["region_name", True], ["rank_in_region", True]],
        "width": 12, "height": 70,
    },
    {
        "name": "Infant mortality of the region per 1000 live births by year, with its 95% interval and Chile (trend)",
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
        "width": 6, "height": 50,
    },
    {
        "name": "Trend of the region: annual percent change by the headline method (trend table)",
        "table": "region_trends",
        "viz_type": "table",
        "columns": ["period_start", "period_end", "n_years_used", "method_label", "apc", "apc_ci95_lower",
                    "apc_ci95_upper", "p_value", "trend", "methods_disagreeing"],
        "where": "1 = 1",
        "orderby": [["period_start", True], ["period_end", False]],
        "width": 6, "height": 50,
    },
    {
        # The test behind `comparison`: the commune against the rest of the region, with that
        # ratio's mid-p interval (the one the test's mid-p p-value agrees with).
        "name": "Communes against the rest of the region, every period (table)",
        "table": "fct_commune_vs_region",
        "viz_type": "table",
        "columns": ["region_name", "commune_code", "commune_name", "period_label", "deaths", "live_births",
                    "rate_per_1000", "rest_rate_per_1000", "rest_rate_ratio", "rest_rate_ratio_ci95_lower",
                    "rest_rate_ratio_ci95_upper", "p_value", "comparison"],
        "where": "indicator = 'imr'",
        "orderby": [["region_name", True], ["commune_name", True], ["period_label", True]],
        "width": 12, "height": 70,
    },
]
DASHBOARD_TITLE = "Infant mortality by commune (Chile)"
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


def _region_filter(dataset_id: int) -> dict:
    """One region at a time (required, so a ranking never mixes regions), the RM first."""
    value = [DEFAULT_REGION]
    return {
        "id": REGION_FILTER_ID, "name": "Region", "filterType": "filter_select", "type": "NATIVE_FILTER",
        "targets": [{"datasetId": dataset_id, "column": {"name": "region_name"}}],
        "defaultDataMask": {"filterState": {"value": value, "label": DEFAULT_REGION},
                            "extraFormData": {"filters": [{"col": "region_name", "op": "IN", "val": value}]}},
        "controlValues": {"enableEmptyFilter": True, "multiSelect": False, "defaultToFirstItem": False,
                          "inverseSelection": False, "searchAllOptions": False, "sortAscending": True},
        "cascadeParentIds": [], "scope": {"rootPath": ["ROOT_ID"], "excluded": []},
        "description": "The region whose communes, trend and comparisons are shown.",
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
    """Create datasets, charts and dashboard, then write them with Superset's exporter."""
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
    slices = []
    for chart in CHARTS:
        table = datasets[chart["table"]]
        slc = Slice(slice_name=chart["name"], viz_type=chart["viz_type"], datasource_type="table",
                    uuid=_stable_uuid(chart["name"]),
                    datasource_id=table.id, params=json.dumps(_form_data(chart, table.uid)))
        slc.query_context = json.dumps({"datasource": {"id": table.id, "type": "table"}, "force": False,
                                        "queries": [_query_obj(chart)], "result_format": "json",
                                        "result_type": "full"})
        db.session.add(slc)
        slices.append(slc)
    db.session.flush()
    metadata = {"native_filter_configuration": [_region_filter(datasets["fct_commune_vs_region"].id)],
                "color_scheme": "", "cross_filters_enabled": False}
    dashboard = Dashboard(dashboard_title=DASHBOARD_TITLE, slug="infant-mortality-chile", published=True,
                          uuid=_stable_uuid(DASHBOARD_TITLE),
                          position_json=json.dumps(_positions(slices, CHARTS)), json_metadata=json.dumps(metadata),
                          slices=slices)
    db.session.add(dashboard)
    db.session.commit()
    with override_user(user):  # a file's content is read later, by a call that checks the user too
        files = [(name, content() if callable(content) else content)
                 for name, content in ExportDashboardsCommand([dashboard.id]).run()]
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
    dashboard = db.session.query(Dashboard).filter_by(dashboard_title=DASHBOARD_TITLE).one()
    return {"dashboard": dashboard.dashboard_title, "charts": sorted(s.slice_name for s in dashboard.slices)}


def check() -> dict:
    """What Superset sees: schemas, every mart's columns and types, each chart's query result
    with the dashboard's default region."""
    from superset import db
    from superset.common.query_context_factory import QueryContextFactory
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
    dashboard = db.session.query(Dashboard).filter_by(dashboard_title=DASHBOARD_TITLE).one()
    report["datasets"] = {  # each column's header, as Superset shows it
        table.table_name: {column.column_name: column.verbose_name for column in table.columns}
        for table in {slc.datasource for slc in dashboard.slices}}
    report["dashboard"] = {"title": dashboard.dashboard_title, "charts": {}}
    for slc in sorted(dashboard.slices, key=lambda s: s.slice_name):
        context = json.loads(slc.query_context)
        context["datasource"] = {"id": slc.datasource_id, "type": "table"}
        for query in context["queries"]:  # as the dashboard opens: the region filter's default
            query["filters"] = [{"col": "region_name", "op": "IN", "val": [DEFAULT_REGION]}]
        query_context = QueryContextFactory().create(
            datasource=context["datasource"], queries=context["queries"], result_type="full", result_format="json")
        payload = query_context.get_payload()["queries"][0]
        if payload.get("error"):
            raise SystemExit(f"chart {slc.slice_name!r} failed: {payload['error']}")
        report["dashboard"]["charts"][slc.slice_name] = {
            "dataset": slc.datasource.table_name, "rows": payload["rowcount"], "query": payload["query"],
            "first_rows": payload["data"][:3]}
    return report


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
