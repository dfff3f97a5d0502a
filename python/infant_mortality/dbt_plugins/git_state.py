"""The git commit a build was made from, and whether the working tree matched it (for
marts.meta_build, through the dbt Python model int_build_git).

Two git commands of about 10 ms each; the model calling this returns a DuckDB relation, not a
pandas frame, so that recording the commit costs the build milliseconds, not an import of pandas.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

NOT_A_CHECKOUT = "not a git checkout (or git is not installed): no commit to record"
UNCOMMITTED = "the working tree had uncommitted changes: the build is not exactly this commit"


def _git(directory: Path, *args: str) -> str | None:
    try:
        result = subprocess.run(["git", *args], cwd=directory, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return result.stdout.strip() if result.returncode == 0 else None


def git_state(directory: Path | str = ".") -> tuple[str | None, str | None]:
    """(commit, note): the full hash of HEAD, or None with a note when `directory` is not in a git
    checkout (a release tarball) or git is missing; a note too when tracked files were changed,
    staged or not (untracked files are not the build's input unless a var names them)."""
    directory = Path(directory)
    commit = _git(directory, "rev-parse", "--verify", "HEAD")
    if commit is None:
        return None, NOT_A_CHECKOUT
    if _git(directory, "status", "--porcelain", "--untracked-files=no"):
        return commit, UNCOMMITTED
    return commit, None
