"""Derived figures of the network and message-passing levels (levels 1 and 2 of seeds/002).

Pure functions: ping-pong points in, figures out. No I/O, no clock, no global state.
Every figure is defined once here and, in words and formulas, in ``docs/figures.md``;
keep the two in step.

Input, as the ping-pong kernels emit it, one dict per message size::

    {"size": bytes, "repeats": R, "trials": n, "t_min_s": .., "t_med_s": .., "t_max_s": ..}

where t is the one-way time (half the round trip). Every figure uses ``t_min_s``: the
fastest of the trials is what the machine can do, slower ones add scheduling noise
(NetPIPE keeps the minimum for the same reason). No figure rests on one size: a size whose
fastest trial was lucky (or unlucky) is one value among those the figure is read from,
and each headline figure carries the spread of those values (:class:`Reading`).

Units: sizes in bytes, times in seconds inside, throughput in bit/s inside;
what is reported is µs, Mbit/s (1e6 bit/s) and bytes.
"""

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import combinations
from math import isfinite

import numpy as np

MBIT = 1e6  # bit/s in one Mbit/s
US = 1e-6  # seconds in one µs

# Latency is read from messages this small (NetPIPE: "messages < 64 bytes").
LATENCY_MAX_SIZE_BYTES = 64
# Through a tbf-shaped link, ping-pong messages below this size are not slowed (the bucket
# refills while the reply travels back), so on the virtual cluster bandwidth is quoted
# only from here up (research/virtual-cluster.md).
TBF_BANDWIDTH_MIN_SIZE_BYTES = 256 * 1024
# Saturation point: where the transfer time has risen this fraction above the latency.
# 0.2 reproduces the saturation points of seeds/002 (figs. 5-7: 139-280 B, i.e. 0.15-0.25
# of latency x bandwidth for TCP, MPI and PVM).
SATURATION_EXCESS = 0.2
# The bandwidth region (seeds/002 §4) starts where the throughput first reaches this
# fraction of the bandwidth; the preferred block range ends there.
BANDWIDTH_REGION_FRACTION = 0.9
# Dip: throughput below this fraction of its envelope ...
DIP_MAX_RATIO = 0.5
# ... where the envelope is at least this fraction of the curve's peak (below it the time
# is latency-dominated and a slow point is scheduling noise, not a throughput collapse).
DIP_MIN_LEVEL = 0.25
# ... over at least this many adjacent sizes.
DIP_MIN_POINTS = 2
# Jagged: at least this many sizes, adjacent or not, below this fraction of their envelope.
# A healthy paced 1 Gbit link had at most 1 such size in 6 sweeps of 1-256 KiB at load
# 4-5, a tbf one 2 (its bucket); 1 % loss 1-4 (docs/network.md).
JAGGED_MAX_RATIO = 0.6
JAGGED_MIN_POINTS = 3
# MPI over the busy-polling TCP baseline, both sides their best run (overhead()), is out of
# line above these. seeds/002 measured 8 % / 1.8x. Healthy here: OpenMPI lost <= 1 % and
# MPICH 13-21 % at load 5 (3 runs each), latency floors 1.1-2.3x (once 9.5x at load 27:
# hence the re-test). OpenMPI with 4 KiB socket buffers lost 53-57 % at load 5 and
# 89-92 % at load 20-29, every run (docs/network.md, "Diagnosis: MPI overhead ...").
MPI_MAX_LATENCY_RATIO = 5.0
MPI_MAX_BANDWIDTH_LOSS_PCT = 40.0
# One direction of a pair's one-way streams below this fraction of the other: asymmetric.
# Healthy 8-host 1 Gbit matrix at load 24: 0.62 at worst; a 100 Mbit transmit side: 0.1.
ASYMMETRY_MAX_RATIO = 0.4


# --------------------------------------------------------------------------- curve


@dataclass(frozen=True)
class Curve:
    """One ping-pong sweep: sizes strictly increasing, one-way times ``t_min`` > 0."""

    size: np.ndarray  # bytes, int64
    time_s: np.ndarray  # one-way time (t_min), s

    @property
    def throughput_bps(self) -> np.ndarray:
        """size * 8 / t_min, bit/s."""
        return self.size * 8.0 / self.time_s

    @property
    def throughput_mbps(self) -> np.ndarray:
        return self.throughput_bps / MBIT


def curve_from_points(points: Sequence[Mapping[str, object]]) -> Curve:
    """Turn kernel points into a :class:`Curve` sorted by size, using ``t_min_s``.

    A size measured more than once keeps its smallest time (the same rule as t_min).
    Raises ValueError naming the offending point for a missing field, a negative or
    non-integer size, a time that is not a positive finite number, or fewer than two
    distinct sizes (no figure can be derived from one size).
    """
    if not points:
        raise ValueError("no points: the sweep measured nothing")
    best: dict[int, float] = {}
    for index, point in enumerate(points):
        where = f"point {index}"
        if not isinstance(point, Mapping):
            raise ValueError(f"{where}: expected a mapping, got {type(point).__name__}")
        for key in ("size", "t_min_s"):
            if key not in point:
                raise ValueError(f"{where}: missing field {key!r}")
        size = point["size"]
        if isinstance(size, bool) or not isinstance(size, int | np.integer) or size < 0:
            raise ValueError(f"{where}: size must be a non-negative integer, got {size!r}")
        where = f"point {index} (size {size})"
        t = point["t_min_s"]
        if isinstance(t, bool) or not isinstance(t, int | float | np.number):
            raise ValueError(f"{where}: t_min_s must be a number, got {t!r}")
        if not (isfinite(t) and t > 0):
            raise ValueError(f"{where}: t_min_s must be a positive finite time, got {t!r}")
        best[int(size)] = min(float(t), best.get(int(size), float("inf")))
    if len(best) < 2:
        raise ValueError(f"only one message size ({next(iter(best))} B): a curve needs two")
    sizes = sorted(best)
    return Curve(
        size=np.array(sizes, dtype=np.int64),
        time_s=np.array([best[s] for s in sizes], dtype=float),
    )


# --------------------------------------------------------------------------- figures


@dataclass(frozen=True)
class Reading:
    """A headline figure and the values it is read from (in the figure's unit inside)."""

    value: float
    values: np.ndarray

    def spread(self, scale: float = 1.0) -> dict[str, float]:
        """min, median and max of the values it is read from, times ``scale``."""
        v = self.values * scale
        return {"min": float(v.min()), "median": float(np.median(v)), "max": float(v.max())}


