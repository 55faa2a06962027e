"""Processes that outlive the command that starts them: a virtual cluster's packet daemons
and flapping ports (:mod:`.wire`) and a virtual grid's schedulers
(:mod:`clustertune.grid.daemons`). Each runs in a session of its own, so the starting
command's end or Ctrl-C does not reach it; its pid goes into a state file, and it is
stopped by pid."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from pathlib import Path


def start(argv: list[str], log: Path | None = None, env: dict[str, str] | None = None) -> int:
    """Start ``argv`` in a session of its own, its output appended to ``log`` (none:
    dropped), with ``env`` (none: this process's); returns its pid."""
    with log.open("ab") if log else contextlib.nullcontext(subprocess.DEVNULL) as sink:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=sink,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
    return proc.pid


def alive(pid: int) -> bool:
    """Whether ``pid`` still runs, whoever started it. PID 1 may not reap orphans here: a
    zombie counts as gone."""
    with contextlib.suppress(ChildProcessError, OSError):
        if os.waitpid(pid, os.WNOHANG)[0] == pid:  # our child, now reaped
            return False
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def stop(pids: list[int], grace_s: float = 1.0) -> None:
    """SIGTERM (each undoes its effect first), up to ``grace_s`` for all of them together,
    then SIGKILL for any still running."""
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and any(alive(p) for p in pids):
        time.sleep(0.01)
    for pid in pids:
        if alive(pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
