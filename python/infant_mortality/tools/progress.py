"""Progress for long steps: a step that has printed nothing for a few seconds says what it is
doing and how far it is, so that nothing the user waits for is silent for more than 5 s.

Standard library only: the installer (`install_env`) uses it with the system Python, before
`.venv` exists.

    with Heartbeat(say, lambda silent: f"  ... dbt: 40 of 178 done ({silent:.0f} s)") as beat:
        for line in child.stdout:
            beat.output()          # the child spoke: the silence starts again
            say(line)

The status is asked for only when it is due, from a background thread; `say` is the one place
that writes, under a lock, so a status line never lands inside a line of the child's output.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import Callable, TextIO

# Seconds without output before a step says where it is, and between two such lines: below the
# 5 s promise with room for working out the status (counting files: half a second on a loaded
# machine) and for the scheduling of a busy one.
SILENCE = 3.5

_WRITE = threading.Lock()


def say(text: str = "", stream: TextIO | None = None) -> None:
    """Print one line at once (the heartbeat thread and the step share the terminal)."""
    out = stream or sys.stdout
    with _WRITE:
        out.write(text + "\n")
        out.flush()


class Heartbeat:
    """While the block runs, call `say(status(silent_seconds))` whenever nothing was printed for
    `every` seconds (and again every `every` seconds of further silence). `output()` marks that
    something was printed. A status that raises is replaced by a plain "still working" line."""

    def __init__(self, say: Callable[[str], None], status: Callable[[float], str], every: float = SILENCE,
                 enabled: bool = True):
        self._say = say
        self._status = status
        self._every = every
        self._enabled = enabled
        self._last = time.monotonic()
        self._silent_since = self._last
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def output(self) -> None:
        self._last = self._silent_since = time.monotonic()

    def __enter__(self) -> "Heartbeat":
        self.output()
        if self._enabled:
            self._thread = threading.Thread(target=self._run, name="heartbeat", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(0.1):
            now = time.monotonic()
            if now - self._last < self._every:
                continue
            self._last = now  # the next line is due `every` seconds after this one was, not after its status
            silent = now - self._silent_since
            try:
                line = self._status(silent)
            except Exception as error:  # a progress line must never stop the step it reports on
                line = f"  ... still working ({silent:.0f} s; no status: {type(error).__name__})"
            if self._stop.is_set():
                return
            self._say(line)