def latency(curve: Curve, max_size: int = LATENCY_MAX_SIZE_BYTES) -> Reading:
    """Latency: the 0-byte time of the small-message plateau, read robustly (seconds).

    Over the sizes s <= ``max_size``: a Theil-Sen line t = L + k s, k the median of the
    slopes between every two of those sizes, kept between 0 and t / s of the largest size
    measured (for t = L + k s that ratio is L / s + k >= k: a slope above it is scheduling
    noise, a run of slow sizes in the plateau). L is the median over those sizes of
    t(s) - k s, each size's own estimate of the 0-byte time: one size much faster or slower
    than the others moves it by one rank, not to its own value. The values read from are
    those per-size estimates.
    """
    small = curve.size <= max_size
    if not small.any():
        raise ValueError(
            f"no message of at most {max_size} B (smallest is {int(curve.size[0])} B): "
            "latency is undefined, start the sweep at 0 or 1 byte"
        )
    s, t = curve.size[small].astype(float), curve.time_s[small]
    slope = 0.0
    if s.size > 1:
        i, j = np.triu_indices(s.size, 1)
        slope = float(np.median((t[j] - t[i]) / (s[j] - s[i])))
        slope = min(max(slope, 0.0), float(curve.time_s[-1] / curve.size[-1]))
    at_zero = t - slope * s
    return Reading(float(np.median(at_zero)), at_zero)


def latency_s(curve: Curve, max_size: int = LATENCY_MAX_SIZE_BYTES) -> float:
    """:func:`latency`'s value, s."""
    return latency(curve, max_size).value


def latency_us(curve: Curve, max_size: int = LATENCY_MAX_SIZE_BYTES) -> float:
    """:func:`latency`'s value, µs."""
    return latency_s(curve, max_size) / US


def bandwidth(curve: Curve, min_size: int = 0) -> Reading:
    """Bandwidth (saturation throughput): the highest throughput held by two adjacent sizes.

    Over the sizes >= ``min_size``: max over neighbours i, i+1 of min(T_i, T_i+1), bit/s. A
    single too-fast point (a timer glitch) therefore cannot set the bandwidth. Pass
    ``min_size=TBF_BANDWIDTH_MIN_SIZE_BYTES`` on a tbf-shaped virtual cluster. Read from
    the bandwidth region: the throughputs of those sizes from the first one reaching
    ``BANDWIDTH_REGION_FRACTION`` of the bandwidth on.
    """
    keep = curve.size >= min_size
    if keep.sum() < 2:
        raise ValueError(
            f"fewer than two sizes >= {min_size} B (largest is {int(curve.size[-1])} B): "
            "bandwidth is undefined, extend the sweep or lower min_size"
        )
    thr = curve.throughput_bps[keep]
    best = float(np.minimum(thr[:-1], thr[1:]).max())
    region = thr[int(np.argmax(thr >= BANDWIDTH_REGION_FRACTION * best)) :]
    return Reading(best, region)


def bandwidth_bps(curve: Curve, min_size: int = 0) -> float:
    """:func:`bandwidth`'s value, bit/s."""
    return bandwidth(curve, min_size).value


def bandwidth_mbps(curve: Curve, min_size: int = 0) -> float:
    """:func:`bandwidth`'s value, Mbit/s."""
    return bandwidth_bps(curve, min_size) / MBIT


def _crossings(curve: Curve, side: np.ndarray, a: float, b: float) -> np.ndarray:
    """Sizes where ``side`` (one bool per point) flips between neighbours, each where the
    time, straight between the two points, meets the line t = a + b s. Exact for a curve
    made of straight time segments, hence for t = L + 8 s / B."""
    gap = curve.time_s - (a + b * curve.size)
    i = np.flatnonzero(side[1:] != side[:-1])
    s1, s2 = curve.size[i].astype(float), curve.size[i + 1].astype(float)
    return s1 + gap[i] * (s2 - s1) / (gap[i] - gap[i + 1])


def saturation_point(
    curve: Curve,
    excess: float = SATURATION_EXCESS,
    latency_max_size: int = LATENCY_MAX_SIZE_BYTES,
) -> Reading:
    """Saturation point (seeds/002): the size from which the time stays >= (1 + excess) * L.

    Below it the time sits on the latency floor, where it hardly depends on the size and
    varies most; from it on the time grows with the size. For t = L + 8 s / B it is
    excess * L * B / 8 exactly. The crossing is interpolated linearly in time between the
    last point under the threshold and the next one. Read from every size above the
    latency's sizes at which the time crosses the threshold (a curve that rises, falls
    back and rises again crosses it more than once).

    Not determined (ValueError) when the time is still under the threshold at the largest
    size, or when it stays above it from within the sizes the latency is read from: that
    curve has no flat small-message floor to tell a saturation point from (a slow link, or
    a latency that does not describe the small messages).
    """
    if excess <= 0:
        raise ValueError(f"excess must be > 0, got {excess}")
    threshold = (1.0 + excess) * latency_s(curve, latency_max_size)
    above = curve.time_s >= threshold
    if not above[-1]:
        raise ValueError(
            f"the time is not {100 * excess:.0f} % above the latency at the largest size "
            f"({int(curve.size[-1])} B), extend the sweep"
        )
    crossings = _crossings(curve, above, threshold, 0.0)
    point = float(crossings[-1]) if crossings.size else float(curve.size[0])
    floor_top = int(curve.size[curve.size <= latency_max_size][-1])
    if point <= floor_top:
        raise ValueError(
            f"the time stays {100 * excess:.0f} % above the latency from {point:.3g} B on, "
            f"within the sizes the latency is read from (<= {floor_top} B): no flat floor"
        )
    # Crossings on the floor itself are its noise, which the latency's spread shows.
    return Reading(point, crossings[crossings > floor_top])


def saturation_point_bytes(
    curve: Curve,
    excess: float = SATURATION_EXCESS,
    latency_max_size: int = LATENCY_MAX_SIZE_BYTES,
) -> float:
    """:func:`saturation_point`'s value, bytes."""
    return saturation_point(curve, excess, latency_max_size).value


def size_reaching(curve: Curve, throughput_bps: float) -> Reading:
    """The smallest size at which the throughput first reaches ``throughput_bps`` (bytes).

    Interpolated between the last point under the target and the first at or above it,
    with the time linear in size in between (exact for t = L + 8 s / B). Read from every
    size at which the throughput crosses the target. Not determined (ValueError) when the
    throughput never reaches it, or reaches it at the smallest size already (below the
    sweep's resolution).
    """
    thr = curve.throughput_bps
    reached = thr >= throughput_bps
    if not reached.any():
        raise ValueError(
            f"throughput never reaches {throughput_bps / MBIT:.4g} Mbit/s "
            f"(peak {thr.max() / MBIT:.4g} Mbit/s)"
        )
    if reached[0]:
        raise ValueError(
            f"throughput is at {throughput_bps / MBIT:.4g} Mbit/s already at the smallest "
            f"size ({int(curve.size[0])} B)"
        )
    crossings = _crossings(curve, reached, 0.0, 8.0 / throughput_bps)
    return Reading(float(crossings[0]), crossings)


def size_reaching_bytes(curve: Curve, throughput_bps: float) -> float:
    """:func:`size_reaching`'s value, bytes."""
    return size_reaching(curve, throughput_bps).value


