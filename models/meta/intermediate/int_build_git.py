"""The git commit the warehouse was built from (for marts.meta_build).

A dbt Python model because Jinja and SQL cannot run git. dbt runs from the repository root
(profiles/profiles.yml), so the working directory is the checkout. Not a git checkout (a
release tarball), or git not installed: git_commit is null and git_note says so; a working
tree with uncommitted changes is built from more than the commit, and git_note says that too.
"""

import subprocess

import pandas as pd


def _git(*args):
    try:
        result = subprocess.run(["git", *args], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return result.stdout.strip() if result.returncode == 0 else None


def model(dbt, session):
    dbt.config(materialized="table")
    commit = _git("rev-parse", "--verify", "HEAD")
    if commit is None:
        note = "not a git checkout (or git is not installed): no commit to record"
    elif _git("status", "--porcelain", "--untracked-files=no"):
        note = "the working tree had uncommitted changes: the build is not exactly this commit"
    else:
        note = None
    return pd.DataFrame({"git_commit": pd.Series([commit], dtype="string"),
                         "git_note": pd.Series([note], dtype="string")})
