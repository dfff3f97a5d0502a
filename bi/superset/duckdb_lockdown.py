"""What a Superset user can do with the warehouse: read its tables, nothing else.

Two parts, both needed:

1. `CONNECT_CONFIG`, DuckDB settings given when the connection opens (the database's engine
   parameters, `{"connect_args": {"read_only": true, "config": CONNECT_CONFIG}}`, which
   superset_setup.py registers): no external access (read_csv, read_text, read_parquet, glob,
   COPY, ATTACH, INSTALL and LOAD of extensions fail with a permission error), no extension
   loaded behind a query's back, and the configuration locked, so `SET` cannot undo any of it.
   `disabled_filesystems` alone stays settable, for step 2.
2. `lock_file_system`, run on every new DuckDB connection of the Superset process (the
   configuration start.py writes calls `install()`). DuckDB keeps the database's own
   write-ahead-log paths (`<file>.wal`, `.wal.checkpoint`, ...) and its temporary directory
   writable even without external access, and those paths are beside the published file, in
   the live release: `COPY ... TO '<release>/infant_mortality.duckdb.wal'` would write a file
   there. Once the database is open, disabling DuckDB's local file system closes them too; the
   open file stays readable, and a file system once disabled cannot be enabled again. DuckDB
   refuses that setting before the database is open, hence a hook and not a connection setting.

Superset's own configuration imports this module; only the standard library and SQLAlchemy here.
"""

from __future__ import annotations

CONNECT_CONFIG = {
    "enable_external_access": False,
    "autoinstall_known_extensions": False,
    "autoload_known_extensions": False,
    "lock_configuration": True,
    "allowed_configs": ["disabled_filesystems"],
}
LOCK_FILE_SYSTEM = "SET disabled_filesystems = 'LocalFileSystem'"


def lock_file_system(dbapi_connection, connection_record=None) -> None:
    """SQLAlchemy's `connect` event: a DuckDB connection loses the local file system (other
    databases' connections are left alone)."""
    if type(dbapi_connection).__module__.split(".")[0] == "duckdb_engine":
        dbapi_connection.execute(LOCK_FILE_SYSTEM)


def install() -> None:
    """For every engine of this process (Superset builds one per query)."""
    from sqlalchemy import event
    from sqlalchemy.engine import Engine

    if not event.contains(Engine, "connect", lock_file_system):
        event.listen(Engine, "connect", lock_file_system)