def _bandwidth_landmark_bps(curve: Curve, bandwidth_min_size: int) -> float:
    """The bandwidth, when the curve's smaller messages never held more than it.

    Where they did (a tbf bucket passes messages below ``bandwidth_min_size`` unshaped, at
    up to twice the line rate), a fraction of the bandwidth marks no point of this curve's
    rise, so the figures read at one (n½, the end of the preferred block range) are not
    determined (ValueError). Without a ``bandwidth_min_size`` that never happens.
    """
    full = bandwidth_bps(curve, bandwidth_min_size)
    faster = bandwidth_bps(curve)
    if faster > full:
        raise ValueError(
            f"smaller messages ran faster ({faster / MBIT:.4g} Mbit/s) than the bandwidth "
            f"read from >= {bandwidth_min_size} B ({full / MBIT:.4g} Mbit/s)"
        )
    return full


def n_half(curve: Curve, bandwidth_min_size: int = 0) -> Reading:
    """n½: the size at which the throughput first reaches half the bandwidth (L * B / 8 for
    t = L + 8 s / B); not determined where smaller messages beat the bandwidth."""
    return size_reaching(curve, 0.5 * _bandwidth_landmark_bps(curve, bandwidth_min_size))


def n_half_bytes(curve: Curve, bandwidth_min_size: int = 0) -> float:
    """:func:`n_half`'s value, bytes."""
    return n_half(curve, bandwidth_min_size).value


def preferred_block_range(
    curve: Curve,
    bandwidth_min_size: int = 0,
    fraction: float = BANDWIDTH_REGION_FRACTION,
    excess: float = SATURATION_EXCESS,
) -> tuple[float, float]:
    """Preferred block range (seeds/002 §4): saturation point .. size reaching 90 % of bandwidth.

    For t = L + 8 s / B: (excess, fraction / (1 - fraction)) * L * B / 8 = (0.2, 9) * L * B / 8.
    The upper end is never below the lower one.
    """
    low = saturation_point_bytes(curve, excess)
    reach = fraction * _bandwidth_landmark_bps(curve, bandwidth_min_size)
    return low, max(low, size_reaching_bytes(curve, reach))


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


def _envelope_ratios(curve: Curve, min_level: float) -> tuple[np.ndarray, np.ndarray]:
    """Each inner size's throughput over its envelope: min(best throughput at smaller sizes,
    best at larger ones), the level the curve reached before and recovers to after; NaN
    where the envelope is below ``min_level`` x the peak (latency-dominated sizes). Also
    the envelope itself. Sizes 1 .. n-2 of the curve."""
    thr = curve.throughput_bps
    left = np.maximum.accumulate(thr)[:-2]  # best over sizes < i, for i = 1 .. n-2
    right = np.maximum.accumulate(thr[::-1])[::-1][2:]  # best over sizes > i
    envelope = np.minimum(left, right)
    ratio = np.full(envelope.shape, np.nan)
    level = (envelope >= min_level * thr.max()) & (envelope > 0)
    np.divide(thr[1:-1], envelope, out=ratio, where=level)
    return ratio, envelope


def _points(curve: Curve, inner: np.ndarray, envelope: np.ndarray) -> list[dict[str, float]]:
    return [
        {
            "size": int(curve.size[i + 1]),
            "throughput_mbps": float(curve.throughput_bps[i + 1] / MBIT),
            "envelope_mbps": float(envelope[i] / MBIT),
            "depth_ratio": float(curve.throughput_bps[i + 1] / envelope[i]),
        }
        for i in np.flatnonzero(inner)
    ]


def dips(
    curve: Curve,
    max_ratio: float = DIP_MAX_RATIO,
    min_level: float = DIP_MIN_LEVEL,
    min_points: int = DIP_MIN_POINTS,
) -> list[dict[str, float]]:
    """Throughput dips: the faulty-NIC signature of seeds/002 fig. 8.

    A point is in a dip when its throughput is below ``max_ratio`` x its envelope
    (:func:`_envelope_ratios`), the envelope is at least ``min_level`` x the curve's peak,
    and at least ``min_points`` adjacent sizes in a row are so (one slow size alone is
    timing noise, as one fast size is for the bandwidth). A rising or flattening curve
    never dips (its envelope is at most its own value), and neither does a collapse that
    never recovers. Only sizes from the saturation point on can dip (every size when it is
    not determined): below it the time sits on the latency floor, where it varies most
    (seeds/002), and a run of slow sizes there is scheduling noise.
    """
    if len(curve.size) < 3:
        return []
    try:
        floor_end = saturation_point_bytes(curve)
    except ValueError:
        floor_end = 0.0
    ratio, envelope = _envelope_ratios(curve, min_level)
    hit = (ratio < max_ratio) & (curve.size[1:-1] >= floor_end)
    keep = np.zeros_like(hit)
    start = None
    for i, h in enumerate([*hit, False]):  # mark runs of at least min_points hits
        if h and start is None:
            start = i
        elif not h and start is not None:
            keep[start:i] = i - start >= min_points
            start = None
    return _points(curve, keep, envelope)


def jagged(
    curve: Curve,
    max_ratio: float = JAGGED_MAX_RATIO,
    min_level: float = DIP_MIN_LEVEL,
    min_points: int = JAGGED_MIN_POINTS,
) -> list[dict[str, float]]:
    """The sizes of a jagged curve: at least ``min_points`` sizes, adjacent or not, each
    below ``max_ratio`` x its envelope (:func:`_envelope_ratios`) — the saw-tooth of a
    lossy link, whose lost segments cost a timeout at scattered sizes rather than one
    dip. [] when fewer are (one or two slow sizes are scheduling noise on a busy host)."""
    if len(curve.size) < 3:
        return []
    ratio, envelope = _envelope_ratios(curve, min_level)
    hit = ratio < max_ratio
    return _points(curve, hit, envelope) if hit.sum() >= min_points else []


def summarize(
    points: Sequence[Mapping[str, object]], bandwidth_min_size: int = 0, latency_floor: bool = True
) -> dict[str, object]:
    """All figures of one sweep, as the record and the ``net pingpong`` JSON carry them.

    Each headline figure comes with ``<figure>_spread``: min, median and max of the values
    it is read from, in its unit. A figure the curve does not support is None (its spread
    too) and ``unavailable`` names it with the reason; the preferred block range is None
    without a saturation point or a bandwidth. ``latency_floor=False`` is for a time with
    no latency in it (a one-way stream): latency, saturation point and preferred block
    range are then not produced. Raises ValueError only when the points make no curve.
    """
    curve = curve_from_points(points)
    readings: dict[str, tuple[Callable[[], Reading], float]] = {
        "bandwidth_mbps": (lambda: bandwidth(curve, bandwidth_min_size), 1 / MBIT),
        "n_half_bytes": (lambda: n_half(curve, bandwidth_min_size), 1.0),
    }
    if latency_floor:
        readings = {
            "latency_us": (lambda: latency(curve), 1 / US),
            **readings,
            "saturation_point_bytes": (lambda: saturation_point(curve), 1.0),
        }
    figures: dict[str, object] = {}
    missing = []
    for name, (read, scale) in readings.items():
        try:
            reading = read()
        except ValueError as exc:
            figures[name] = figures[f"{name}_spread"] = None
            missing.append(f"{name} not determined: {exc}")
        else:
            figures[name] = reading.value * scale
            figures[f"{name}_spread"] = reading.spread(scale)
    if latency_floor:
        figures["preferred_block_range_bytes"] = None
        if figures["saturation_point_bytes"] is not None and figures["bandwidth_mbps"] is not None:
            try:
                figures["preferred_block_range_bytes"] = list(
                    preferred_block_range(curve, bandwidth_min_size)
                )
            except ValueError as exc:
                missing.append(f"preferred_block_range_bytes not determined: {exc}")
    figures["dips"] = dips(curve)
    if missing:
        figures["unavailable"] = "; ".join(missing)
    return figures


