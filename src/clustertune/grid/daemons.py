"""Daemons of a virtual grid: started inside a host's network namespace (and, when they
need it, a private UTS namespace named after the host), marked, and stopped by pid.

They outlive the command that starts them (``grid up``), so they are not services of a
run (launch/service.py stops those at the end of a block) and carry none of a job's marks
(a run's watchdog would kill them): their own mark is ``CLUSTERTUNE_GRID=<name>``, which
every process they start inherits (slurmstepd, sshd sessions), so ``grid down`` finds
what a pid file does not name. Starting, checking and stopping a process by pid is
the virtual cluster's (:mod:`clustertune.vcluster.daemons`), for its daemons and these.
"""

from __future__ import annotations

import os
import shlex
import time
from pathlib import Path

from .. import netns
from ..launch import process
from ..vcluster import daemons as lifecycle
from ..vcluster.daemons import alive, stop

MARK = "CLUSTERTUNE_GRID"


def clean_env(name: str, extra: dict[str, str] | None = None) -> dict[str, str]:
    drop = (process.JOB_MARK, process.OWNER_MARK)
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env.update(extra or {})
    env[MARK] = name
    return env


def in_namespace(
    ns: str,
    argv: list[str],
    uts: str | None = None,
    binds: list[tuple[str, str]] = (),
    overlays: list[tuple[str, str]] = (),
) -> list[str]:
    """argv run inside namespace ``ns``; with ``uts``, also with that hostname.

    A daemon (``uts`` given) enters the namespace with nsenter, not ``ip netns exec``: the
    latter mounts a fresh /sys, which hides /sys/fs/cgroup, and slurmd 22.05 will not
    start without it. The namespace's hosts file is bind-mounted as ip would, and in its
    private mount namespace each (source, target) of ``binds`` replaces the target, and
    each (directory, target) of ``overlays`` lays an overlay on it whose writes go to that
    directory (a daemon that writes fixed paths writes under the run directory; an overlay
    where the target holds what others need, such as a home with the checkout in it)."""
    if uts is None:
        return ["ip", "netns", "exec", ns, *argv]
    mounts = [(str(netns.NETNS_ETC / ns / "hosts"), "/etc/hosts"), *binds]
    inner = "".join(f"mount --bind {shlex.quote(s)} {shlex.quote(t)} && " for s, t in mounts)
    for d, t in overlays:
        upper, work = shlex.quote(f"{d}/upper"), shlex.quote(f"{d}/work")
        inner += (
            f"mkdir -p {upper} {work} && mount -t overlay overlay -o "
            f"lowerdir={shlex.quote(t)},upperdir={upper},workdir={work} {shlex.quote(t)} && "
        )
    inner += 'hostname "$0" && exec "$@"'
    return [
        "nsenter",
        f"--net={netns.NETNS_DIR / ns}",
        "unshare",
        "--mount",
        "--uts",
        "sh",
        "-c",
        inner,
        uts,
        *argv,
    ]


def start(
    grid: str,
    ns: str,
    argv: list[str],
    log: Path,
    uts: str | None = None,
    env: dict[str, str] | None = None,
    binds: list[tuple[str, str]] = (),
    overlays: list[tuple[str, str]] = (),
) -> int:
    """Start a daemon in the foreground of its own session; its output goes to ``log``."""
    return lifecycle.start(in_namespace(ns, argv, uts, binds, overlays), log, clean_env(grid, env))


def marked(grid: str) -> list[int]:
    return [p for p in process.marked_pids(MARK, grid) if p != os.getpid() and alive(p)]


def stop_grid(grid: str, pids: list[int]) -> None:
    """Every daemon of the grid and everything carrying its mark."""
    stop(pids)
    for _ in range(3):  # a dying slurmd may still fork; look again
        left = marked(grid)
        if not left:
            return
        stop(left, grace_s=0.5)


def wait_for(what: str, ready, timeout: float, pids: dict[str, int], logs: dict[str, Path]):
    """Poll ``ready()`` until true; a daemon that died or the deadline is an error naming
    it, with the tail of its log."""
    from ..errors import UserError

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if ready():
            return
        for name, pid in pids.items():
            if not alive(pid):
                raise UserError(f"{name} exited before {what}: {tail(logs.get(name))}")
        time.sleep(0.1)
    raise UserError(
        f"{what} not reached within {timeout:.0f} s; "
        + "; ".join(f"{n}: {tail(p)}" for n, p in logs.items())
    )


def tail(path: Path | None, lines: int = 3) -> str:
    if path is None:
        return "(no log)"
    try:
        text = path.read_text(errors="replace").strip().splitlines()[-lines:]
    except OSError:
        return "(no log)"
    return " | ".join(text) or "(empty log)"
