"""Derived figures of the network and message-passing levels (levels 1 and 2 of seeds/002).

Pure functions: ping-pong points in, figures out. No I/O, no clock, no global state.
The figures of one sweep live here; the diagnoses that judge links and hosts by them
(all pairs, loss, curve shapes, MPI overhead, ...) each have a module in ``diagnosis/``.
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

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
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