# --------------------------------------------------------------------------- all pairs

Pair = tuple[str, str]
FIGURES = ("bandwidth_mbps", "latency_us")
_WORDS = {"bandwidth_mbps": ("bandwidth", "Mbit/s"), "latency_us": ("latency", "µs")}


@dataclass(frozen=True)
class LinkMatrix:
    """Per-pair figures as n x n matrices: symmetric, NaN on the diagonal and where unmeasured."""

    hosts: tuple[str, ...]
    bandwidth_mbps: np.ndarray
    latency_us: np.ndarray

    def figure(self, name: str) -> np.ndarray:
        return {"bandwidth_mbps": self.bandwidth_mbps, "latency_us": self.latency_us}[name]

    def to_json(self) -> dict[str, object]:
        """Matrices as nested lists, null on the diagonal and for unmeasured pairs."""

        def rows(m: np.ndarray) -> list[list[float | None]]:
            return [[None if np.isnan(v) else float(v) for v in row] for row in m]

        return {
            "hosts": list(self.hosts),
            "bandwidth_mbps": rows(self.bandwidth_mbps),
            "latency_us": rows(self.latency_us),
        }


def _pair_entries(
    hosts: Sequence[str], measurements: Iterable[Mapping[str, object]]
) -> dict[tuple[int, int], dict[str, float]]:
    """Validate measurements {"pair": [a, b], "bandwidth_mbps": x, "latency_us": y}."""
    index = {h: i for i, h in enumerate(hosts)}
    entries: dict[tuple[int, int], dict[str, float]] = {}
    for k, m in enumerate(measurements):
        pair = m.get("pair") if isinstance(m, Mapping) else None
        if not isinstance(pair, Sequence) or isinstance(pair, str) or len(pair) != 2:
            raise ValueError(f"measurement {k}: expected 'pair': [host, host], got {pair!r}")
        a, b = pair
        for h in (a, b):
            if h not in index:
                raise ValueError(f"measurement {k}: unknown host {h!r} (hosts: {list(hosts)})")
        if a == b:
            raise ValueError(f"measurement {k}: pair {a!r}-{b!r} joins a host to itself")
        key = (min(index[a], index[b]), max(index[a], index[b]))
        if key in entries:
            raise ValueError(f"measurement {k}: pair {a}-{b} given twice")
        values = {}
        for name in FIGURES:
            v = m.get(name)
            if isinstance(v, bool) or not isinstance(v, int | float) or not (isfinite(v) and v > 0):
                raise ValueError(f"measurement {k} ({a}-{b}): {name} must be > 0, got {v!r}")
            values[name] = float(v)
        entries[key] = values
    return entries


def link_matrix(hosts: Sequence[str], measurements: Iterable[Mapping[str, object]]) -> LinkMatrix:
    """Build the matrices from per-pair measurements ``{"pair": [a, b], <figure>: value}``.

    A ping-pong measures both directions at once, so the matrices are symmetric; a pair
    given twice (in either order) is an error, as is an unknown host or a value <= 0.
    """
    if len(set(hosts)) != len(hosts):
        raise ValueError(f"duplicate host names in {list(hosts)}")
    if len(hosts) < 2:
        raise ValueError(f"an all-pairs matrix needs at least 2 hosts, got {list(hosts)}")
    n = len(hosts)
    mats = {name: np.full((n, n), np.nan) for name in FIGURES}
    for (i, j), values in _pair_entries(hosts, measurements).items():
        for name, v in values.items():
            mats[name][i, j] = mats[name][j, i] = v
    return LinkMatrix(tuple(hosts), mats["bandwidth_mbps"], mats["latency_us"])


@dataclass(frozen=True)
class Rules:
    """When a link is bad. Both tests must hold, so a small cluster's tiny spread cannot
    turn a few % into a fault, and a large cluster's natural spread is respected.

    - far from the reference: bandwidth < bandwidth_fraction x reference, or
      latency > latency_factor x reference;
    - an outlier: |value - reference| > mad_threshold x 1.4826 x MAD, the MAD taken over
      the links that pass the first test (skipped when that MAD is 0).
    """

    bandwidth_fraction: float = 0.8
    latency_factor: float = 2.0
    mad_threshold: float = 3.5


@dataclass(frozen=True)
class Diagnosis:
    """Outcome of :func:`diagnose`: the flags, the links to re-test, and notes in words."""

    matrix: LinkMatrix
    flagged: list[dict[str, object]]
    suspects: list[Pair]  # every bad link, whether blamed on a host or on the pair
    notes: list[str] = field(default_factory=list)
    rules: Rules = Rules()
    reference: Mapping[str, float] | None = None

    def to_json(self) -> dict[str, object]:
        return {**self.matrix.to_json(), "flagged": self.flagged, "notes": self.notes}


def _far(name: str, value: np.ndarray, ref: float, rules: Rules) -> np.ndarray:
    if name == "bandwidth_mbps":
        return value < rules.bandwidth_fraction * ref
    return value > rules.latency_factor * ref


def _bad_links(name: str, m: np.ndarray, ref: float, rules: Rules) -> np.ndarray:
    """Links far from ``ref`` and outliers of the healthy links' spread (see :class:`Rules`)."""
    measured = ~np.isnan(m)
    far = np.zeros_like(measured)
    far[measured] = _far(name, m[measured], ref, rules)
    healthy = m[measured & ~far]
    mad = float(np.median(np.abs(healthy - np.median(healthy)))) if healthy.size else 0.0
    if mad == 0:
        return far
    return far & (np.abs(np.where(measured, m, ref) - ref) > rules.mad_threshold * 1.4826 * mad)


def _culprits(m: np.ndarray, bad: np.ndarray) -> set[int]:
    """Hosts with at least two measured links, all of them bad."""
    culprits = set()
    for i, row in enumerate(m):
        measured = ~np.isnan(row)
        if measured.sum() >= 2 and bad[i, measured].all():
            culprits.add(i)
    return culprits


def _reference_and_bad_links(name: str, m: np.ndarray, rules: Rules) -> tuple[float, np.ndarray]:
    """The healthy level of a figure, and the bad links judged against it.

    Start from the median over hosts of each host's median link (robust while fewer than
    half of the hosts are bad), then take the median of the links that touch no culprit
    host, and repeat until the culprits no longer change (at most n times): one bad host
    plus one bad cable in four hosts spoils two hosts' medians, not this.
    """
    with np.errstate(all="ignore"):
        scores = [np.nanmedian(row) for row in m if not np.isnan(row).all()]
    ref = float(np.median(scores))
    culprits: set[int] | None = None
    for _ in range(len(m)):
        found = _culprits(m, _bad_links(name, m, ref, rules))
        if found == culprits:
            break
        culprits = found
        keep = np.triu(~np.isnan(m), 1)
        for i in culprits:
            keep[i, :] = keep[:, i] = False
        if keep.any():
            ref = float(np.median(m[keep]))
    return ref, _bad_links(name, m, ref, rules)


