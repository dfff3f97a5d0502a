"""`make superset`: Apache Superset on the published warehouse, from nothing, in one command.

    python3 bi/superset/start.py [--port 8088] [--home .venv-superset/home] [--no-serve]

1. Superset's own environment, `.venv-superset/venv` (its pins are not the project's), created
   once from requirements.txt + constraints.txt and reused while they are unchanged.
2. A configuration of its own under `--home` (git-ignored), written at every start: a secret
   key generated on the first run and kept (Superset refuses to start with its default key, and
   a new key would lock out what the first one encrypted), the metadata database beside it,
   logging at warnings, and the hook that takes the file system from every DuckDB connection
   (duckdb_lockdown.py).
3. `superset db upgrade` and `superset init`, the admin user, the database (read-only URI to
   the published warehouse, file access and settings locked) and the dashboard of
   bi/superset/export/. Their logs go to `<home>/setup.log`; each step prints one line (and the
   log's end if it fails).
4. Superset on http://127.0.0.1:<port>/ only (never on other interfaces), until Ctrl-C.

The home is readable by its owner only (0700, files 0600: the key, the metadata database with
the users' password hashes, the logs), and everything this script and Superset create in it is
created so (umask 077). The admin is `admin` with a password generated and printed once, on the
terminal, when the user is created (never written to the log); or set IMR_SUPERSET_ADMIN and
IMR_SUPERSET_PASSWORD before the first run.

Only the Python standard library here: this runs before any environment exists.
"""

from __future__ import annotations

import argparse
import ast
import fcntl
import hashlib
import os
import re
import secrets
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parent.parent
ENVIRONMENT = REPO_ROOT / ".venv-superset"
WAREHOUSE = REPO_ROOT / "warehouse" / "infant_mortality.duckdb"


class StartError(Exception):
    """One sentence for the user."""


def _stamp() -> str:
    digest = hashlib.sha256()
    for name in ("requirements.txt", "constraints.txt"):
        digest.update((HERE / name).read_bytes())
    return digest.hexdigest()[:16]


def ensure_environment(home: Path = ENVIRONMENT, say=print) -> Path:
    """Superset's interpreter; installs it the first time (and when the pins change). A lock
    makes concurrent callers (two test sessions, a test and `make superset`) install once."""
    venv = home / "venv"
    python = venv / "bin" / "python"
    stamp = home / f"ready-{_stamp()}"
    home.mkdir(exist_ok=True)
    with open(home / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not stamp.exists():
            for old in home.glob("ready-*"):
                old.unlink()
            say(f"Installing Apache Superset 6.1 into {venv} (first run only; about 4 minutes, needs PyPI) ...")
            started = time.monotonic()
            subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
            install = subprocess.run(
                [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                 "-r", str(HERE / "requirements.txt"), "-c", str(HERE / "constraints.txt")],
                capture_output=True, text=True, timeout=1800,
            )
            if install.returncode != 0:
                raise StartError(f"installing Superset failed (needs PyPI):\n{install.stderr[-4000:]}")
            say(f"  installed in {time.monotonic() - started:.0f} s")
            stamp.touch()
    return python


PRIVATE = 0o077  # the umask of everything created in the home: owner only


def make_private(home: Path) -> None:
    """The home and everything in it readable by its owner only, also when an earlier version
    of this script created them readable by all."""
    home.mkdir(mode=0o700, parents=True, exist_ok=True)
    for path in [home, *home.rglob("*")]:
        if not path.is_symlink():
            path.chmod(path.stat().st_mode & 0o7777 & ~PRIVATE)


def _private_file(path: Path, text: str) -> None:
    """Replace `path` by `text` in one rename, the new file created 0600 (never readable by others
    even for a moment)."""
    temporary = path.with_name(path.name + ".new")
    temporary.unlink(missing_ok=True)
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w") as out:
        out.write(text)
    os.replace(temporary, path)


def config_text(home: Path, secret_key: str) -> str:
    return (
        "# Written by bi/superset/start.py at every start, keeping its SECRET_KEY; never commit it\n"
        "# (the key is secret). Changes made here are lost at the next start.\n"
        "import logging\n"
        "import sys\n\n"
        f"SECRET_KEY = {secret_key!r}\n"
        f"SQLALCHEMY_DATABASE_URI = {('sqlite:///' + str(home / 'superset.db'))!r}\n"
        "LOG_LEVEL = logging.WARNING\n"
        "logging.getLogger('werkzeug').setLevel(logging.WARNING)  # no line per request\n"
        "SUPERSET_WEBSERVER_ADDRESS = '127.0.0.1'\n\n"
        "# Every DuckDB connection loses the file system once open (the WAL paths beside the\n"
        "# warehouse stay writable otherwise): bi/superset/duckdb_lockdown.py.\n"
        f"sys.path.insert(0, {str(HERE)!r})\n"
        "import duckdb_lockdown  # noqa: E402\n\n"
        "duckdb_lockdown.install()\n"
    )


def write_config(home: Path) -> Path:
    """The configuration, readable by its owner only: its secret key generated the first time
    and kept, the rest as this version of the script writes it."""
    config = home / "superset_config.py"
    make_private(home)
    found = re.search(r"^SECRET_KEY = (.+)$", config.read_text(), re.M) if config.exists() else None
    secret_key = ast.literal_eval(found.group(1)) if found else secrets.token_urlsafe(42)
    text = config_text(home, secret_key)
    if not config.exists() or config.read_text() != text:
        _private_file(config, text)
    return config


def superset_environment(home: Path, config: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "FLASK_APP")}
    env.update(SUPERSET_CONFIG_PATH=str(config), SUPERSET_HOME=str(home), FLASK_APP="superset.app:create_app()")
    return env


