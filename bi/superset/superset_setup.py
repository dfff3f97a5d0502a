"""Connect Apache Superset to the published warehouse and import the study's dashboard.

Run with Superset's own interpreter (see bi/superset/README.md), with SUPERSET_CONFIG_PATH set:

    .venv-superset/venv/bin/python bi/superset/superset_setup.py import --warehouse /abs/warehouse/infant_mortality.duckdb
    .venv-superset/venv/bin/python bi/superset/superset_setup.py check    # JSON: what Superset sees
    .venv-superset/venv/bin/python bi/superset/superset_setup.py import-and-check --warehouse ...  # both (the test)
    .venv-superset/venv/bin/python bi/superset/superset_setup.py export   # maintainers: rewrite export/

`import` migrates Superset's metadata database if needed, adds (or updates) the database
"Infant mortality (DuckDB)" with the read-only DuckDB URI, and imports `export/` (Superset's own
dashboard export format: database, datasets, charts, dashboard) with that URI. `check` prints the
schemas, every mart's columns with types, and each chart's query result, as Superset computes
them. `export` creates the datasets, charts and dashboard from the definitions below and writes
them with Superset's own exporter, so the committed files are exactly what Superset produces.
"""

from __future__ import annotations

import argparse
import io
import json
import shutil
import sys
import zipfile
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
EXPORT_DIR = HERE / "export"
DATABASE_NAME = "Infant mortality (DuckDB)"
# Stable ids, so a second import updates instead of duplicating.
DATABASE_UUID = "6d1f7f64-3c55-4a58-9a8e-6a3f2f6f2b01"
URI_PLACEHOLDER = "duckdb:////ABSOLUTE/PATH/TO/warehouse/infant_mortality.duckdb"
ENGINE_EXTRA = {"engine_params": {"connect_args": {"read_only": True}}}

PERIOD = "2010-2019"
CHARTS = [
    {
        "name": "Infant mortality by commune, 2010-2019: rate ratio vs the region (ranking)",
        "table": "fct_commune_vs_region",
        "viz_type": "table",
        "columns": ["rank_in_region", "commune_name", "deaths", "live_births", "rate_per_1000",
                    "rate_ratio", "rest_rate_ratio_ci95_lower", "rest_rate_ratio_ci95_upper", "comparison"],
        "where": f"indicator = 'imr' AND period_label = '{PERIOD}'",
        "orderby": [["rank_in_region", True]],
    },
    {
        "name": "Regional infant mortality per 1000 live births, by year (trend)",
        "table": "fct_area_year_rates",
        "viz_type": "echarts_timeseries_line",
        "x_axis": "year",
        "metric": {"label": "rate_per_1000", "expressionType": "SQL", "sqlExpression": "MAX(rate_per_1000)"},
        "groupby": ["area_name"],
        "where": "area_level = 'region' AND indicator = 'imr'",
    },
    {
        "name": "Communes against the rest of the region, every period (table)",
        "table": "fct_commune_vs_region",
        "viz_type": "table",
        "columns": ["commune_code", "commune_name", "period_label", "deaths", "live_births", "rate_per_1000",
                    "ci95_lower", "ci95_upper", "rate_ratio", "excess_deaths", "p_value", "comparison"],
        "where": "indicator = 'imr'",
        "orderby": [["commune_name", True], ["period_label", True]],
    },
]
DASHBOARD_TITLE = "Infant mortality by commune (Chile)"


def _app():
    from superset.app import create_app

    app = create_app()
    return app


def _migrate():
    from flask_migrate import upgrade

    upgrade()


def _admin():
    """A user for commands that check ownership (the importer, the exporter)."""
    from superset import security_manager

    security_manager.sync_role_definitions()
    user = security_manager.find_user("imr-setup")
    if user is None:
        user = security_manager.add_user("imr-setup", "IMR", "setup", "imr-setup@example.invalid",
                                         security_manager.find_role("Admin"), password="unused-" + DATABASE_UUID)
    return user


def _database(uri: str):
    from superset import db
    from superset.models.core import Database

    database = db.session.query(Database).filter_by(database_name=DATABASE_NAME).one_or_none()
    if database is None:
        database = Database(database_name=DATABASE_NAME, uuid=__import__("uuid").UUID(DATABASE_UUID))
        db.session.add(database)
    database.sqlalchemy_uri = uri
    database.extra = json.dumps(ENGINE_EXTRA)
    database.expose_in_sqllab = True
    db.session.commit()
    return database


def _query_obj(chart: dict) -> dict:
    if chart["viz_type"] == "table":
        return {"columns": chart["columns"], "metrics": [], "orderby": chart["orderby"], "row_limit": 10000,
                "filters": [], "extras": {"where": chart["where"]}}
    return {"columns": [chart["x_axis"], *chart["groupby"]], "metrics": [chart["metric"]],
            "orderby": [[chart["x_axis"], True]], "row_limit": 10000, "filters": [],
            "extras": {"where": chart["where"]}}