def _relative(name: str, value: float, ref: float, against: str) -> str:
    if name == "bandwidth_mbps":
        return f"{100 * value / ref:.0f} % of the {against}"
    return f"{value / ref:.1f}x the {against}"


def diagnose(
    matrix: LinkMatrix,
    rules: Rules | None = None,
    reference: Mapping[str, float] | None = None,
) -> Diagnosis:
    """Find bad links and name the culprit: a host whose links are all bad, or a pair.

    Reference per figure: ``reference[figure]`` if given (e.g. the nominal link rate), else
    the median of the links that touch no culprit host (see :func:`_reference_and_bad_links`;
    a plain median over all pairs would not do: one bad host of four spoils half the
    pairs). A link is bad under :class:`Rules`. A host with at
    least two measured links, all bad, is the culprit and its links are not flagged again;
    a bad link between two hosts not blamed is flagged as the pair (cable, switch port).
    With two hosts there is one link: it is judged only against a given reference, and a
    bad one is flagged as the pair since host and cable cannot be told apart.
    """
    rules = rules or Rules()
    hosts, n = matrix.hosts, len(matrix.hosts)
    iu = np.triu_indices(n, 1)
    flagged_hosts: list[dict[str, object]] = []
    flagged_pairs: list[dict[str, object]] = []
    suspects: set[Pair] = set()
    notes: list[str] = []
    missing = [
        f"{hosts[i]}-{hosts[j]}"
        for i, j in zip(*iu, strict=True)
        if np.isnan(matrix.bandwidth_mbps[i, j])
    ]
    if missing:
        notes.append(f"not measured: {', '.join(missing)}")
    reference = reference or {}
    unjudged = [name for name in FIGURES if name not in reference]
    if n == 2 and unjudged:
        notes.append(
            f"two hosts give one link and nothing to compare its {' and '.join(unjudged)} "
            "with: pass the nominal figures as reference, and add a third host to tell a "
            "bad host from a bad cable"
        )
    for name in FIGURES:
        words, unit = _WORDS[name]
        m = matrix.figure(name)
        if name in reference:
            ref, against = float(reference[name]), "reference"
            bad = _bad_links(name, m, ref, rules)
        elif n == 2:
            continue
        else:
            ref, bad, against = *_reference_and_bad_links(name, m, rules), "median"
        culprits = _culprits(m, bad)
        if name in reference and n >= 3 and len(culprits) == n:
            # every host bad against the nominal figure: no host or cable stands out
            v = float(np.nanmedian(m[iu]))
            flagged_hosts.append(
                {
                    "fabric": list(hosts),
                    "figure": name,
                    "value": v,
                    "median": ref,
                    "reason": f"the whole fabric: {words} {v:.3g} {unit} on every link, "
                    f"{_relative(name, v, ref, against)} — suspect the switch, the "
                    "link settings (speed, duplex) or a load on every host",
                }
            )
            suspects.update((hosts[i], hosts[j]) for i, j in zip(*iu, strict=True))
            continue
        for i in sorted(culprits):
            host = hosts[i]
            measured = ~np.isnan(m[i])
            links = int(measured.sum())
            v = float(np.median(m[i, measured]))
            flagged_hosts.append(
                {
                    "host": host,
                    "figure": name,
                    "value": v,
                    "median": ref,
                    "reason": f"{host}: {words} {v:.3g} {unit} on all {links} of its links, "
                    f"{_relative(name, v, ref, against)} — suspect {host}'s NIC or cable",
                }
            )
        for i, j in zip(*np.nonzero(np.triu(bad, 1)), strict=True):
            suspects.add((hosts[i], hosts[j]))
            if i in culprits or j in culprits:
                continue
            v = float(m[i, j])
            where = (
                "either host's NIC or the cable between them"
                if n == 2
                else "the cable or switch ports between them (neither host is bad on all its links)"
            )
            flagged_pairs.append(
                {
                    "pair": [hosts[i], hosts[j]],
                    "figure": name,
                    "value": v,
                    "median": ref,
                    "reason": f"{hosts[i]}-{hosts[j]}: {words} {v:.3g} {unit}, "
                    f"{_relative(name, v, ref, against)} — suspect {where}",
                }
            )
    return Diagnosis(
        matrix=matrix,
        flagged=flagged_hosts + flagged_pairs,
        suspects=sorted(suspects),
        notes=notes,
        rules=rules,
        reference=reference,
    )


def _flag_key(flag: Mapping[str, object]) -> tuple:
    """What a flag blames (a host, a pair or the fabric) and for which figure."""
    return flag.get("host"), tuple(flag.get("pair", flag.get("fabric", ()))), flag["figure"]


# Healthy links re-measured beside the suspects on hosts that share CPUs (controls): their
# latency on the re-test against the first round's is the re-test's own level.
CONTROL_PAIRS = 3


def controls(first: Diagnosis, count: int = CONTROL_PAIRS) -> list[Pair]:
    """The ``count`` links that were no suspect whose latency was closest to the median
    of those links (typical healthy links), in the order of the hosts."""
    hosts, m = first.matrix.hosts, first.matrix.latency_us
    suspects = set(first.suspects)
    healthy = [
        (hosts[i], hosts[j])
        for i, j in zip(*np.triu_indices(len(hosts), 1), strict=True)
        if not np.isnan(m[i, j]) and (hosts[i], hosts[j]) not in suspects
    ]
    if not healthy:
        return []
    index = {h: i for i, h in enumerate(hosts)}
    value = {p: float(m[index[p[0]], index[p[1]]]) for p in healthy}
    middle = float(np.median(list(value.values())))
    return sorted(sorted(healthy, key=lambda p: abs(value[p] - middle))[:count])


