"""`make superset`: Apache Superset on the published warehouse, from nothing, in one command.

    python3 bi/superset/start.py [--port 8088] [--home .venv-superset/home] [--no-serve]

1. Superset's own environment, `.venv-superset/venv` (its pins are not the project's), created
   once from requirements.txt + constraints.txt and reused while they are unchanged.
2. A configuration of its own under `--home` (git-ignored): a secret key generated on the first
   run and kept (Superset refuses to start with its default key, and a new key would lock out
   what the first one encrypted), the metadata database beside it, logging at warnings.
3. `superset db upgrade` and `superset init`, the admin user, the database (read-only URI to
   the published warehouse) and the dashboard of bi/superset/export/. Their logs go to
   `<home>/setup.log`; each step prints one line (and the log's end if it fails).
4. Superset on http://127.0.0.1:<port>/ only (never on other interfaces), until Ctrl-C.

The admin is `admin` with a password generated and printed once, when the user is created; or
set IMR_SUPERSET_ADMIN and IMR_SUPERSET_PASSWORD before the first run.

Only the Python standard library here: this runs before any environment exists.
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import os
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


def write_config(home: Path) -> Path:
    """The configuration, written once with a new secret key, readable by its owner only."""
    config = home / "superset_config.py"
    if config.exists():
        return config
    home.mkdir(parents=True, exist_ok=True)
    text = (
        "# Written by bi/superset/start.py on the first run; never commit it (the key is secret).\n"
        "import logging\n\n"
        f"SECRET_KEY = {secrets.token_urlsafe(42)!r}\n"
        f"SQLALCHEMY_DATABASE_URI = {('sqlite:///' + str(home / 'superset.db'))!r}\n"
        "LOG_LEVEL = logging.WARNING\n"
        "logging.getLogger('werkzeug').setLevel(logging.WARNING)  # no line per request\n"
        "SUPERSET_WEBSERVER_ADDRESS = '127.0.0.1'\n"
    )
    descriptor = os.open(config, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w") as out:
        out.write(text)
    return config


def superset_environment(home: Path, config: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "FLASK_APP")}
    env.update(SUPERSET_CONFIG_PATH=str(config), SUPERSET_HOME=str(home), FLASK_APP="superset.app:create_app()")
    return env


def run_step(what: str, command: list[str], env: dict[str, str], log: Path, say=print) -> str:
    """One setup step: a line saying what it does, its output to the log, its time."""
    say(f"{what} ...", end="", flush=True)
    started = time.monotonic()
    result = subprocess.run(command, env=env, capture_output=True, text=True, cwd=log.parent)
    with open(log, "a") as out:
        out.write(f"$ {' '.join(command)}\n{result.stdout}{result.stderr}\n")
    if result.returncode != 0:
        say(" FAILED")
        tail = "\n".join((result.stdout + result.stderr).strip().splitlines()[-30:])
        raise StartError(f"{what} failed (exit {result.returncode}); the end of {log}:\n{tail}")
    say(f" {time.monotonic() - started:.0f} s")
    return result.stdout


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
    admin = run_step("Superset: the admin user", [*setup, "admin"], env, log, say)
    run_step("Superset: the warehouse (read-only) and the dashboard", [*setup, "import", "--warehouse", str(warehouse)],
             env, log, say)
    for line in admin.strip().splitlines()[-1:]:
        say(f"  {line}")
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
        env = prepare(python, home, args.warehouse.absolute())
    except StartError as error:
        print(f"superset: {error}", file=sys.stderr)
        return 1
    if args.no_serve:
        return 0
    print(f"Superset: serving http://127.0.0.1:{args.port}/superset/dashboard/infant-mortality-chile/ "
          f"(this machine only; Ctrl-C stops it; logs in {home / 'setup.log'})", flush=True)
    server = [str(python.with_name("superset")), "run", "--host", "127.0.0.1", "--port", str(args.port),
              "--with-threads"]
    os.execve(server[0], server, env)


if __name__ == "__main__":
    sys.exit(main())