def _form_data(chart: dict, dataset_uid: str) -> dict:
    form = {"datasource": dataset_uid, "viz_type": chart["viz_type"], "adhoc_filters": [
        {"expressionType": "SQL", "sqlExpression": chart["where"], "clause": "WHERE"}]}
    if chart["viz_type"] == "table":
        form.update(query_mode="raw", all_columns=chart["columns"], order_by_cols=[
            json.dumps([c, asc]) for c, asc in chart["orderby"]], row_limit=10000)
    else:
        form.update(x_axis=chart["x_axis"], metrics=[chart["metric"]], groupby=chart["groupby"], row_limit=10000)
    return form


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
    for name in sorted({chart["table"] for chart in CHARTS}):
        table = SqlaTable(table_name=name, schema="marts", database=database)
        db.session.add(table)
        db.session.flush()
        table.fetch_metadata()
        datasets[name] = table
    slices = []
    for chart in CHARTS:
        table = datasets[chart["table"]]
        slc = Slice(slice_name=chart["name"], viz_type=chart["viz_type"], datasource_type="table",
                    datasource_id=table.id, params=json.dumps(_form_data(chart, table.uid)))
        slc.query_context = json.dumps({"datasource": {"id": table.id, "type": "table"}, "force": False,
                                        "queries": [_query_obj(chart)], "result_format": "json",
                                        "result_type": "full"})
        db.session.add(slc)
        slices.append(slc)
    db.session.flush()
    positions = {"DASHBOARD_VERSION_KEY": "v2", "ROOT_ID": {"id": "ROOT_ID", "type": "ROOT", "children": ["GRID_ID"]},
                 "GRID_ID": {"id": "GRID_ID", "type": "GRID", "children": [], "parents": ["ROOT_ID"]}}
    for number, slc in enumerate(slices):
        row, key = f"ROW-{number}", f"CHART-{number}"
        positions["GRID_ID"]["children"].append(row)
        positions[row] = {"id": row, "type": "ROW", "children": [key], "parents": ["ROOT_ID", "GRID_ID"],
                          "meta": {"background": "BACKGROUND_TRANSPARENT"}}
        positions[key] = {"id": key, "type": "CHART", "children": [], "parents": ["ROOT_ID", "GRID_ID", row],
                          "meta": {"chartId": slc.id, "uuid": str(slc.uuid), "width": 12, "height": 60,
                                   "sliceName": slc.slice_name}}
    dashboard = Dashboard(dashboard_title=DASHBOARD_TITLE, slug="infant-mortality-chile", published=True,
                          position_json=json.dumps(positions), json_metadata=json.dumps({}), slices=slices)
    db.session.add(dashboard)
    db.session.commit()
    with override_user(user):
        files = list(ExportDashboardsCommand([dashboard.id]).run())
    if EXPORT_DIR.exists():
        shutil.rmtree(EXPORT_DIR)
    for name, content in files:
        relative = Path(name)
        target = EXPORT_DIR / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        text = content() if callable(content) else content
        if relative.parts[0] == "databases":  # no machine's path in the repository
            config = yaml.safe_load(text)
            config["sqlalchemy_uri"] = URI_PLACEHOLDER
            text = yaml.safe_dump(config, sort_keys=False, allow_unicode=True)
        target.write_text(text)
    print(f"wrote {len(files)} files to {EXPORT_DIR}")


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
            text = text.replace(URI_PLACEHOLDER, uri)
        contents[str(path.relative_to(EXPORT_DIR))] = text  # as Superset's API passes a bundle's files
    with override_user(user):
        ImportDashboardsCommand(contents, overwrite=True).run()
    dashboard = db.session.query(Dashboard).filter_by(dashboard_title=DASHBOARD_TITLE).one()
    return {"dashboard": dashboard.dashboard_title, "charts": sorted(s.slice_name for s in dashboard.slices)}


def check() -> dict:
    """What Superset sees: schemas, every mart's columns and types, each chart's query result."""
    from superset import db
    from superset.common.query_context_factory import QueryContextFactory
    from superset.models.core import Database
    from superset.models.dashboard import Dashboard
    from superset.sql.parse import Table

    database = db.session.query(Database).filter_by(database_name=DATABASE_NAME).one()
    report = {"database": database.database_name, "backend": database.backend,
              "uri": database.sqlalchemy_uri_decrypted, "read_only": json.loads(database.extra)["engine_params"]}
    report["schemas"] = sorted(database.get_all_schema_names())
    tables = sorted(name for name, *_ in database.get_all_table_names_in_schema(catalog=None, schema="marts"))
    report["marts"] = {
        name: [[column["column_name"], str(column["type"])] for column in database.get_columns(Table(name, "marts"))]
        for name in tables
    }
    dashboard = db.session.query(Dashboard).filter_by(dashboard_title=DASHBOARD_TITLE).one()
    report["dashboard"] = {"title": dashboard.dashboard_title, "charts": {}}
    for slc in sorted(dashboard.slices, key=lambda s: s.slice_name):
        context = json.loads(slc.query_context)
        context["datasource"] = {"id": slc.datasource_id, "type": "table"}
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
    parser.add_argument("command", choices=["import", "check", "import-and-check", "export"])
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
        if args.command == "export":
            export(uri)
        elif args.command == "import":
            print(json.dumps(import_dashboard(uri), indent=2, ensure_ascii=False))
        elif args.command == "import-and-check":
            imported = import_dashboard(uri)
            print(json.dumps({"imported": imported, "check": check()}, indent=2, ensure_ascii=False, default=str))
        else:
            print(json.dumps(check(), indent=2, ensure_ascii=False, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