def confirm(
    first: Diagnosis, retest: Iterable[Mapping[str, object]], control: Sequence[Pair] = ()
) -> Diagnosis:
    """Re-test before blaming: keep only the flags the re-measured suspects confirm.

    Each re-measured link keeps the better of its two measurements (higher bandwidth,
    lower latency), so a link stays bad only if it was bad both times; the diagnosis is
    then run again with the same rules and reference. Flags resting on a link that was
    not a first-round suspect are dropped (they were never re-tested), and every first
    flag that did not survive gets a note.

    ``control``: healthy links re-measured with the suspects (:func:`controls`), on hosts
    that share CPUs. There the re-test runs with the ends placed otherwise and at another
    load than the first round, which moves every link's latency alike: a suspect's re-test
    latency is read relative to the controls' (times the median of their first-round
    latencies over the median of their re-test ones), so it is judged against links
    measured the same way. The controls' own figures stay the first round's.
    """
    hosts = first.matrix.hosts
    again = _pair_entries(hosts, retest)
    index = {h: i for i, h in enumerate(hosts)}
    suspect_keys = {tuple(sorted((index[a], index[b]))) for a, b in first.suspects}
    control_keys = {tuple(sorted((index[a], index[b]))) for a, b in control}
    for key in again:
        if key not in suspect_keys | control_keys:
            raise ValueError(f"re-test of {hosts[key[0]]}-{hosts[key[1]]}, which was not a suspect")
    bw, lat = first.matrix.bandwidth_mbps.copy(), first.matrix.latency_us.copy()
    notes = []
    level = 1.0
    measured_controls = [k for k in control_keys if k in again]
    if measured_controls:
        was = float(np.median([lat[k] for k in measured_controls]))
        now = float(np.median([again[k]["latency_us"] for k in measured_controls]))
        level = was / now
        notes.append(
            f"latency re-test read against {len(measured_controls)} healthy links re-measured "
            f"with it: their latency {now:.3g} µs against {was:.3g} µs in the first round"
        )
    for (i, j), v in again.items():
        if (i, j) in control_keys:
            continue
        bw[i, j] = bw[j, i] = max(bw[i, j], v["bandwidth_mbps"])
        lat[i, j] = lat[j, i] = min(lat[i, j], level * v["latency_us"])
    second = diagnose(LinkMatrix(hosts, bw, lat), first.rules, first.reference)

    def tested(flag: Mapping[str, object]) -> bool:
        if "fabric" in flag:
            return len(suspect_keys) == len(hosts) * (len(hosts) - 1) // 2
        if "pair" in flag:
            a, b = flag["pair"]  # type: ignore[misc]
            return (a, b) in first.suspects
        i = index[str(flag["host"])]
        measured = [j for j in range(len(hosts)) if j != i and not np.isnan(bw[i, j])]
        return all(tuple(sorted((i, j))) in suspect_keys for j in measured)

    kept = [f for f in second.flagged if tested(f)]
    ident = [_flag_key(f) for f in kept]
    notes = list(second.notes) + notes
    for f in first.flagged:
        if _flag_key(f) not in ident:
            notes.append(f"not confirmed on re-test: {f['reason']}")
    return Diagnosis(
        matrix=second.matrix,
        flagged=kept,
        suspects=second.suspects,
        notes=notes,
        rules=first.rules,
        reference=first.reference,
    )


def diagnose_with_retest(
    matrix: LinkMatrix,
    remeasure: Callable[[list[Pair]], Iterable[Mapping[str, object]]],
    rules: Rules | None = None,
    reference: Mapping[str, float] | None = None,
    shared_cpus: bool = False,
) -> Diagnosis:
    """:func:`diagnose`, then ``remeasure(suspects)`` and :func:`confirm` if anything was
    bad; with ``shared_cpus`` the re-test measures :func:`controls` beside them."""
    first = diagnose(matrix, rules, reference)
    if not first.suspects:
        return first
    control = controls(first) if shared_cpus else []
    return confirm(first, remeasure(first.suspects + control), control)


# --------------------------------------------------------------------------- packet loss

LOSSY_MIN_RETRANS = 2  # per pair and run: a healthy link (tbf-shaped or real) shows 0


def _lossy(measured: Iterable[Mapping[str, object]]) -> dict[Pair, Mapping[str, object]]:
    """Pairs (in sorted order) whose runs retransmitted at least LOSSY_MIN_RETRANS segments."""
    return {
        tuple(sorted(m["pair"])): m  # type: ignore[misc,arg-type]
        for m in measured
        if isinstance(m.get("retransmissions"), int) and m["retransmissions"] >= LOSSY_MIN_RETRANS  # type: ignore[operator]
    }


def _evidence(pair: Pair, m: Mapping[str, object] | None) -> str:
    if m is None:
        return f"{'-'.join(pair)} no re-test (the run failed: the link went down)"
    segs = m.get("data_segments")
    share = f" of {segs} segments ({100 * m['retransmissions'] / segs:.2g} %)" if segs else ""  # type: ignore[operator]
    return f"{'-'.join(pair)} {m['retransmissions']}{share}"


def _links_of(hosts: Sequence[str], pairs: Iterable[Pair]) -> dict[str, list[Pair]]:
    """Each host's measured links (pairs in sorted order)."""
    links: dict[str, list[Pair]] = {h: [] for h in hosts}
    for a, b in pairs:
        links[a].append((a, b))
        links[b].append((a, b))
    return links


def _hosts_or_links(
    links: Mapping[str, list[Pair]], bad: Collection[Pair]
) -> tuple[dict[str, list[Pair]], list[Pair]]:
    """Who a set of bad links blames: each host with at least two bad links, more than half
    of its own (with the links), and every bad link touching none of those hosts."""
    hosts = {}
    for host, mine in links.items():
        own = [p for p in mine if p in bad]
        if len(own) >= 2 and 2 * len(own) > len(mine):
            hosts[host] = own
    return hosts, [p for p in bad if not set(hosts) & set(p)]


def diagnose_loss(
    hosts: Sequence[str],
    measured: Iterable[Mapping[str, object]],
    remeasure: Callable[[list[Pair]], Iterable[Mapping[str, object]]],
    suspects: Iterable[str] = (),
) -> list[dict[str, object]]:
    """Packet loss from TCP's own retransmission counters, which a marginal cable raises
    long before the throughput of a few sizes shows it.

    The matrix's short runs only select: every link of a host touched by a pair that
    retransmitted is measured again, longer (``remeasure``), and the verdict rests on that
    re-test alone (a handful of retransmissions in a short run is as likely to miss a
    lossy link as a lone burst is to accuse a healthy one). The links of ``suspects`` (the
    hosts of a link seen flapping) are re-tested too: a link down 300 ms a second may
    slip between short runs, a 1-s run does not; and a link of theirs whose re-test could
    not run counts as lossy. A host is the culprit when at least two of its links, and
    more than half, retransmit on the re-test; else each such link is.
    """
    measured = list(measured)
    first = _lossy(measured)
    suspects = set(suspects)
    if not first and not suspects:
        return []
    links = _links_of(hosts, (tuple(sorted(m["pair"])) for m in measured))  # type: ignore[arg-type]
    touched = {h for p in first for h in p} | suspects
    asked = sorted({p for h in touched for p in links[h]})
    again = list(remeasure(asked))
    lossy: dict[Pair, Mapping[str, object] | None] = dict(_lossy(again))
    # a link of a host seen flapping whose long re-test could not even run went down
    # meanwhile: as bad as a lossy one (elsewhere a failed run, e.g. a server that did not
    # start on a busy machine, is no evidence of loss)
    done = {tuple(sorted(m["pair"])) for m in again}  # type: ignore[arg-type]
    lossy |= {p: None for p in asked if p not in done and suspects & set(p)}
    blamed, pairs = _hosts_or_links(links, lossy)
    flags: list[dict[str, object]] = []
    for host, bad in blamed.items():
        counts = ", ".join(_evidence(p, lossy[p]) for p in bad)
        flags.append(
            {
                "host": host,
                "figure": "retransmissions",
                "value": None,
                "median": 0,
                "reason": f"{host}: TCP retransmissions on {len(bad)} of its {len(links[host])} "
                f"links, re-tested ({counts}) — packet loss: suspect {host}'s NIC or cable",
            }
        )
    for pair in pairs:
        m = lossy[pair]
        flags.append(
            {
                "pair": list(pair),
                "figure": "retransmissions",
                "value": None if m is None else m["retransmissions"],
                "median": 0,
                "reason": f"{_evidence(pair, m)} — suspect a link going down and up between them"
                if m is None
                else f"{_evidence(pair, m)} TCP retransmissions, re-tested — "
                "packet loss: suspect the cable or switch ports between them",
            }
        )
    return flags


