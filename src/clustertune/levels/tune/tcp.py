"""``clustertune tune tcp``: the TCP socket buffer size for a host pair (seeds/000 table 4).

1. A ping-pong with the system's default buffers (Linux autotuning) gives the one-way
   latency and the bandwidth; the bandwidth-delay product is
   BDP = max(bandwidth, nominal link rate) x round trip (2 x latency).
2. Candidate sizes: powers of two from BDP/4 to 8 x BDP (at least 4 KiB), each a
   ping-pong with ``--sockbuf`` (the network level's sweep: one stored record each).
3. The choice: the smallest size within 3 % of the best bandwidth; if the default reaches
   that too, the default is kept (fixed buffers would only switch autotuning off). Linux
   caps setsockopt at net.core.{r,w}mem_max (and doubles the value asked); when the best
   size's effective buffer was capped, the sysctl lines to raise the caps are printed.
"""

from __future__ import annotations

import math
import uuid
from pathlib import Path

from ...cluster import Cluster
from ...results import Store
from ..network import api as network

# a shorter sweep than the network level's default (one point per octave, no perturbed
# sizes, 3 trials): a buffer size is judged by bandwidth, not by the curve's detail
SHORT = ("--perturbation", "0", "--points-per-octave", "1", "--trials", "3")
MIN_BUF = 4096
WITHIN = 0.97
SWEEP_MAX_SIZE = 1 << 20  # bandwidth, not the largest messages, is what a buffer moves


def candidates(bdp_bytes: float) -> list[int]:
    low = max(MIN_BUF, bdp_bytes / 4)
    first = 1 << max(12, math.ceil(math.log2(low)))
    return [first << i for i in range(6) if (first << i) <= max(8 * bdp_bytes, 4 * first)]


def caps() -> dict[str, int | None]:
    out: dict[str, int | None] = {}
    for name in ("rmem_max", "wmem_max"):
        try:
            out[name] = int(Path(f"/proc/sys/net/core/{name}").read_text())
        except (OSError, ValueError):
            out[name] = None
    return out


def choose(default_bw: float, sweep: list[tuple[int, float]]) -> tuple[int | None, float]:
    """(size or None for the default, its bandwidth)."""
    best = max([default_bw] + [bw for _, bw in sweep])
    if default_bw >= WITHIN * best:
        return None, default_bw
    size, bw = min(((s, b) for s, b in sweep if b >= WITHIN * best), key=lambda t: t[0])
    return size, bw


def tune(cluster: Cluster, store: Store, a: str, b: str, timeout: float | None) -> dict:
    session = uuid.uuid4().hex[:12]
    # a shaped virtual cluster reads bandwidth from messages >= min_size only
    min_size = network.bandwidth_min_size(cluster, a, b)
    largest = (
        max(SWEEP_MAX_SIZE, 1 << (2 * min_size - 1).bit_length()) if min_size else SWEEP_MAX_SIZE
    )
    spec = network.PingpongSpec(
        layer="tcp", a=a, b=b, max_size=largest, timeout=timeout, extra_args=SHORT
    )
    base = network.run_pingpong(cluster, store, spec)
    f = base["figures"]
    if base["status"] != "ok" or not f.get("bandwidth_mbps") or not f.get("latency_us"):
        raise BaseFailed(base)
    nominal = network.pair_rate_bps(cluster, a, b)
    rate_bps = max(f["bandwidth_mbps"] * 1e6, nominal or 0)
    rtt_s = 2 * f["latency_us"] * 1e-6
    bdp = rate_bps / 8 * rtt_s
    sizes = candidates(bdp)
    records = network.run_pingpongs(cluster, store, spec, sizes)
    sweep = [
        (s, r["figures"].get("bandwidth_mbps") or 0.0)
        for s, r in zip(sizes, records, strict=True)
        if r["status"] == "ok"
    ]
    size, bw = choose(f["bandwidth_mbps"], sweep)
    limit = caps()
    effective = {
        s: r["detail"].get("sockbuf_effective_rcv") for s, r in zip(sizes, records, strict=True)
    }
    capped = (
        size is not None
        and (limit["rmem_max"] or 0) > 0
        and 2 * size > 2 * (limit["rmem_max"] or 0)
    )
    lines = [
        f"BDP {bdp / 1024:.1f} KiB = {rate_bps / 1e6:.0f} Mbit/s x RTT {rtt_s * 1e6:.0f} us "
        f"(latency {f['latency_us']:.1f} us one way; default buffers {f['bandwidth_mbps']:.0f} Mbit/s)"
    ]
    lines += [
        f"sockbuf {s // 1024:>6} KiB: {b_:8.1f} Mbit/s (effective rcv {effective.get(s)})"
        for s, b_ in sweep
    ]
    if size is None:
        lines.append(
            f"keep the default (autotuning): {bw:.0f} Mbit/s, within {100 - 100 * WITHIN:.0f} % of the best"
        )
    else:
        lines.append(
            f"choose {size // 1024} KiB: {bw:.0f} Mbit/s, the smallest within {100 - 100 * WITHIN:.0f} % of the best"
        )
    sysctl = []
    if size is not None and capped:
        sysctl = [f"sysctl -w net.core.rmem_max={size}", f"sysctl -w net.core.wmem_max={size}"]
    return {
        "session": session,
        "pair": [a, b],
        "bdp_bytes": bdp,
        "rtt_s": rtt_s,
        "rate_bps": rate_bps,
        "default_mbps": f["bandwidth_mbps"],
        "sweep": sweep,
        "sockbuf": size,
        "mbps": bw,
        "caps": limit,
        "sysctl": sysctl,
        "lines": lines,
        "runs": [base["id"]] + [r["id"] for r in records],
    }


class BaseFailed(Exception):
    """The default-buffer ping-pong failed: a failed measurement (the command exits 1, as
    any run that is not ok), not bad input (exit 2)."""

    def __init__(self, record: dict):
        self.record = record
        super().__init__(
            f"the default-buffer ping-pong (run {record['id']}) gave no bandwidth: "
            f"{(record['error'] or record['status']).splitlines()[0]}"
        )