def run_step(what: str, command: list[str], env: dict[str, str], log: Path, say=print,
             log_output: bool = True) -> str:
    """One setup step: a line saying what it does, its output to the log (created 0600; with
    `log_output` False only its errors: the output holds a password), its time."""
    say(f"{what} ...", end="", flush=True)
    started = time.monotonic()
    result = subprocess.run(command, env=env, capture_output=True, text=True, cwd=log.parent, umask=PRIVATE)
    logged = result.stdout if log_output else "(output not logged)\n"
    with os.fdopen(os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600), "a") as out:
        out.write(f"$ {' '.join(command)}\n{logged}{result.stderr}\n")
    if result.returncode != 0:
        say(" FAILED")
        tail = "\n".join((result.stdout + result.stderr).strip().splitlines()[-30:])
        raise StartError(f"{what} failed (exit {result.returncode}); the end of {log}:\n{tail}")
    say(f" {time.monotonic() - started:.0f} s")
    return result.stdout


def add_admin(python: Path, env: dict[str, str], log: Path, say=print) -> str:
    """The person's admin (IMR_SUPERSET_ADMIN in `env`, else `admin`); the line to tell them,
    with the password when it was generated: said, never logged."""
    setup = [str(python), str(HERE / "superset_setup.py")]
    output = run_step("Superset: the admin user", [*setup, "admin"], env, log, say, log_output=False)
    return (output.strip().splitlines() or [""])[-1]


def prepare(python: Path, home: Path, warehouse: Path, say=print) -> dict[str, str]:
    """Config, metadata database, roles, admin, database and dashboard; the environment to serve with."""
    if not warehouse.exists():
        raise StartError(f"{warehouse} does not exist; run `make warehouse` first")
    config = write_config(home)
    env = superset_environment(home, config)
    log = home / "setup.log"
    superset = [str(python.with_name("superset"))]
    setup = [str(python), str(HERE / "superset_setup.py")]
    run_step("Superset: migrating its metadata database (superset db upgrade)", [*superset, "db", "upgrade"], env, log, say)
    run_step("Superset: roles and permissions (superset init)", [*superset, "init"], env, log, say)
    admin = add_admin(python, env, log, say)
    run_step("Superset: the warehouse (read-only) and the dashboard", [*setup, "import", "--warehouse", str(warehouse)],
             env, log, say)
    make_private(home)
    say(f"  {admin}")
    return env


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--port", type=int, default=8088)
    parser.add_argument("--home", type=Path, default=ENVIRONMENT / "home",
                        help="Superset's configuration and metadata (default .venv-superset/home, git-ignored)")
    parser.add_argument("--warehouse", type=Path, default=WAREHOUSE,
                        help="the published DuckDB file (default warehouse/infant_mortality.duckdb, the stable link)")
    parser.add_argument("--no-serve", action="store_true", help="set everything up, then stop")
    args = parser.parse_args(argv)
    home = args.home.absolute()
    try:
        python = ensure_environment()
        os.umask(PRIVATE)  # the configuration, the logs, the metadata database; the server's files too
        env = prepare(python, home, args.warehouse.absolute())
    except StartError as error:
        print(f"superset: {error}", file=sys.stderr)
        return 1
    if args.no_serve:
        return 0
    print(f"Superset: serving http://127.0.0.1:{args.port}/superset/dashboard/infant-mortality-chile/ "
          f"(en español: /superset/dashboard/mortalidad-infantil-chile/; this machine only; Ctrl-C stops it; "
          f"logs in {home / 'setup.log'})", flush=True)
    server = [str(python.with_name("superset")), "run", "--host", "127.0.0.1", "--port", str(args.port),
              "--with-threads"]
    os.execve(server[0], server, env)


if __name__ == "__main__":
    sys.exit(main())
