#!/usr/bin/env python3
"""Run a command and time its output: every line prefixed with the seconds since the start, then
the longest silences (how long the user saw nothing new). Standard library only, so it can time
`make warehouse` on a fresh clone before `.venv` exists.

    python3 benchmarks/timeline.py --log /tmp/warehouse.log -- make warehouse

stdout and stderr are read together, through a pipe (as CI and `| tee` see them: tools print
no progress bars there, so a silence here is at least as long as in a terminal). A carriage
return ends a line too, so a progress bar redrawn in place counts as output.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time

# A silence is attributed to the line that ended it; the line before it says what was running.
Line = tuple[float, str]


def split_output(buffer: bytes) -> tuple[list[bytes], bytes]:
    """Complete lines (ended by \\n or \\r) and the unfinished rest."""
    parts = re.split(rb"\r\n|\n|\r", buffer)
    return parts[:-1], parts[-1]


def longest_silences(lines: list[Line], end: float, count: int = 5) -> list[tuple[float, float, str, str]]:
    """(gap seconds, time it ended, line before, line after), longest first; the start and the
    process's exit count as events."""
    events = [(0.0, "(start)"), *lines, (end, "(exit)")]
    gaps = [(b[0] - a[0], b[0], a[1], b[1]) for a, b in zip(events, events[1:])]
    return sorted(gaps, reverse=True)[:count]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--log", help="also write the timed lines and the summary to this file")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="the command, after --")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command given")

    log = open(args.log, "w", encoding="utf-8") if args.log else None

    def emit(text: str) -> None:
        print(text, flush=True)
        if log:
            log.write(text + "\n")
            log.flush()

    lines: list[Line] = []
    started = time.monotonic()
    last = 0.0
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    assert process.stdout is not None
    pending = b""
    while chunk := os.read(process.stdout.fileno(), 65536):
        now = time.monotonic() - started
        complete, pending = split_output(pending + chunk)
        for raw in complete:
            text = raw.decode("utf-8", "replace").rstrip()
            if not text:
                continue
            lines.append((now, text))
            emit(f"[{now:7.1f}s +{now - last:5.1f}] {text}")
            last = now
    if pending.strip():
        now = time.monotonic() - started
        lines.append((now, pending.decode("utf-8", "replace").rstrip()))
        emit(f"[{now:7.1f}s +{now - last:5.1f}] {lines[-1][1]}")
    code = process.wait()
    end = time.monotonic() - started
    emit(f"--- exit code {code}, wall time {end:.1f} s, {len(lines)} lines; longest silences:")
    for gap, at, before, after in longest_silences(lines, end):
        emit(f"  {gap:5.1f} s ending at {at:6.1f} s: after {before[:110]!r}")
        emit(f"{'':8}until {after[:110]!r}")
    if log:
        log.close()
    return code


if __name__ == "__main__":
    sys.exit(main())
