"""What the kernel counts for ``net matrix``: each NIC's carrier changes (its link's downs
and ups, read on every host before and after the matrix) and each TCP run's retransmitted
segments (read by the ping-pong kernel at both ends)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

from ...launch.base import Launcher
from .pingpong import both_ends
from .reach import REACH_WORKERS

# Each NIC's name, its carrier_changes counter (every down and every up of its link, kept
# by the kernel) and "nic" when it is a device (not a bridge, veth or tunnel).
CARRIER_READ = (
    'for d in /sys/class/net/*; do [ -e "$d/device" ] && k=nic || k=-; '
    'echo "${d##*/} $(cat "$d/carrier_changes" 2>/dev/null) $k"; done'
)
CarrierCounts = dict[str, dict[str, int]]


def carrier_changes(launcher: Launcher, hosts: Sequence[str]) -> CarrierCounts:
    """Each host's carrier_changes counters of the NICs the matrix's traffic can use: the
    launcher's interface when it names one (a virtual cluster's eth0), else the hosts'
    devices. A host whose counters cannot be read is left out (no evidence either way)."""
    interface = getattr(launcher, "interface", None)

    def read(host: str) -> dict[str, int] | None:
        done = launcher.run_on_host(host, ["sh", "-c", CARRIER_READ], 10.0)
        if done.returncode != 0:
            return None
        counts = {}
        for line in done.stdout.splitlines():
            m = re.fullmatch(r"(\S+) (\d+) (nic|-)", line.strip())
            if m and (m[1] == interface if interface else m[3] == "nic"):
                counts[m[1]] = int(m[2])
        return counts

    with ThreadPoolExecutor(max_workers=min(len(hosts), REACH_WORKERS)) as pool:
        read_all = zip(hosts, pool.map(read, hosts), strict=True)
        return {h: c for h, c in read_all if c is not None}


def carrier_flags(before: CarrierCounts, after: CarrierCounts) -> list[dict]:
    """A ``flapping`` flag for every host whose link went down (and up) between the two
    reads. Traffic shows a flap only when it is in flight during a down window, which the
    matrix's short runs can slip between; the counter sees every one."""
    flags = []
    for host, now in after.items():
        was = before.get(host, {})
        changed = {
            dev: now[dev] - was[dev]
            for dev in sorted(now.keys() & was.keys())
            if now[dev] > was[dev]
        }
        if changed:
            where = ", ".join(f"{dev} {n}" for dev, n in changed.items())
            flags.append(
                {
                    "host": host,
                    "figure": "flapping",
                    "value": sum(changed.values()),
                    "median": 0,
                    "reason": f"{host}: its link went down and up during the matrix (carrier "
                    f"changes: {where}) — suspect {host}'s NIC, cable or switch port",
                }
            )
    return flags


def tcp_counters(samples: Sequence[dict]) -> dict[str, int | None]:
    """Retransmitted and sent data segments of the runs behind ``samples`` (None: not TCP;
    a run's counters are on its first sample only)."""
    counted = [s for s in samples if s.get("retrans") is not None]
    return {
        "retransmissions": sum(s["retrans"] for s in counted) if counted else None,
        "data_segments": sum(s.get("data_segs") or 0 for s in counted) if counted else None,
    }


def lost_and_resent(detail: dict) -> int | None:
    """Segments both ends retransmitted, less those the receiver reported as duplicates
    (DSACK): on a busy machine a late ACK fires TCP's timers and the segment is sent again
    though nothing was lost — under load that made healthy links look lossy."""
    total = both_ends(detail, "total_retrans")
    return None if total is None else total - (both_ends(detail, "dsack_dups") or 0)


def retransmission_grid(hosts: list[str], measured: list[dict]) -> list[list[int | None]]:
    """n x n TCP retransmissions of each pair's runs (both ends, both sizes; symmetric,
    None where unmeasured): a lossy link retransmits before its throughput shows it."""
    index = {h: i for i, h in enumerate(hosts)}
    grid: list[list[int | None]] = [[None] * len(hosts) for _ in hosts]
    for m in measured:
        i, j = (index[h] for h in m["pair"])
        grid[i][j] = grid[j][i] = m.get("retransmissions")
    return grid
