"""The pacers' own check (kernels/vcluster/nfq_delay.c): how late each ct-nfq-delay of a
cluster released the packets it let through.

Each daemon counts how late every packet left against the time it was due, in a
histogram of nanoseconds with 8 buckets per power of two; these read it."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from pathlib import Path

from .state import daemon_files

# The form of one daemon's figures (wire_lateness, lateness_delta, record meta "wire_late"):
LATENESS_FIELDS = ("packets", "p50_us", "p99_us", "max_us")
_STATS_WAIT_S = 1.0  # a daemon rewrites its stats within one loop (<= 0.2 s idle) of SIGUSR1


def _bucket_upper_ns(index: int) -> int:
    """The top of histogram bucket ``index`` (see the daemon's header comment)."""
    if index < 8:
        return index + 1
    magnitude, step = divmod(index, 8)
    return (9 + step) << (magnitude - 3)


def summary(hist: list[int], max_ns: int | None = None) -> dict:
    """packets, p50/p99 (the top of the bucket holding them: at most 1/8 over) and max, in
    us, of one lateness histogram; ``max_ns`` (exact) bounds the histogram's top bucket."""
    total = sum(hist)
    result: dict = {"packets": total, "p50_us": None, "p99_us": None, "max_us": None, "hist": hist}
    if not total:
        return result
    top = max(i for i, n in enumerate(hist) if n)
    limit = _bucket_upper_ns(top) if max_ns is None else min(max_ns, _bucket_upper_ns(top))
    for key, fraction in (("p50_us", 0.5), ("p99_us", 0.99)):
        seen = 0
        for i, n in enumerate(hist):
            seen += n
            if seen >= fraction * total:
                result[key] = round(min(_bucket_upper_ns(i), limit) / 1000, 1)
                break
    result["max_us"] = round(limit / 1000, 1)
    return result


def packets_late_by(hist: list[int], at_least_ns: int) -> int:
    """Packets of a lateness histogram that may have been ``at_least_ns`` or more late:
    every bucket whose top reaches it (the bucket holding the bound counted whole; buckets
    8-23 hold no ns and stay empty)."""
    return sum(n for i, n in enumerate(hist) if n and _bucket_upper_ns(i) >= at_least_ns)


def fresh_stats(daemons: dict[str, tuple[Path, int]]) -> dict[str, dict]:
    """Each daemon's stats ({key: (stats file, pid)}) after asking them all (SIGUSR1) to
    rewrite them now; a daemon that does not answer within _STATS_WAIT_S gives its older
    file, one with no file is left out."""
    waiting = {}
    for key, (path, pid) in daemons.items():
        before = path.stat().st_ino if path.exists() else None
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGUSR1)
            waiting[key] = before
    deadline = time.monotonic() + _STATS_WAIT_S
    while waiting and time.monotonic() < deadline:
        for key, before in list(waiting.items()):
            with contextlib.suppress(FileNotFoundError):
                if daemons[key][0].stat().st_ino != before:  # a rename gives a new inode
                    del waiting[key]
        time.sleep(0.005)
    result = {}
    for key, (path, _) in daemons.items():
        with contextlib.suppress(FileNotFoundError, json.JSONDecodeError):
            result[key] = json.loads(path.read_text())
    return result


def wire_lateness(state: dict) -> dict[str, dict]:
    """How late each running ct-nfq-delay of the cluster has released packets so far:
    ``{daemon: {"packets", "p50_us", "p99_us", "max_us", "hist"}}``, the daemon named by
    its host ("host3"; its WAN pacer "host3>wan", its receive pacer "host3<rx", a lossy
    link's "host1>host2"; in the switch, holding the delay of what host3 sends, "host3@sw",
    and of a link's direction "host1>host2@sw").
    Hosts without a daemon (an unshaped link without faults, or the tbf wire without
    faults) are left out. Pass two of these to :func:`lateness_delta` for an interval."""
    daemons = {
        key: (daemon_files(state, key)[1], pid) for key, pid in state.get("delay_pids", {}).items()
    }
    return {
        key: summary(stats["late_hist"], stats.get("late_max_ns"))
        for key, stats in fresh_stats(daemons).items()
        if "late_hist" in stats
    }


def lateness_delta(before: dict[str, dict], after: dict[str, dict]) -> dict[str, dict]:
    """The lateness of the packets released between two :func:`wire_lateness` readings,
    per daemon of ``after`` (one started or restarted between them counts from its start)."""
    result = {}
    for key, late in after.items():
        old = before.get(key, {}).get("hist", [])
        hist = [n - (old[i] if i < len(old) else 0) for i, n in enumerate(late["hist"])]
        if len(old) > len(hist) or any(n < 0 for n in hist):  # a new daemon since ``before``
            hist = late["hist"]
        exact_max = late["max_us"]  # the daemon's whole life: bounds the interval's top bucket
        result[key] = summary(hist, None if exact_max is None else round(exact_max * 1000))
    return result


def without_hist(lateness: dict[str, dict]) -> dict[str, dict]:
    """The figures only (LATENESS_FIELDS), as records and ``vcluster status`` show them."""
    return {key: {f: late[f] for f in LATENESS_FIELDS} for key, late in lateness.items()}