# --------------------------------------------------------------------------- curve shape


def shape_findings(curve: Curve) -> dict[str, list[dict[str, float]]]:
    """The dips and the jagged sizes of one link's sweep (only those found)."""
    found = {"dips": dips(curve), "jagged": jagged(curve)}
    return {k: v for k, v in found.items() if v}


def _shape_evidence(pair: Pair, found: Mapping[str, list[dict[str, float]]]) -> str:
    points = sorted(
        {(p["size"], p["throughput_mbps"], p["depth_ratio"]) for v in found.values() for p in v}
    )
    where = ", ".join(f"{s} B {t:.0f} Mbit/s ({r:.2f})" for s, t, r in points)
    return f"{'-'.join(pair)} {' and '.join(found)} at {where}"


def diagnose_shapes(
    hosts: Sequence[str],
    curves: Mapping[Pair, Curve],
    remeasure: Callable[[list[Pair]], Mapping[Pair, Curve]],
) -> list[dict[str, object]]:
    """A dip or a jagged curve on a link (the sweep between latency and bandwidth sizes)
    is a finding of its own: the throughput of some mid sizes collapses while the sizes
    around it do not, the lossy-link picture of seeds/002 fig. 8. A link is bad only when
    its re-measured sweep (``remeasure``) shows it again; then, as for loss, a host with at
    least two bad links, more than half of its own, is named, else each link. Each flag's
    evidence lists the sizes: throughput and its ratio to the level around it."""
    first = {p: f for p, c in curves.items() if (f := shape_findings(c))}
    if not first:
        return []
    again = remeasure(sorted(first))
    bad = {p: f for p, c in again.items() if p in first and (f := shape_findings(c))}
    blamed, pairs = _hosts_or_links(_links_of(hosts, curves), bad)
    flags: list[dict[str, object]] = []
    for host, own in blamed.items():
        flags.append(
            {
                "host": host,
                "figure": "dips",
                "value": None,
                "median": None,
                "reason": f"{host}: throughput dips or jags on {len(own)} of its links, re-tested ("
                + "; ".join(_shape_evidence(p, bad[p]) for p in own)
                + f") — suspect {host}'s NIC or cable (packet loss)",
            }
        )
    for pair in pairs:
        flags.append(
            {
                "pair": list(pair),
                "figure": "dips",
                "value": None,
                "median": None,
                "reason": f"{_shape_evidence(pair, bad[pair])}, re-tested — suspect the cable or "
                "switch ports between them (packet loss)",
            }
        )
    return flags


def one_way_grid(hosts: Sequence[str], measured: Iterable[Mapping]) -> list[list] | None:
    """n x n one-way stream throughputs, Mbit/s, row host sending to column host (None
    where unmeasured; None when no pair has them: an MPI matrix)."""
    index = {h: i for i, h in enumerate(hosts)}
    grid: list[list[float | None]] = [[None] * len(hosts) for _ in hosts]
    ways = [w for m in measured for w in (m.get("one_way_mbps") or {}).items()]
    for way, mbps in ways:
        src, dst = way.split(">")
        grid[index[src]][index[dst]] = mbps
    return grid if ways else None


def _slow_way(m: Mapping) -> tuple[str, str, float, float] | None:
    """(sender, receiver, its rate, the other way's) of a pair one of whose directions
    streams below ASYMMETRY_MAX_RATIO x the other; None for a symmetric pair."""
    rates = m.get("one_way_mbps") or {}
    if len(rates) != 2:
        return None
    (slow_way, slow), (_, fast) = sorted(rates.items(), key=lambda kv: kv[1])
    if slow >= ASYMMETRY_MAX_RATIO * fast:
        return None
    src, dst = slow_way.split(">")
    return src, dst, slow, fast


def _ways(w: tuple[str, str, float, float]) -> str:
    src, dst, slow, fast = w
    return f"{src}->{dst} {slow:.1f}, {dst}->{src} {fast:.1f} Mbit/s"


def diagnose_asymmetry(
    hosts: Sequence[str],
    measured: Iterable[Mapping[str, object]],
    remeasure: Callable[[list[Pair]], Iterable[Mapping[str, object]]],
) -> list[dict[str, object]]:
    """One direction of a link much slower than the other (the one-way streams of the TCP
    matrix): a duplex mismatch, a bad transmit or receive side of a port. Suspect pairs
    are streamed again (``remeasure``) and only a direction slow both times counts. A host
    slow in the same role (sending, or receiving) on at least two of its links and more
    than half is blamed for that side; any other such pair is flagged as the pair."""
    measured = list(measured)
    first = {tuple(sorted(m["pair"])): w for m in measured if (w := _slow_way(m))}
    if not first:
        return []
    again = {tuple(sorted(m["pair"])): _slow_way(m) for m in remeasure(sorted(first))}
    slow = {p: w for p, w in again.items() if w and p in first and first[p][:2] == w[:2]}
    links = _links_of(hosts, (tuple(sorted(m["pair"])) for m in measured if m.get("one_way_mbps")))
    flags: list[dict[str, object]] = []
    for host, mine in links.items():
        for end, side in ((0, "transmit"), (1, "receive")):
            own = [p for p in mine if p in slow and slow[p][end] == host]
            if len(own) >= 2 and 2 * len(own) > len(mine):
                flags.append(
                    {
                        "host": host,
                        "figure": "asymmetric",
                        "value": float(np.median([slow[p][2] for p in own])),
                        "median": float(np.median([slow[p][3] for p in own])),
                        "reason": f"{host}: asymmetric: "
                        + "; ".join(_ways(slow[p]) for p in own)
                        + f" (re-tested) — {host}'s {side} side is slow on {len(own)} of its "
                        f"{len(mine)} links: suspect its NIC or switch port ({side} side, a duplex "
                        "mismatch)",
                    }
                )
    blamed = {f["host"] for f in flags}
    for pair, w in slow.items():
        if not blamed & set(w[:2]):
            flags.append(
                {
                    "pair": list(pair),
                    "figure": "asymmetric",
                    "value": w[2],
                    "median": w[3],
                    "reason": f"asymmetric: {_ways(w)} (re-tested) — suspect {w[0]}'s transmit or "
                    f"{w[1]}'s receive side (NIC, cable or switch port, a duplex mismatch)",
                }
            )
    return flags


