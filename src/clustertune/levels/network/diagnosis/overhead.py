"""The cost of a message-passing layer (MPI, PVM) over TCP on the same pair, and when an
MPI library's is out of line."""

from collections.abc import Mapping, Sequence

import numpy as np

from ..analysis import LATENCY_MAX_SIZE_BYTES, MBIT, US, Curve, bandwidth_bps, latency

# MPI over the busy-polling TCP baseline, both sides their best run (overhead()), is out of
# line above these. seeds/002 measured 8 % / 1.8x. Healthy here: OpenMPI lost <= 1 % and
# MPICH 13-21 % at load 5 (3 runs each), latency floors 1.1-2.3x (once 9.5x at load 27:
# hence the re-test). OpenMPI with 4 KiB socket buffers lost 53-57 % at load 5 and
# 89-92 % at load 20-29, every run (docs/network.md, "Diagnosis: MPI overhead ...").
MPI_MAX_LATENCY_RATIO = 5.0
MPI_MAX_BANDWIDTH_LOSS_PCT = 40.0


def overhead(
    uppers: Sequence[Curve],
    lowers: Sequence[Curve],
    bandwidth_min_size: int = 0,
    latency_max_size: int = LATENCY_MAX_SIZE_BYTES,
) -> dict[str, object]:
    """Cost of a layer (MPI, PVM) over the one below it (TCP) on the same host pair.

    Each side is one or more runs, and each side is read at its best run, figure by figure
    (lowest latency, highest bandwidth): the same statistic on both sides, and a run that
    the scheduler slowed does not decide. bandwidth_loss_pct = 100 * (1 - B_upper / B_lower);
    latency_ratio = L_upper / L_lower; ``latency_runs`` and ``bandwidth_runs`` are the
    indices (upper, lower) of the runs read. seeds/002 measured 8 % / 1.8x for MPI and
    16 % / 2.0x for PVM over TCP. ``lowers`` should wait for data the way ``uppers`` do:
    the MPI libraries busy-poll, so their baseline is ct-tcp-pingpong --wait poll (a
    blocking recv adds a wake-up per message).
    """
    readings = [[latency(c, latency_max_size) for c in side] for side in (uppers, lowers)]
    lat_up, lat_low = ([r.value for r in side] for side in readings)
    floor_up, floor_low = (min(float(r.values.min()) for r in side) for side in readings)
    bw_up, bw_low = (
        [bandwidth_bps(c, bandwidth_min_size) for c in side] for side in (uppers, lowers)
    )
    lat = (int(np.argmin(lat_up)), int(np.argmin(lat_low)))
    bw = (int(np.argmax(bw_up)), int(np.argmax(bw_low)))
    return {
        "bandwidth_loss_pct": 100.0 * (1.0 - bw_up[bw[0]] / bw_low[bw[1]]),
        "latency_ratio": lat_up[lat[0]] / lat_low[lat[1]],
        "latency_runs": lat,
        "bandwidth_runs": bw,
        "latency_us": (lat_up[lat[0]] / US, lat_low[lat[1]] / US),
        "latency_floor_us": (floor_up / US, floor_low / US),
        "bandwidth_mbps": (bw_up[bw[0]] / MBIT, bw_low[bw[1]] / MBIT),
    }


def overhead_out_of_line(
    o: Mapping[str, object],
    max_latency_ratio: float = MPI_MAX_LATENCY_RATIO,
    max_bandwidth_loss_pct: float = MPI_MAX_BANDWIDTH_LOSS_PCT,
) -> list[str]:
    """Which figures of an :func:`overhead` against the like-for-like TCP baseline are out
    of line for an MPI library: ``"latency"``, ``"bandwidth"``, neither or both.

    Latency is judged on the floors (the fastest small message of any run on each side),
    not on the latency figures: load slows a busy-polling library a lot (OpenMPI's
    sched_yield at load 15: 201 µs figure, 19 µs floor) but never speeds one up, so a
    cost that every message pays shows in the floor and a loaded machine does not."""
    up, low = o["latency_floor_us"]
    out = ["latency"] if up > max_latency_ratio * low else []
    return out + (["bandwidth"] if o["bandwidth_loss_pct"] > max_bandwidth_loss_pct else [])