def pairs_to_hosts(hosts: Sequence[str], flagged: list[dict]) -> tuple[list[dict], list[str]]:
    """Pair flags of any figures that, together, put a host at fault: at least two of its
    links and more than half are flagged (a flapping host2 showed as host2-host3 failing a
    check and host1-host2 retransmitting). Returns the flags with such pairs replaced by
    a flag on their host, and a note for each pair replaced."""
    bad = {tuple(sorted(f["pair"])): f for f in flagged if "pair" in f}
    pairs = list(combinations(sorted(hosts), 2))
    blamed, _ = _hosts_or_links(_links_of(hosts, pairs), bad)
    out = [f for f in flagged if "pair" not in f or not blamed.keys() & set(f["pair"])]
    notes = []
    for host, own in blamed.items():
        figures = [bad[p]["figure"] for p in own]
        out.append(
            {
                "host": host,
                "figure": "flapping" if "flapping" in figures else figures[0],
                "value": None,
                "median": None,
                "reason": f"{host}: {len(own)} of its links flagged ("
                + "; ".join(bad[p]["reason"] for p in own)
                + f") — suspect {host}'s NIC, cable or switch port",
            }
        )
        notes += [f"part of {host}'s finding: {bad[p]['reason']}" for p in own]
    return out, notes


def symptoms(blaming: list[dict], found: list[dict]) -> tuple[list[dict], list[str]]:
    """The flags of ``found`` that blame no host or pair a flag of ``blaming`` already
    blames, and a note for each of the others: that finding's symptom (a lossy or slow
    link's curve jags; a flapping host's links retransmit; a host that could not connect
    only with a flapping host is left out for that host's fault)."""
    blamed = [_blamed(f) for f in blaming if "fabric" not in f]
    kept, notes = [], []
    for f in found:
        peers = set(f.get("peers", ()))
        # that host, or that very pair; or every peer it failed with is the one blamed
        if any(b <= _blamed(f) or (peers and peers <= b) for b in blamed):
            notes.append(f"goes with the finding there: {f['reason']}")
        else:
            kept.append(f)
    return kept, notes


def _blamed(flag: Mapping[str, object]) -> set[str]:
    return {str(flag["host"])} if "host" in flag else set(flag.get("pair", ()))  # type: ignore[arg-type]


# Below this share of the others' (or the nominal) bandwidth a link runs at a lower rate
# (mis-negotiated, shaped: 100 Mbit on a 1 Gbit fabric is 10 %) and drops at its queue;
# above it, with retransmissions, the loss is what slows it (0.1 % loss: ~75 %).
LOWER_RATE_SHARE = 0.5


def with_loss(flagged: list[dict], loss: list[dict]) -> tuple[list[dict], list[str]]:
    """The other figures' flags and the loss flags as one verdict, and notes.

    Which is cause and which symptom where both touch a host or pair: a link at a lower
    rate (bandwidth under LOWER_RATE_SHARE of the median) drops at its queue, so its
    retransmissions are its symptom (on such a host not every link need retransmit: a pair
    verdict is its symptom too); a link slowed less than that, retransmitting, is slowed by
    the loss. Latency flags touching a host blamed for loss are the loss's symptom too: a
    retransmission costs a timeout."""

    def lower_rate(f: Mapping[str, object]) -> bool:
        return f["value"] is not None and f["value"] < LOWER_RATE_SHARE * f["median"]  # type: ignore[operator]

    bandwidth = [f for f in flagged if f["figure"] == "bandwidth_mbps"]
    slow = set().union(*(_blamed(f) for f in bandwidth if lower_rate(f)))
    notes = []
    kept_loss = []
    for f in loss:
        if _blamed(f) & slow:
            notes.append(f"goes with the low bandwidth there: {f['reason']}")
        else:
            kept_loss.append(f)
    lossy_hosts = {f["host"] for f in kept_loss if "host" in f}
    lossy_pairs = [_blamed(f) for f in kept_loss if "pair" in f]
    kept = []
    for f in flagged:
        if f["figure"] == "latency_us" and _blamed(f) & lossy_hosts:
            touched = _blamed(f) & lossy_hosts
            notes.append(
                f"explained by the packet loss at {', '.join(sorted(touched))}: {f['reason']}"
            )
        elif (
            f["figure"] == "bandwidth_mbps"
            and not lower_rate(f)
            and (_blamed(f) & lossy_hosts or _blamed(f) in lossy_pairs)
        ):
            notes.append(f"slowed by the packet loss there: {f['reason']}")
        else:
            kept.append(f)
    return kept_loss + kept, notes


# --------------------------------------------------------------------------- late wire

# Flags that rest on no timing, which a late emulated wire cannot fake: a host that could
# not be reached, a link seen going down (its NIC's carrier counter, failed checks).
UNTIMED_FIGURES = ("reachable", "flapping")
# TCP resends a segment after its retransmission timeout, at least 200 ms on Linux, or on
# duplicate ACKs, which a pacer that keeps the order does not cause; the duplicates the
# receiver reports (DSACK) are not counted (matrix.lost_and_resent). A wire late by less
# cannot make TCP resend.
TCP_MIN_RTO_US = 200_000.0


@dataclass(frozen=True)
class LateWire:
    """How late the emulated wire's worst pacer released packets over the re-tests."""

    p99_us: float
    max_us: float
    load: float


def _could_be_the_wire(flag: Mapping[str, object], late: LateWire) -> bool:
    """Whether a flag's evidence could be the late wire's doing: a latency whose excess
    over the reference is at most the wire's p99 lateness (a one-way time passes one
    pacer each way, so the wire adds at most about that much to it), retransmissions when
    the wire was ever as late as TCP's timeout, and every other figure from timing
    (bandwidth, curve shapes, one-way streams), whose loss a late pacer's CPU starvation
    can cause."""
    figure = flag["figure"]
    if figure in UNTIMED_FIGURES:
        return False
    if figure == "retransmissions":
        return late.max_us >= TCP_MIN_RTO_US
    value, median = flag.get("value"), flag.get("median")
    if figure == "latency_us" and value is not None and median is not None:
        return value - median <= late.p99_us  # type: ignore[operator]
    return True


def judged_on_late_wire(
    flagged: list[dict], late: LateWire | None
) -> tuple[list[dict], list[str], str | None]:
    """The flags that stand when the re-tests ran on an emulated wire that was late, the
    notes for those withheld, and the verdict said instead (None: nothing withheld).

    Every flag from figures was confirmed on a re-test; when the pacers released late
    during it, a flag the lateness could explain (:func:`_could_be_the_wire`) blames no
    host or link: "not judged: the emulated wire was late (p99 N µs, load L)".
    """
    if late is None:
        return flagged, [], None
    withheld = [f for f in flagged if _could_be_the_wire(f, late)]
    if not withheld:
        return flagged, [], None
    verdict = (
        f"not judged: the emulated wire was late (p99 {late.p99_us:.0f} µs, load {late.load:.1f})"
    )
    notes = [f"withheld, the wire was late: {f['reason']}" for f in withheld]
    return [f for f in flagged if f not in withheld], notes, verdict
