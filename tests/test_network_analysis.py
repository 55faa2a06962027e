"""Derived figures of the network level on synthetic curves whose answers are known, and
on stored sweeps (tests/data/network: measured, or measured and then edited, each file
says which) whose figures are pinned.

Most synthetic curves follow the model t(s) = L + 8 s / B (one-way time, s in bytes, B in
bit/s), for which latency = L, bandwidth -> B, n½ = L B / 8 bytes, saturation point =
0.2 L B / 8 and 90 % of bandwidth at 9 L B / 8.
"""

import json
import xml.etree.ElementTree as ET
from itertools import combinations
from pathlib import Path

import numpy as np
import pytest

from clustertune.levels.network import analysis as na
from clustertune.levels.network import pingpong, plots, section
from clustertune.levels.network.diagnosis import blame, late_wire, links, loss, overhead, shapes
from clustertune.units import payload_rate_bps

L = 50e-6  # s
B = 1e9  # bit/s
LB = L * B / 8  # bytes: n½ of the model (6250 B)


def sweep_sizes(max_size: int = 8 * 2**20, zero: bool = True) -> list[int]:
    """Powers of two with NetPIPE's ±3 byte perturbations, as the kernels sweep."""
    sizes = {0} if zero else set()
    p = 1
    while p <= max_size:
        sizes.update(s for s in (p - 3, p, p + 3) if s >= 1)
        p *= 2
    return sorted(sizes)


def model_points(latency=L, bandwidth=B, sizes=None, noise=0.0, seed=0, factor=None):
    """Kernel-style points for t = latency + 8 s / bandwidth, times multiplied by
    (1 + noise * N(0,1)) and by ``factor(size)`` if given."""
    rng = np.random.default_rng(seed)
    points = []
    for s in sizes if sizes is not None else sweep_sizes():
        t = latency + 8 * s / bandwidth
        t *= 1 + noise * rng.standard_normal() if noise else 1
        t *= factor(s) if factor else 1
        points.append({"size": s, "repeats": 10, "t_min_s": t, "t_med_s": t, "t_max_s": t})
    return points


def model_curve(**kw) -> na.Curve:
    return na.curve_from_points(model_points(**kw))


# --------------------------------------------------------------------------- curve


def test_curve_sorted_from_t_min_and_duplicates_keep_the_fastest():
    points = [
        {"size": 1024, "t_min_s": 3e-5, "t_med_s": 9.0},
        {"size": 0, "t_min_s": 1e-5},
        {"size": 1024, "t_min_s": 2e-5},
    ]
    c = na.curve_from_points(points)
    assert c.size.tolist() == [0, 1024]
    assert c.time_s.tolist() == [1e-5, 2e-5]
    assert c.throughput_mbps[1] == pytest.approx(1024 * 8 / 2e-5 / 1e6)


@pytest.mark.parametrize(
    ("points", "message"),
    [
        ([], "no points"),
        ([{"size": 8, "t_min_s": 1e-5}], "only one message size"),
        ([{"size": 8, "t_min_s": 1e-5}, {"size": 8, "t_min_s": 2e-5}], "only one message size"),
        ([{"size": 0, "t_min_s": 1e-5}, {"size": 8, "t_min_s": 0.0}], r"point 1 \(size 8\)"),
        ([{"size": 0, "t_min_s": 1e-5}, {"size": 8, "t_min_s": -1e-6}], "positive finite"),
        ([{"size": 0, "t_min_s": 1e-5}, {"size": 8, "t_min_s": float("nan")}], "positive"),
        ([{"size": -1, "t_min_s": 1e-5}, {"size": 8, "t_min_s": 1e-5}], "non-negative integer"),
        ([{"size": 1.5, "t_min_s": 1e-5}, {"size": 8, "t_min_s": 1e-5}], "non-negative integer"),
        ([{"size": 0}, {"size": 8, "t_min_s": 1e-5}], "missing field 't_min_s'"),
        ([{"size": 0, "t_min_s": "1"}, {"size": 8, "t_min_s": 1e-5}], "must be a number"),
    ],
)
def test_bad_points_raise_clear_value_errors(points, message):
    with pytest.raises(ValueError, match=message):
        na.curve_from_points(points)


# --------------------------------------------------------------------------- figures


def test_latency_is_the_zero_byte_time():
    assert na.latency_us(model_curve()) == pytest.approx(L * 1e6, rel=1e-12)


def test_latency_is_the_zero_byte_time_without_a_zero_byte_point():
    """The plateau's line is read at 0 B (seeds/002's x-intercept), not at 1 B."""
    c = model_curve(bandwidth=10e6, sizes=sweep_sizes(zero=False))
    assert na.latency_s(c) == pytest.approx(L, rel=1e-9)
    spread = na.latency(c).spread(1 / na.US)
    assert spread == pytest.approx({"min": 50, "median": 50, "max": 50}, rel=1e-9)


def test_latency_is_the_plateau_not_one_fast_size():
    """One size far faster than the others (the 10.8 µs of a 30 µs plateau) moves the
    median by one rank, not to its own value; the spread shows it."""
    points = model_points(bandwidth=100e6)
    points[1]["t_min_s"] = 0.2 * L  # the 1-byte point
    reading = na.latency(na.curve_from_points(points))
    assert reading.value == pytest.approx(L, rel=1e-9)
    assert reading.spread()["min"] == pytest.approx(0.2 * L - 8 / 100e6, rel=1e-9)
    assert reading.spread()["median"] == reading.value


def test_latency_slope_never_exceeds_the_largest_messages_time_per_byte():
    """A run of slow sizes inside the plateau makes a steep Theil-Sen slope; it is capped
    at t / s of the largest message, so no size's 0-byte estimate goes negative."""
    points = model_points(latency=10e-6, bandwidth=100e6)
    for p in points:
        if 16 <= p["size"] <= 40:
            p["t_min_s"] += 30e-6  # other jobs on the box
    c = na.curve_from_points(points)
    reading = na.latency(c)
    assert reading.spread()["min"] > 0
    assert reading.value == pytest.approx(10e-6, rel=0.25)


def test_latency_needs_a_small_message():
    c = model_curve(sizes=[1024, 4096])
    with pytest.raises(ValueError, match="latency is undefined"):
        na.latency_s(c)


def test_bandwidth_is_the_asymptote():
    assert na.bandwidth_mbps(model_curve()) == pytest.approx(B / 1e6, rel=1e-3)


def test_bandwidth_ignores_a_single_too_fast_point():
    points = model_points()
    points[-10]["t_min_s"] /= 3  # a timer glitch: one point three times too fast
    assert na.bandwidth_mbps(na.curve_from_points(points)) == pytest.approx(1000, rel=1e-3)


def tbf_factor(s: int) -> float:
    """Token-bucket artefact: messages below 256 KiB pass at up to 1.8x the line rate."""
    return 1 / 1.8 if 1024 <= s < 64 * 1024 else (0.75 if 64 * 1024 <= s < 256 * 1024 else 1)


def test_bandwidth_min_size_skips_the_tbf_artefact():
    c = model_curve(bandwidth=100e6, factor=tbf_factor)
    assert na.bandwidth_mbps(c) > 150  # the artefact, what min_size is for
    assert na.bandwidth_mbps(c, min_size=na.TBF_BANDWIDTH_MIN_SIZE_BYTES) == pytest.approx(
        100, rel=1e-3
    )
    with pytest.raises(ValueError, match="fewer than two sizes"):
        na.bandwidth_mbps(c, min_size=2**30)


def test_saturation_point_is_excess_times_latency_times_bandwidth():
    c = model_curve()
    assert na.saturation_point_bytes(c) == pytest.approx(0.2 * LB, rel=1e-9)
    assert na.saturation_point_bytes(c, excess=0.5) == pytest.approx(0.5 * LB, rel=1e-9)


def test_saturation_point_ignores_noise_on_the_latency_floor():
    points = model_points()
    points[3]["t_min_s"] *= 1.5  # one slow tiny message: still the floor after it
    assert na.saturation_point_bytes(na.curve_from_points(points)) == pytest.approx(
        0.2 * LB, rel=1e-9
    )


def test_saturation_point_needs_a_long_enough_sweep():
    c = model_curve(sizes=[0, 1, 2, 4, 8])
    with pytest.raises(ValueError, match="extend the sweep"):
        na.saturation_point_bytes(c)


def test_saturation_point_not_determined_within_the_latency_sizes():
    """A 10 Mbit link with 30 µs latency: 0.2 L B / 8 = 7.5 B, inside the sizes the latency
    is read from; that curve has no flat floor to tell a saturation point from."""
    c = model_curve(latency=30e-6, bandwidth=10e6, sizes=sweep_sizes(2**20))
    with pytest.raises(ValueError, match="no flat floor"):
        na.saturation_point_bytes(c)
    s = na.summarize(model_points(latency=30e-6, bandwidth=10e6, sizes=sweep_sizes(2**20)))
    assert s["saturation_point_bytes"] is None and s["saturation_point_bytes_spread"] is None
    assert s["preferred_block_range_bytes"] is None
    assert "saturation_point_bytes not determined: the time stays 20 % above" in s["unavailable"]
    assert s["latency_us"] == pytest.approx(30) and s["n_half_bytes"] == pytest.approx(37.5, 1e-2)


# seeds/002 figs. 5-7: (bandwidth Mbit/s, latency ms, saturation point B) per connection.
PAPER = [
    (89.75, 0.069, 139),
    (82.67, 0.123, 262),
    (75.67, 0.140, 200),
    (89.75, 0.064, 140),
    (82.76, 0.118, 260),
    (75.39, 0.134, 200),
    (89.76, 0.057, 140),
    (82.66, 0.108, 280),
    (75.66, 0.123, 200),
]


@pytest.mark.parametrize(("mbps", "ms", "published"), PAPER)
def test_saturation_point_matches_seeds_002_tables(mbps, ms, published):
    """The 20 % excess reproduces the paper's published points within their reading error."""
    c = model_curve(latency=ms * 1e-3, bandwidth=mbps * 1e6, sizes=sweep_sizes(2**20))
    assert 0.75 < na.saturation_point_bytes(c) / published < 1.35


def test_n_half_is_latency_times_bandwidth():
    c = model_curve()
    assert na.size_reaching_bytes(c, B / 2) == pytest.approx(LB, rel=1e-12)
    # the measured bandwidth is B (1 - LB / 8 MiB), 0.07 % short of the asymptote
    assert na.n_half_bytes(c) == pytest.approx(LB, rel=2e-3)


def test_size_reaching_an_impossible_throughput():
    with pytest.raises(ValueError, match="never reaches"):
        na.size_reaching_bytes(model_curve(), 2 * B)
    with pytest.raises(ValueError, match="already at the smallest size"):
        na.size_reaching_bytes(model_curve(sizes=[1024, 4096]), 1e3)


def test_n_half_not_determined_where_smaller_messages_beat_the_bandwidth():
    """On a tbf-shaped link small messages run at up to 1.8x the line rate: half the
    bandwidth read from the large ones marks nothing on that curve's rise."""
    c = model_curve(bandwidth=100e6, factor=tbf_factor)
    with pytest.raises(ValueError, match=r"smaller messages ran faster \(176.6 Mbit/s\)"):
        na.n_half_bytes(c, na.TBF_BANDWIDTH_MIN_SIZE_BYTES)
    with pytest.raises(ValueError, match="smaller messages ran faster"):
        na.preferred_block_range(c, na.TBF_BANDWIDTH_MIN_SIZE_BYTES)
    assert na.n_half_bytes(model_curve(bandwidth=100e6)) == pytest.approx(625, rel=2e-3)


def test_preferred_block_range():
    low, high = na.preferred_block_range(model_curve())
    assert low == pytest.approx(0.2 * LB, rel=1e-9)
    assert high == pytest.approx(9 * LB, rel=1e-2)


def test_overhead_of_a_synthetic_mpi_layer():
    tcp = model_curve()
    mpi = model_curve(latency=1.8 * L, bandwidth=0.92 * B)
    pvm = model_curve(latency=2.0 * L, bandwidth=0.84 * B)
    o = overhead.overhead([mpi], [tcp])
    assert o["bandwidth_loss_pct"] == pytest.approx(8.0, abs=0.05)
    assert o["latency_ratio"] == pytest.approx(1.8, rel=1e-9)
    o = overhead.overhead([pvm], [tcp])
    assert o["bandwidth_loss_pct"] == pytest.approx(16.0, abs=0.05)
    assert o["latency_ratio"] == pytest.approx(2.0, rel=1e-9)


def test_overhead_reads_both_sides_at_their_best_run_figure_by_figure():
    """The same statistic on both sides: the lowest latency and the highest bandwidth of
    each side's runs, whichever runs they come from."""
    tcps = [model_curve(latency=2 * L), model_curve(bandwidth=0.5 * B)]
    mpis = [
        model_curve(latency=1.8 * L, bandwidth=0.8 * B),
        model_curve(latency=3 * L, bandwidth=0.92 * B),
    ]
    o = overhead.overhead(mpis, tcps)
    assert o["latency_runs"] == (0, 1) and o["bandwidth_runs"] == (1, 0)
    assert o["latency_ratio"] == pytest.approx(1.8, rel=1e-9)
    loss_pct = 100 * (1 - na.bandwidth_bps(mpis[1]) / na.bandwidth_bps(tcps[0]))
    assert o["bandwidth_loss_pct"] == pytest.approx(loss_pct, rel=1e-12)
    assert loss_pct == pytest.approx(8.0, abs=0.1)


def dip_factor(s: int) -> float:
    """seeds/002 fig. 8: throughput collapses to 1/8 from 20 KB and recovers at 200 KB."""
    return 8.0 if 20_000 <= s < 200_000 else 1.0


def test_dip_found_exactly_where_throughput_collapses():
    found = na.dips(model_curve(bandwidth=100e6, factor=dip_factor))
    expected = [s for s in sweep_sizes() if 20_000 <= s < 200_000]
    assert [d["size"] for d in found] == expected
    for d in found:
        assert d["depth_ratio"] < 0.2
        assert d["throughput_mbps"] == pytest.approx(d["depth_ratio"] * d["envelope_mbps"])


@pytest.mark.parametrize("seed", range(20))
def test_no_dip_on_a_clean_curve_with_noise(seed):
    assert na.dips(model_curve(noise=0.03, seed=seed)) == []


def test_no_dip_on_a_monotone_curve_nor_on_the_tbf_bump():
    assert na.dips(model_curve()) == []
    assert na.dips(model_curve(bandwidth=100e6, factor=tbf_factor)) == []


def test_one_slow_size_alone_is_not_a_dip():
    points = model_points()
    points[-20]["t_min_s"] *= 3
    assert na.dips(na.curve_from_points(points)) == []
    points[-21]["t_min_s"] *= 3
    assert [d["size"] for d in na.dips(na.curve_from_points(points))] == [
        points[-21]["size"],
        points[-20]["size"],
    ]
    assert na.dips(na.curve_from_points(points), min_points=3) == []


def test_no_dip_for_a_collapse_that_never_recovers():
    c = model_curve(factor=lambda s: 10.0 if s > 2**20 else 1.0)
    assert na.dips(c) == []


def test_summarize_gives_the_json_figures():
    s = na.summarize(model_points(bandwidth=100e6, factor=dip_factor))
    assert s["latency_us"] == pytest.approx(50)
    assert s["bandwidth_mbps"] == pytest.approx(100, rel=1e-3)
    assert s["saturation_point_bytes"] == pytest.approx(0.2 * L * 100e6 / 8)
    assert s["preferred_block_range_bytes"][0] == s["saturation_point_bytes"]
    assert len(s["dips"]) > 0
    assert "unavailable" not in s


def test_every_headline_figure_carries_its_spread():
    s = na.summarize(model_points())
    for name in ("latency_us", "bandwidth_mbps", "saturation_point_bytes", "n_half_bytes"):
        spread = s[f"{name}_spread"]
        assert set(spread) == {"min", "median", "max"}
        assert spread["min"] <= spread["median"] <= spread["max"]
    assert s["latency_us_spread"]["median"] == s["latency_us"]  # the latency is that median
    # the bandwidth region: from the first size at 90 % of the bandwidth to the end
    assert 900 <= s["bandwidth_mbps_spread"]["min"] < 950
    assert s["bandwidth_mbps_spread"]["max"] == pytest.approx(s["bandwidth_mbps"], rel=1e-3)
    # one crossing each on a clean curve
    assert s["saturation_point_bytes_spread"] == pytest.approx(
        dict.fromkeys(("min", "median", "max"), s["saturation_point_bytes"])
    )
    assert s["n_half_bytes_spread"]["min"] == s["n_half_bytes"]


def test_a_stream_gets_no_latency_figures():
    """A stream's t amortises one ack over R messages: no latency, hence no saturation
    point or preferred block range; its bandwidth and n½ stand."""
    figures = pingpong.derive_for(0, "stream")(model_points(), {"verification": "passed"})
    for name in (
        "latency_us",
        "latency_us_spread",
        "saturation_point_bytes",
        "preferred_block_range_bytes",
    ):
        assert name not in figures
    assert figures["bandwidth_mbps"] == pytest.approx(1000, rel=1e-3)
    assert figures["n_half_bytes"] == pytest.approx(LB, rel=2e-3)


# --------------------------------------------------------------------------- stored sweeps

DATA = Path(__file__).parent / "data" / "network"


def stored(name: str) -> dict:
    """A stored sweep: what it is, how it was measured, its edits, its samples."""
    return json.loads((DATA / name).read_text())


def stored_figures(name: str) -> dict:
    d = stored(name)
    return na.summarize(d["samples"], d["bandwidth_min_size_bytes"])


@pytest.mark.parametrize("path", sorted(DATA.glob("*.json")), ids=lambda p: p.name)
def test_stored_sweeps_say_what_they_are_and_mark_their_edits(path):
    d = json.loads(path.read_text())
    assert d["what"] and d["measured"] and d["kernel_command"] and d["edits"]
    synthetic = d["edits"].startswith("synthetic")
    assert synthetic == ("SYNTHETIC" in d["what"]) == ("SYNTHETIC" in path.read_text())
    assert synthetic or d["edits"].startswith("none")


TBF_NO_N_HALF = None  # tbf-shaped: small messages beat the bandwidth, n½ is not determined
PINS = {  # file: latency µs, bandwidth Mbit/s, saturation point B, n½ B
    "tcp-100mbit-tbf.json": (12.37, 100.71, 307.8, TBF_NO_N_HALF),
    "tcp-1gbit-tbf.json": (18.34, 1007.2, 4476, TBF_NO_N_HALF),
    "tcp-100mbit-tbf-disturbed.json": (13.58, 100.47, 362.5, TBF_NO_N_HALF),
    "tcp-100mbit-tbf-outlier-1B.json": (31.09, 100.62, 388.7, TBF_NO_N_HALF),
    "tcp-loopback.json": (8.42, 45423, 32769, 26767),
}


@pytest.mark.parametrize(("name", "pins"), PINS.items())
def test_figures_of_stored_sweeps(name, pins):
    s = stored_figures(name)
    latency, bandwidth, saturation, n_half = pins
    assert s["latency_us"] == pytest.approx(latency, rel=1e-3)
    assert s["bandwidth_mbps"] == pytest.approx(bandwidth, rel=1e-3)
    assert s["saturation_point_bytes"] == pytest.approx(saturation, rel=1e-3)
    assert s["saturation_point_bytes_spread"]["min"] > na.LATENCY_MAX_SIZE_BYTES
    if n_half is None:
        assert s["n_half_bytes"] is None and s["preferred_block_range_bytes"] is None
        assert "n_half_bytes not determined: smaller messages ran faster" in s["unavailable"]
    else:
        assert s["n_half_bytes"] == pytest.approx(n_half, rel=1e-3)
        assert "unavailable" not in s
    assert s["dips"] == []


def test_one_fast_byte_does_not_make_the_latency():
    """The issue's sweep: 1 B at 10.8 µs, 2-64 B at 27.8-37.0 µs (NetPIPE: 30.6 µs). The
    minimum of minima said 10.8 µs and a saturation point of 1.1 B."""
    d = stored("tcp-100mbit-tbf-outlier-1B.json")
    small = [p["t_min_s"] for p in d["samples"] if p["size"] <= 64]
    assert min(small) == 10.8e-6 and sorted(small)[1] == 27.8e-6  # the shape, as stored
    s = stored_figures("tcp-100mbit-tbf-outlier-1B.json")
    assert 28 < s["latency_us"] < 37
    assert s["latency_us_spread"]["min"] == pytest.approx(10.8, abs=0.05)  # shown, not used
    assert s["latency_us_spread"]["max"] == pytest.approx(37.0, abs=0.05)
    assert s["saturation_point_bytes"] > 300


def test_scheduling_noise_on_the_latency_floor_is_no_dip():
    """Measured: other jobs slowed 91-256 B to 35-48 µs (floor 10-13 µs). Their throughput
    is under half its envelope, but they lie below the saturation point."""
    d = stored("tcp-100mbit-tbf-disturbed.json")
    slow = [p["size"] for p in d["samples"] if 91 <= p["size"] <= 256 and p["t_min_s"] > 30e-6]
    assert len(slow) >= 8
    s = stored_figures("tcp-100mbit-tbf-disturbed.json")
    assert s["dips"] == [] and s["saturation_point_bytes"] > 256
    assert s["latency_us_spread"]["min"] > 0  # the slow run of sizes does not tilt the floor


def test_dips_of_a_lossy_collapse_and_figures_that_ignore_it():
    """1 KiB-256 KiB collapsed 4-12x (a synthetic edit of the healthy 100 Mbit sweep)."""
    d = stored("tcp-100mbit-tbf-lossy-collapse.json")
    s = stored_figures("tcp-100mbit-tbf-lossy-collapse.json")
    clean = stored_figures("tcp-100mbit-tbf.json")
    collapsed = [p["size"] for p in d["samples"] if 1024 <= p["size"] < 256 * 1024]
    assert [x["size"] for x in s["dips"]] == collapsed
    assert all(x["depth_ratio"] < 0.5 for x in s["dips"])
    for name in ("latency_us", "bandwidth_mbps", "saturation_point_bytes"):
        assert s[name] == clean[name]


def test_a_cut_off_sweep_keeps_its_latency_and_says_what_is_not_determined():
    d = stored("tcp-100mbit-tbf-cut-at-259B.json")
    derive = pingpong.derive_for(d["bandwidth_min_size_bytes"])
    figures = derive(d["samples"], None)  # incomplete: no result line
    assert figures["latency_us"] == pytest.approx(12.37, rel=1e-3)
    assert figures["saturation_point_bytes"] is None and figures["bandwidth_mbps"] is None
    assert (
        "saturation_point_bytes not determined: the time is not 20 % above the latency at "
        "the largest size (259 B), extend the sweep" in figures["unavailable"]
    )
    assert (
        "bandwidth_mbps not determined: fewer than two sizes >= 262144 B" in figures["unavailable"]
    )
    with pytest.raises(ValueError, match="bandwidth_mbps not determined"):
        derive(d["samples"], {"verification": "passed"})  # a finished sweep must have both


def record_of(run_id: int, samples: list[dict], min_size: int = 0, **params) -> dict:
    """A stored ping-pong record as the report and the text output read it."""
    p = {
        "command": "pingpong",
        "layer": "tcp",
        "mode": "pingpong",
        "mpi": None,
        "between": ["host0", "host1"],
        "sockbuf": None,
        "nagle": False,
        "wait": None,
        **params,
    }
    figures = pingpong.derive_for(min_size, p["mode"])(samples, None)
    return {
        "id": run_id,
        "status": "ok",
        "error": None,
        "samples": samples,
        "params": p,
        "meta": {"cluster": {"name": "lab", "link_bps": {}}, "hosts": ["host0", "host1"]},
        "figures": figures,
    }


def test_report_and_text_show_spreads_and_what_is_not_determined():
    d = stored("tcp-100mbit-tbf-outlier-1B.json")
    r = record_of(7, d["samples"], d["bandwidth_min_size_bytes"])
    html = section._pingpong_table([r])
    assert "31.1 (10.8–37.0)" in html  # latency and the range it is read from
    assert (
        "not determined" in html and "<i>n½, preferred block range</i> of run(s) 7: smaller" in html
    )
    text = pingpong.run_text(r)
    assert "latency          31.1 µs  (10.8 .. 37.0, median 31.1)" in text
    assert "n½               n/a" in text and "  not determined: n_half_bytes" in text
    doc = pingpong.run_json(r)
    assert doc["latency_us_spread"]["median"] == doc["latency_us"]
    assert doc["n_half_bytes"] is None and doc["unavailable"].startswith("n_half_bytes")
    stream = record_of(8, d["samples"], d["bandwidth_min_size_bytes"], mode="stream")
    assert "latency_us" not in stream["figures"]
    row = section._pingpong_table([stream]).split("<tbody>")[1]
    assert "<td>stream</td><td>host0-host1</td><td></td><td></td><td>100.6 (" in row


def test_overhead_table_compares_best_with_best_and_names_the_runs():
    tcp = [
        record_of(1, model_points(latency=6e-6, bandwidth=0.9e9), wait="poll"),
        record_of(2, model_points(latency=30e-6), wait="poll"),
    ]
    mpi = record_of(3, model_points(latency=7.5e-6, bandwidth=0.92e9), layer="mpi", mpi="mpich")
    html = section._overhead([*tcp, mpi])
    assert "Both sides are their best run" in html
    row = next(r for r in html.split("<tr>") if "MPI mpich" in r and "busy-poll" in r)
    assert "<td>1.25</td>" in row  # 7.5 / 6 µs: the latency of run 1
    assert "latency: runs 3 / 1; bandwidth: runs 3 / 2 (of 1 / 2)" in row


# --------------------------------------------------------------------------- all pairs

HOSTS = ["host0", "host1", "host2", "host3"]


def pair_measurements(hosts, bw, lat=50.0, noise=0.0, seed=0):
    """All pairs; ``bw``/``lat`` are numbers or functions of the pair."""
    rng = np.random.default_rng(seed)
    out = []
    for i, a in enumerate(hosts):
        for b in hosts[i + 1 :]:
            vb = bw(a, b) if callable(bw) else bw
            vl = lat(a, b) if callable(lat) else lat
            out.append(
                {
                    "pair": [a, b],
                    "bandwidth_mbps": vb * (1 + noise * rng.standard_normal()),
                    "latency_us": vl * (1 + noise * rng.standard_normal()),
                }
            )
    return out


def slow_host(a, b):
    return 9.6 if "host2" in (a, b) else 940.0


def test_matrix_is_symmetric_with_null_diagonal():
    m = links.link_matrix(HOSTS, pair_measurements(HOSTS, slow_host))
    assert np.array_equal(m.bandwidth_mbps, m.bandwidth_mbps.T, equal_nan=True)
    assert np.isnan(np.diag(m.latency_us)).all()
    j = m.to_json()
    assert j["hosts"] == HOSTS
    assert j["bandwidth_mbps"][2][2] is None
    assert j["bandwidth_mbps"][0][2] == j["bandwidth_mbps"][2][0] == 9.6


@pytest.mark.parametrize("seed", range(10))
def test_one_slow_host_is_the_only_culprit(seed):
    d = links.diagnose(
        links.link_matrix(HOSTS, pair_measurements(HOSTS, slow_host, noise=0.03, seed=seed))
    )
    assert [(f.get("host"), f["figure"]) for f in d.flagged] == [("host2", "bandwidth_mbps")]
    f = d.flagged[0]
    assert f["value"] == pytest.approx(9.6, rel=0.1)
    assert f["median"] == pytest.approx(940, rel=0.1)  # median of 3 noisy links
    assert "host2: bandwidth" in f["reason"] and "all 3 of its links" in f["reason"]
    assert "1 % of the median" in f["reason"] and "host2's NIC or cable" in f["reason"]
    assert d.suspects == [("host0", "host2"), ("host1", "host2"), ("host2", "host3")]


def test_a_slow_host_at_100_mbit_in_a_1_gbit_cluster():
    def slow(a, b):
        return 96.0 if "host2" in (a, b) else 960.0

    d = links.diagnose(links.link_matrix(HOSTS, pair_measurements(HOSTS, slow)))
    assert d.flagged[0]["reason"] == (
        "host2: bandwidth 96 Mbit/s on all 3 of its links, 10 % of the median "
        "— suspect host2's NIC or cable"
    )


def test_one_slow_pair_is_flagged_as_the_pair():
    def bw(a, b):
        return 95.0 if (a, b) == ("host1", "host3") else 940.0

    d = links.diagnose(links.link_matrix(HOSTS, pair_measurements(HOSTS, bw, noise=0.03)))
    assert [(f.get("pair"), f["figure"]) for f in d.flagged] == [
        (["host1", "host3"], "bandwidth_mbps")
    ]
    assert "cable or switch ports" in d.flagged[0]["reason"]


def test_a_slow_latency_host():
    d = links.diagnose(
        links.link_matrix(
            HOSTS,
            pair_measurements(HOSTS, 940.0, lambda a, b: 600.0 if "host0" in (a, b) else 50.0),
        )
    )
    assert [(f.get("host"), f["figure"]) for f in d.flagged] == [("host0", "latency_us")]
    assert "12.0x the median" in d.flagged[0]["reason"]


@pytest.mark.parametrize("seed", range(50))
def test_healthy_cluster_with_5_percent_noise_flags_nothing(seed):
    hosts = [f"node{i}" for i in range(8)]
    d = links.diagnose(
        links.link_matrix(hosts, pair_measurements(hosts, 940.0, noise=0.05, seed=seed))
    )
    assert d.flagged == [] and d.suspects == []


def test_two_hosts_without_reference_flag_nothing_and_say_why():
    d = links.diagnose(links.link_matrix(["a", "b"], pair_measurements(["a", "b"], 9.6)))
    assert d.flagged == []
    assert "two hosts" in d.notes[0]


def test_two_hosts_against_a_reference_blame_the_pair():
    m = links.link_matrix(["a", "b"], pair_measurements(["a", "b"], 9.6))
    d = links.diagnose(m, reference={"bandwidth_mbps": 1000.0, "latency_us": 50.0})
    assert [(f.get("pair"), f["figure"]) for f in d.flagged] == [(["a", "b"], "bandwidth_mbps")]
    assert "of the reference" in d.flagged[0]["reason"]
    assert "either host's NIC or the cable" in d.flagged[0]["reason"]
    assert d.notes == []


def test_missing_pairs_are_noted_not_fatal():
    ms = [m for m in pair_measurements(HOSTS, slow_host) if m["pair"] != ["host0", "host1"]]
    d = links.diagnose(links.link_matrix(HOSTS, ms))
    assert d.notes == ["not measured: host0-host1"]
    assert [f.get("host") for f in d.flagged] == ["host2"]


@pytest.mark.parametrize(
    ("measurements", "message"),
    [
        ([{"pair": ["host0", "hostX"], "bandwidth_mbps": 1, "latency_us": 1}], "unknown host"),
        ([{"pair": ["host0", "host0"], "bandwidth_mbps": 1, "latency_us": 1}], "itself"),
        ([{"pair": "host0", "bandwidth_mbps": 1, "latency_us": 1}], "'pair'"),
        ([{"pair": ["host0", "host1"], "bandwidth_mbps": 0, "latency_us": 1}], "must be > 0"),
        ([{"pair": ["host0", "host1"], "latency_us": 1}], "bandwidth_mbps must be > 0"),
        (
            [
                {"pair": ["host0", "host1"], "bandwidth_mbps": 1, "latency_us": 1},
                {"pair": ["host1", "host0"], "bandwidth_mbps": 1, "latency_us": 1},
            ],
            "given twice",
        ),
    ],
)
def test_bad_pair_measurements(measurements, message):
    with pytest.raises(ValueError, match=message):
        links.link_matrix(HOSTS, measurements)


def test_retest_clears_a_transient_and_confirms_the_real_fault():
    def first(a, b):
        if "host2" in (a, b):
            return 9.6
        return 300.0 if (a, b) == ("host0", "host3") else 940.0  # a transient slowdown

    d1 = links.diagnose(links.link_matrix(HOSTS, pair_measurements(HOSTS, first)))
    assert {f.get("host") or tuple(f["pair"]) for f in d1.flagged} == {"host2", ("host0", "host3")}
    asked = []

    def remeasure(pairs):
        asked.extend(pairs)
        return [
            {"pair": list(p), "bandwidth_mbps": slow_host(*p), "latency_us": 50.0} for p in pairs
        ]

    d2 = links.diagnose_with_retest(
        links.link_matrix(HOSTS, pair_measurements(HOSTS, first)), remeasure
    )
    assert set(asked) == {
        ("host0", "host2"),
        ("host1", "host2"),
        ("host2", "host3"),
        ("host0", "host3"),
    }
    assert [f.get("host") for f in d2.flagged] == ["host2"]
    assert any(n.startswith("not confirmed on re-test: host0-host3") for n in d2.notes)


def test_retest_keeps_the_better_of_two_measurements():
    d1 = links.diagnose(links.link_matrix(HOSTS, pair_measurements(HOSTS, slow_host)))
    # the re-test happens to be worse still: the fault stays, the first values stand
    worse = [{"pair": list(p), "bandwidth_mbps": 1.0, "latency_us": 500.0} for p in d1.suspects]
    d2 = links.confirm(d1, worse)
    assert [f.get("host") for f in d2.flagged] == ["host2"]
    assert d2.matrix.bandwidth_mbps[0, 2] == pytest.approx(9.6)


def test_retest_of_a_pair_that_was_not_suspect_is_refused():
    d1 = links.diagnose(links.link_matrix(HOSTS, pair_measurements(HOSTS, slow_host)))
    with pytest.raises(ValueError, match="not a suspect"):
        links.confirm(d1, [{"pair": ["host0", "host1"], "bandwidth_mbps": 1.0, "latency_us": 1.0}])


def test_no_retest_when_nothing_is_bad():
    def never(pairs):
        raise AssertionError("re-test called on a healthy cluster")

    d = links.diagnose_with_retest(links.link_matrix(HOSTS, pair_measurements(HOSTS, 940.0)), never)
    assert d.flagged == []


# --------------------------------------------------------------------------- shared CPUs

HOSTS6 = [f"host{i}" for i in range(6)]


def unlucky_placement(a, b):
    """A healthy 6-host cluster on 2 shared cores: host1-host4's two ends happened to run
    where each wake-up waited, 2.2x the others' ~20 µs (issue 19's false alarms)."""
    return 44.0 if (a, b) == ("host1", "host4") else 19.0 + (hash((a, b)) % 3)


def test_on_shared_cpus_a_latency_flag_is_judged_against_controls_measured_with_it():
    # the re-test moved the ends and ran at a higher load: the suspect's latency is now the
    # controls' (1.1x), both twice the first round's level; read against the first round's
    # median alone it still looked 2.2x, and the healthy link was blamed
    asked = []

    def remeasure(pairs):
        asked.extend(pairs)
        lat = {("host1", "host4"): 45.0}
        return [
            {"pair": list(p), "bandwidth_mbps": 940.0, "latency_us": lat.get(p, 41.0)}
            for p in pairs
        ]

    matrix = links.link_matrix(HOSTS6, pair_measurements(HOSTS6, 940.0, unlucky_placement))
    assert [f["pair"] for f in links.diagnose(matrix).flagged] == [["host1", "host4"]]
    d = links.diagnose_with_retest(matrix, remeasure, shared_cpus=True)
    assert d.flagged == []
    assert ("host1", "host4") in asked and len(asked) == 1 + links.CONTROL_PAIRS
    assert all("host1" not in p or "host4" not in p for p in asked[1:])  # controls: healthy
    assert any("not confirmed on re-test: host1-host4" in n for n in d.notes)
    assert any(n.startswith("latency re-test read against 3 healthy links") for n in d.notes)


def test_on_shared_cpus_a_slow_host_stays_flagged_whatever_the_retests_level():
    def delayed(a, b):
        return 520.0 if "host2" in (a, b) else 20.0

    def remeasure(pairs):  # everything twice as slow on the re-test: host2 still 13x
        return [
            {
                "pair": list(p),
                "bandwidth_mbps": 940.0,
                "latency_us": 540.0 if "host2" in p else 40.0,
            }
            for p in pairs
        ]

    matrix = links.link_matrix(HOSTS6, pair_measurements(HOSTS6, 940.0, delayed))
    d = links.diagnose_with_retest(matrix, remeasure, shared_cpus=True)
    assert [(f.get("host"), f["figure"]) for f in d.flagged] == [("host2", "latency_us")]
    # the controls' own figures stay the first round's
    assert np.nanmax(np.delete(np.delete(d.matrix.latency_us, 2, 0), 2, 1)) == 20.0


# One idle healthy 6-host paced matrix on 2 shared cores (2026-11-28, record 18 of the
# bench's store): each re-test run's 1-byte latency, µs, four runs a link. Every link reads
# ~18 or ~40-50 µs as the wake-ups fall; host1-host2's four all fell slow.
RUNS_OF_ONE_RETEST = {
    ("host1", "host2"): [44.8, 51.2, 40.1, 38.6],
    ("host0", "host3"): [40.4, 17.8, 33.3, 44.1],
    ("host0", "host4"): [41.1, 17.8, 46.2, 40.2],
    ("host1", "host5"): [36.0, 17.6, 37.4, 17.7],
}


def first_round_of_that_matrix(a, b):
    return 65.8 if (a, b) == ("host1", "host2") else 24.6


def retest_with_runs(runs, excess=None):
    """A re-test returning each pair's runs (``runs``, else ``excess(pair)`` + a healthy
    link's runs) and its best, as net matrix's re-test measures them."""

    def remeasure(pairs):
        out = []
        for p in pairs:
            values = runs.get(p) or [v + excess(p) for v in runs[("host0", "host3")]]
            out.append(
                {
                    "pair": list(p),
                    "bandwidth_mbps": 940.0,
                    "latency_us": min(values),
                    "latency_runs_us": values,
                }
            )
        return out

    return remeasure


def test_on_shared_cpus_a_suspects_best_run_is_read_against_a_typical_healthy_run(monkeypatch):
    """Its four runs all slow (best 38.6 µs) against the controls' best (~17.7, one fast
    run each), host1-host2 stood at 2.2x and was named: 2 false alarms in 20 idle healthy
    matrices. Against their runs' median (38.8 µs) it is in line; a link 100 µs slower is
    named all the same."""
    monkeypatch.setattr(
        links, "controls", lambda first: [p for p in RUNS_OF_ONE_RETEST if "host2" not in p]
    )
    matrix = links.link_matrix(HOSTS6, pair_measurements(HOSTS6, 940.0, first_round_of_that_matrix))
    assert [f["pair"] for f in links.diagnose(matrix).flagged] == [["host1", "host2"]]
    d = links.diagnose_with_retest(matrix, retest_with_runs(RUNS_OF_ONE_RETEST), shared_cpus=True)
    assert d.flagged == [] and any("median of 12 runs" in n for n in d.notes), d.notes

    def slow_first_round(a, b):
        return 124.6 if (a, b) == ("host1", "host2") else 24.6

    healthy = {p: v for p, v in RUNS_OF_ONE_RETEST.items() if p != ("host1", "host2")}
    matrix = links.link_matrix(HOSTS6, pair_measurements(HOSTS6, 940.0, slow_first_round))
    d = links.diagnose_with_retest(
        matrix, retest_with_runs(healthy, lambda p: 100.0), shared_cpus=True
    )
    assert [f["pair"] for f in d.flagged] == [["host1", "host2"]]


def test_runs_that_are_not_latencies_are_refused_naming_the_pair():
    matrix = links.link_matrix(HOSTS6, pair_measurements(HOSTS6, 940.0, unlucky_placement))

    def remeasure(pairs):
        return [
            {"pair": list(p), "bandwidth_mbps": 940.0, "latency_us": 20.0, "latency_runs_us": [0.0]}
            for p in pairs
        ]

    with pytest.raises(ValueError, match=r"host\d-host\d: latency_runs_us must be positive"):
        links.diagnose_with_retest(matrix, remeasure, shared_cpus=True)


def test_controls_are_the_typical_healthy_links():
    matrix = links.link_matrix(HOSTS6, pair_measurements(HOSTS6, 940.0, unlucky_placement))
    first = links.diagnose(matrix)
    chosen = links.controls(first)
    assert len(chosen) == links.CONTROL_PAIRS and ("host1", "host4") not in chosen
    assert links.controls(first, 100) == sorted(
        p for p in combinations(HOSTS6, 2) if p != ("host1", "host4")
    )


# --------------------------------------------------------------------------- three hosts

HOSTS3 = ["host0", "host1", "host2"]


def host2_delayed(a, b):
    """host2 delayed 500 µs on three paced 1 Gbit hosts: its links ~270 µs above the
    healthy one (docs/network.md)."""
    return 290.0 if "host2" in (a, b) else 21.0


@pytest.mark.parametrize("seed", range(10))
def test_a_slow_host_of_three_is_named_though_its_links_are_the_median(seed):
    # two of the three links are host2's: the median of the links is slow, and the old
    # rule, every link against it, saw nothing on either matrix
    m = links.link_matrix(
        HOSTS3, pair_measurements(HOSTS3, 940.0, host2_delayed, noise=0.05, seed=seed)
    )
    d = links.diagnose(m)
    assert [(f.get("host"), f["figure"]) for f in d.flagged] == [("host2", "latency_us")]
    assert (
        "host2: latency" in d.flagged[0]["reason"]
        and "all 2 of its links" in d.flagged[0]["reason"]
    )
    assert d.flagged[0]["median"] == pytest.approx(21.0, rel=0.2)  # host0-host1's
    assert d.suspects == [("host0", "host2"), ("host1", "host2")]

    def slow_bandwidth(a, b):  # the same rule for the bandwidth (no nominal rate given)
        return 600.0 if "host2" in (a, b) else 940.0

    m = links.link_matrix(HOSTS3, pair_measurements(HOSTS3, slow_bandwidth, noise=0.03, seed=seed))
    assert [(f.get("host"), f["figure"]) for f in links.diagnose(m).flagged] == [
        ("host2", "bandwidth_mbps")
    ]


@pytest.mark.parametrize("shared_cpus", [True, False])
@pytest.mark.parametrize("seed", range(200))
def test_a_healthy_cluster_of_three_flags_nothing(seed, shared_cpus):
    # bandwidth within 5 % (as the 8-host case above), latency within 20 % (placement).
    # Judged against the one link it does not touch, a healthy host's two links look 2x
    # it in ~1.5 % of such first rounds (0.2 % with the median rule alone; 5000 draws):
    # the re-test, fresh figures read against the control link, clears every one
    rng = np.random.default_rng(seed)

    def measure(pairs):
        return [
            {
                "pair": list(p),
                "bandwidth_mbps": 940.0 * (1 + 0.05 * rng.standard_normal()),
                "latency_us": 21.0 * (1 + 0.2 * rng.standard_normal()),
            }
            for p in pairs
        ]

    m = links.link_matrix(HOSTS3, measure(combinations(HOSTS3, 2)))
    assert links.diagnose_with_retest(m, measure, shared_cpus=shared_cpus).flagged == []


def test_of_three_hosts_a_slower_nominal_link_is_not_a_slow_host():
    # host2's nominal link is 100 Mbit among 1 Gbit ones: its latency is its wire's (61
    # against 18 µs on the paced wire, fresh clone at 57f9b11), not a fault; given the links'
    # nominal rates, it is not judged against the 1 Gbit link that does not touch it
    def latency(a, b):
        return 61.0 if "host2" in (a, b) else 18.0

    def bandwidth(a, b):
        return 93.0 if "host2" in (a, b) else 930.0

    rates = np.array([[np.nan, 941.0, 94.1], [941.0, np.nan, 94.1], [94.1, 94.1, np.nan]])
    matrix = links.link_matrix(HOSTS3, pair_measurements(HOSTS3, bandwidth, latency))
    assert links.diagnose(matrix, reference={"bandwidth_mbps": rates}).flagged == []
    # rates unknown, the same figures name host2 (by latency and bandwidth), as a fault would
    assert {f.get("host") for f in links.diagnose(matrix).flagged} == {"host2"}


def test_of_three_hosts_one_slow_link_names_neither_of_its_hosts():
    def one_cable(a, b):
        return 290.0 if (a, b) == ("host1", "host2") else 21.0

    d = links.diagnose(links.link_matrix(HOSTS3, pair_measurements(HOSTS3, 940.0, one_cable)))
    assert not [f for f in d.flagged if "host" in f], d.flagged


@pytest.mark.parametrize("shared_cpus", [True, False])
def test_of_three_hosts_a_lucky_reference_link_is_caught_by_the_control(shared_cpus):
    # a healthy cluster whose one link not touching host2 happened to run fast in the first
    # round (15 against 35 µs): host2 looks 2.3x it; the re-test measures host0-host1 again
    # beside host2's links as the control, and host2's links read against it are healthy;
    # on a real cluster too (review4 I4), whose re-test had no control
    def lucky(a, b):
        return 35.0 if "host2" in (a, b) else 15.0

    matrix = links.link_matrix(HOSTS3, pair_measurements(HOSTS3, 940.0, lucky))
    assert [f.get("host") for f in links.diagnose(matrix).flagged] == ["host2"]
    asked = []

    def remeasure(pairs):
        asked.extend(pairs)
        return [{"pair": list(p), "bandwidth_mbps": 940.0, "latency_us": 34.0} for p in pairs]

    d = links.diagnose_with_retest(matrix, remeasure, shared_cpus=shared_cpus)
    assert d.flagged == [] and ("host0", "host1") in asked
    assert any(n.startswith("not confirmed on re-test: host2: latency") for n in d.notes)
    # host2 really delayed stays named through the same re-test
    delayed = links.link_matrix(HOSTS3, pair_measurements(HOSTS3, 940.0, host2_delayed))

    def slow_again(pairs):
        return [
            {"pair": list(p), "bandwidth_mbps": 940.0, "latency_us": host2_delayed(*p) * 1.5}
            for p in pairs
        ]

    d = links.diagnose_with_retest(delayed, slow_again, shared_cpus=shared_cpus)
    assert [(f.get("host"), f["figure"]) for f in d.flagged] == [("host2", "latency_us")]


# --------------------------------------------------------------------------- late wire


def flag(figure, value=None, median=None, **blamed):
    return {
        **blamed,
        "figure": figure,
        "value": value,
        "median": median,
        "reason": f"{figure} on {blamed}",
    }


def test_a_late_wire_judges_no_host_or_link_on_what_its_lateness_could_explain():
    late = late_wire.LateWire(p99_us=812.4, rto_late_packets=0, load=9.46)
    flagged = [
        flag("latency_us", 310.0, 46.0, host="host2"),  # 264 µs over: the wire's 812 could
        flag("bandwidth_mbps", 94.0, 940.0, host="host3"),
        flag("dips", pair=["host0", "host3"]),
        flag("latency_us", 9046.0, 46.0, pair=["host1", "host5"]),  # 9 ms over: no wire's
        flag("retransmissions", None, 0, host="host4"),  # no packet 200 ms late
        flag("reachable", host="host5"),
        flag("flapping", host="host4"),
    ]
    kept, notes, verdict = late_wire.judged_on_late_wire(flagged, late)
    assert verdict == "not judged: the emulated wire was late (p99 812 µs, load 9.5)"
    assert kept == flagged[3:]
    assert notes == [f"withheld, the wire was late: {f['reason']}" for f in flagged[:3]]
    # a wire once as late as TCP's retransmission timeout can make it resend
    very = late_wire.LateWire(p99_us=812.4, rto_late_packets=1, load=9.46)
    assert flagged[4] not in late_wire.judged_on_late_wire(flagged, very)[0]


def test_one_packet_as_late_as_tcps_timeout_no_longer_withholds_hundreds_of_retransmissions():
    # review F21: one packet 200 ms late withheld every retransmission flag ("not judged")
    lossy = [flag("retransmissions", 340, 0, host="host4")]
    once = late_wire.LateWire(p99_us=812.4, rto_late_packets=1, load=9.46)
    assert late_wire.judged_on_late_wire(lossy, once) == (lossy, [], None)
    # as many packets that late as retransmissions: the wire explains them all
    few = [flag("retransmissions", 3, 0, pair=["host1", "host2"])]
    three = late_wire.LateWire(p99_us=812.4, rto_late_packets=3, load=9.46)
    kept, notes, verdict = late_wire.judged_on_late_wire(few, three)
    assert kept == [] and verdict.startswith("not judged") and "retransmissions" in notes[0]
    # one retransmission more than the late packets is still under the loss rule (2)
    assert late_wire.judged_on_late_wire([flag("retransmissions", 4, 0, host="h")], three)[0] == []
    assert late_wire.judged_on_late_wire([flag("retransmissions", 5, 0, host="h")], three)[0]
    # a healthy cluster on that wire: nothing flagged, nothing withheld
    assert late_wire.judged_on_late_wire([], once) == ([], [], None)


def test_the_late_packets_are_those_of_the_re_tests_at_least_tcps_timeout_late(monkeypatch):
    from clustertune import vcluster
    from clustertune.levels.network import matrix

    def hist(counts):  # {bucket: packets}; the daemon fills buckets < 8 and >= 24 only
        return [counts.get(i, 0) for i in range(max(counts) + 1)]

    def top_us(index):
        return vcluster.lateness.summary(hist({index: 1}))["max_us"]

    rto = next(i for i in range(24, 400) if top_us(i) >= late_wire.TCP_MIN_RTO_US)
    assert top_us(rto - 1) < late_wire.TCP_MIN_RTO_US  # the bucket below cannot reach it

    def reading(counts):
        return {"host2": vcluster.lateness.summary(hist(counts))}

    early = {3: 5, 100: 7, rto: 1}  # one packet >= 200 ms late before the re-tests
    during = {3: 50, 100: 70, rto: 3, rto + 3: 1}  # and three more during them
    assert matrix.rto_late_packets(reading(early), reading(during)) == 3
    assert matrix.rto_late_packets(reading(during), reading(during)) == 0


def test_a_host_lossy_on_several_links_counts_their_retransmissions():
    counts = {("host0", "host2"): 120, ("host1", "host2"): 80, ("host2", "host3"): 100}
    (found,) = loss.diagnose_loss(
        HOSTS,
        lossy_measurements(HOSTS, lambda a, b: counts.get((a, b), 0)),
        retest_with(lambda a, b: counts.get((a, b), 0)),
    )
    assert (found["host"], found["value"]) == ("host2", 300)


def test_an_on_time_wire_or_nothing_it_could_explain_leaves_the_flags_alone():
    flagged = [flag("latency_us", 310.0, 46.0, host="host2")]
    assert late_wire.judged_on_late_wire(flagged, None) == (flagged, [], None)
    untimed = [flag("reachable", host="host5"), flag("latency_us", 900.0, 40.0, host="host2")]
    late = late_wire.LateWire(p99_us=300.0, rto_late_packets=0, load=12.0)
    assert late_wire.judged_on_late_wire(untimed, late) == (untimed, [], None)


# --------------------------------------------------------------------------- plots


def parse_svg(text: str) -> ET.Element:
    root = ET.fromstring(text)
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    return root


def test_throughput_overlay_svg():
    svg = plots.throughput_svg(
        {
            "TCP": model_curve(bandwidth=100e6, factor=dip_factor),
            "MPI": model_curve(latency=1.8 * L, bandwidth=92e6),
            "PVM": model_curve(latency=2 * L, bandwidth=84e6),
        }
    )
    parse_svg(svg)
    for label in ("Throughput graph", "message size (bytes)", "throughput (Mbit/s)", "MPI", "PVM"):
        assert label in svg
    assert svg.count("throughput dips") == 1  # one legend entry, however many curves dip


def test_signature_svg():
    svg = plots.signature_svg({"100 Mbit": model_curve(bandwidth=100e6), "1 Gbit": model_curve()})
    parse_svg(svg)
    for label in ("Signature graph", "one-way time (s)", "100 Mbit", "1 Gbit"):
        assert label in svg


def test_saturation_svg_marks_the_saturation_point():
    svg = plots.saturation_svg({"TCP": model_curve(), "short": model_curve(sizes=[0, 1, 2])})
    parse_svg(svg)
    assert "Saturation graph" in svg and "message size (bytes)" in svg
    assert f"TCP: saturation point {0.2 * LB:.0f} B" in svg
    assert "short: saturation point not determined" in svg


def test_heatmap_svg():
    m = links.link_matrix(HOSTS, pair_measurements(HOSTS, slow_host))
    svg = plots.heatmap_svg(m.bandwidth_mbps, m.hosts, "Bandwidth per pair", "Mbit/s")
    parse_svg(svg)
    for label in ("Bandwidth per pair", "Mbit/s", *HOSTS, "9.6", "940"):
        assert label in svg
    with pytest.raises(ValueError, match="does not match"):
        plots.heatmap_svg(m.bandwidth_mbps, HOSTS[:3], "x", "y")


def test_plots_need_a_curve():
    with pytest.raises(ValueError, match="no curves"):
        plots.throughput_svg({})


# matrix.nominal_reference of a uniform 1 Gbit cluster: the TCP payload 1 Gbit/s carries
NOMINAL = {"bandwidth_mbps": payload_rate_bps(10**9) / na.MBIT}


def test_a_fabric_slow_everywhere_is_one_finding_not_every_host():
    m = links.link_matrix(HOSTS, pair_measurements(HOSTS, 400.0, noise=0.02))
    d = links.diagnose(m, reference=NOMINAL)
    assert [f.get("fabric") for f in d.flagged] == [HOSTS], d.flagged
    assert "whole fabric" in d.flagged[0]["reason"]
    again = links.confirm(d, pair_measurements(HOSTS, 410.0))  # still slow on re-test
    assert [f.get("fabric") for f in again.flagged] == [HOSTS]
    healed = links.confirm(d, pair_measurements(HOSTS, 930.0))  # a passing load: not blamed
    assert healed.flagged == [] and any("not confirmed" in n for n in healed.notes)


@pytest.mark.parametrize("seed", range(5))
def test_a_healthy_cluster_against_its_nominal_rate_flags_nothing(seed):
    m = links.link_matrix(HOSTS, pair_measurements(HOSTS, 1060.0, noise=0.05, seed=seed))
    assert links.diagnose(m, reference=NOMINAL).flagged == []


def test_one_slow_host_against_the_nominal_rate_is_still_the_host():
    m = links.link_matrix(HOSTS, pair_measurements(HOSTS, slow_host))
    d = links.diagnose(m, reference=NOMINAL)
    assert [f.get("host") for f in d.flagged] == ["host2"]


def mixed_cluster(*hosts):
    from clustertune.cluster import Cluster, Site

    sites = tuple(Site(s, "vcluster") for s in sorted({h.site for h in hosts}))
    return Cluster("c", hosts, sites)


def test_nominal_reference_is_each_links_slower_end_on_one_site():
    from clustertune.cluster import Host
    from clustertune.levels.network import matrix

    def reference(cluster):
        found = matrix.nominal_reference(cluster, ["a", "b"])
        return found and found["bandwidth_mbps"][0, 1]

    uniform = mixed_cluster(Host("a", link_bps=10**9), Host("b", link_bps=10**9))
    assert reference(uniform) == NOMINAL["bandwidth_mbps"]  # as every ceiling reads
    mixed = mixed_cluster(Host("a", link_bps=10**9), Host("b", link_bps=10**8))
    assert reference(mixed) == payload_rate_bps(10**8) / na.MBIT  # the slower end's
    unknown = mixed_cluster(Host("a"), Host("b"))
    assert matrix.nominal_reference(unknown, ["a", "b"]) is None
    two_sites = mixed_cluster(Host("a", link_bps=10**9), Host("b", link_bps=10**9, site="site1"))
    assert matrix.nominal_reference(two_sites, ["a", "b"]) is None


# host2 at 100 Mbit nominal among 1 Gbit hosts (issue 19: `vcluster up --host-link
# host2=100mbit`); healthy links reach ~99 % of their payload ceiling
MIXED_RATES = {h: 10**8 if h == "host2" else 10**9 for h in HOSTS}


def mixed_reference():
    from clustertune.cluster import Host
    from clustertune.levels.network import matrix

    cluster = mixed_cluster(*(Host(h, link_bps=r) for h, r in MIXED_RATES.items()))
    return matrix.nominal_reference(cluster, HOSTS)


def on_mixed_rates(fraction):
    """Each pair's bandwidth: ``fraction(a, b)`` of the payload of its slower end."""
    return lambda a, b: fraction(a, b) * payload_rate_bps(min(MIXED_RATES[a], MIXED_RATES[b])) / 1e6


@pytest.mark.parametrize("seed", range(5))
def test_a_healthy_cluster_of_mixed_link_rates_flags_nothing(seed):
    # judged against one median, host2's 93 Mbit/s links named it ("suspect host2's NIC")
    healthy = on_mixed_rates(lambda a, b: 0.99)
    m = links.link_matrix(HOSTS, pair_measurements(HOSTS, healthy, noise=0.03, seed=seed))
    d = links.diagnose(m, reference=mixed_reference())
    assert d.flagged == [] and d.suspects == []


def test_a_host_slower_than_its_own_nominal_rate_is_named_among_mixed_rates():
    # host2 (100 Mbit nominal) carrying 40 Mbit/s: its own nominal, not the others', says so
    slowed = on_mixed_rates(lambda a, b: 0.4 if "host2" in (a, b) else 0.99)
    d = links.diagnose(
        links.link_matrix(HOSTS, pair_measurements(HOSTS, slowed)), reference=mixed_reference()
    )
    assert [f.get("host") for f in d.flagged] == ["host2"], d.flagged
    assert d.flagged[0]["median"] == pytest.approx(payload_rate_bps(10**8) / 1e6)
    assert "40 % of the reference" in d.flagged[0]["reason"]
    # a 1 Gbit host slowed to 100 Mbit: its links to the 1 Gbit hosts are flagged (its link
    # to the 100 Mbit host cannot show it, so it is not bad on all its links)
    slowed = on_mixed_rates(
        lambda a, b: 0.99 if "host2" in (a, b) or "host0" not in (a, b) else 0.1
    )
    d = links.diagnose(
        links.link_matrix(HOSTS, pair_measurements(HOSTS, slowed)), reference=mixed_reference()
    )
    assert {tuple(f["pair"]) for f in d.flagged} == {("host0", "host1"), ("host0", "host3")}


def test_two_hosts_against_the_nominal_rate_judge_the_bandwidth_and_say_what_is_not():
    m = links.link_matrix(["a", "b"], pair_measurements(["a", "b"], 400.0))
    d = links.diagnose(m, reference=NOMINAL)
    assert [f.get("pair") for f in d.flagged] == [["a", "b"]]
    assert "latency_us" in d.notes[0] and "bandwidth" not in d.notes[0]


def lossy_measurements(hosts, counts):
    """All pairs with ``counts(a, b)`` retransmissions (and healthy other figures)."""
    return [m | {"retransmissions": counts(*m["pair"])} for m in pair_measurements(hosts, 940.0)]


def retest_with(counts, retested=None):
    """A re-test whose long runs retransmit ``counts(a, b)`` of 10000 data segments."""

    def remeasure(pairs):
        if retested is not None:
            retested.extend(pairs)
        return [
            {"pair": list(p), "retransmissions": counts(*p), "data_segments": 10000} for p in pairs
        ]

    return remeasure


def on_host2(n):
    return lambda a, b: n if "host2" in (a, b) else 0


def test_a_lossy_host_is_named_though_the_short_runs_missed_one_of_its_links():
    """0.1 % loss gives a short run a handful of retransmissions, sometimes none (CI saw
    host1-host2 at 0): every link of the hosts involved is re-tested, longer, and the
    verdict rests on that."""

    def short(a, b):
        return 6 if {a, b} in ({"host0", "host2"}, {"host2", "host3"}) else 0

    retested = []
    flags = loss.diagnose_loss(
        HOSTS, lossy_measurements(HOSTS, short), retest_with(on_host2(12), retested)
    )
    assert [f.get("host") for f in flags] == ["host2"]
    assert (
        "3 of its 3 links" in flags[0]["reason"]
        and "host1-host2 12 of 10000 segments (0.12 %)" in flags[0]["reason"]
    )
    assert sorted(retested) == sorted(combinations(HOSTS, 2))  # host0, host2, host3 touch them all


def test_a_host_with_most_of_its_links_lossy_on_the_retest_is_the_culprit():
    def two_of_three(a, b):
        return 9 if {a, b} in ({"host0", "host2"}, {"host1", "host2"}) else 0

    flags = loss.diagnose_loss(
        HOSTS, lossy_measurements(HOSTS, on_host2(5)), retest_with(two_of_three)
    )
    assert [(f.get("host"), f.get("pair")) for f in flags] == [("host2", None)]
    assert "2 of its 3 links" in flags[0]["reason"]


def test_retransmissions_that_do_not_come_back_on_retest_are_no_fault():
    def burst(a, b):
        return 3 if (a, b) == ("host0", "host1") else 0

    flags = loss.diagnose_loss(HOSTS, lossy_measurements(HOSTS, burst), retest_with(lambda a, b: 0))
    assert flags == []


def test_the_links_of_a_host_seen_flapping_get_the_long_retest_though_the_short_runs_were_clean():
    retested = []
    quiet = lossy_measurements(HOSTS, lambda a, b: 0)
    flags = loss.diagnose_loss(
        HOSTS, quiet, retest_with(on_host2(40), retested), {"host2", "host3"}
    )
    assert sorted(retested) == sorted(
        p for p in combinations(HOSTS, 2) if {"host2", "host3"} & set(p)
    )
    assert [(f.get("host"), f["figure"]) for f in flags] == [("host2", "retransmissions")]


def test_links_whose_long_retest_could_not_run_count_against_their_host():
    """host2 seen flapping: one link retransmits on the re-test, the other two re-tests
    fail to connect (a down window): host2 is named, with what each link did."""
    short = lossy_measurements(HOSTS, lambda a, b: 5 if (a, b) == ("host1", "host2") else 0)
    measured = retest_with(on_host2(30))

    def remeasure(pairs):
        down = (["host0", "host2"], ["host2", "host3"])
        return [m for m in measured(pairs) if m["pair"] not in down]

    flags = loss.diagnose_loss(HOSTS, short, remeasure, suspects={"host2"})
    assert [(f.get("host"), f.get("pair")) for f in flags] == [("host2", None)]
    assert "host0-host2 no re-test (the run failed: the link went down)" in flags[0]["reason"]
    # without a flap seen, a re-test that failed is no evidence: only the lossy link
    flags = loss.diagnose_loss(HOSTS, short, remeasure)
    assert [(f.get("host"), f.get("pair")) for f in flags] == [(None, ["host1", "host2"])]


def test_one_lossy_cable_is_the_pair_and_a_clean_cluster_is_not_retested():
    def cable(a, b):
        return 5 if {a, b} == {"host1", "host3"} else 0

    retested = []
    flags = loss.diagnose_loss(
        HOSTS, lossy_measurements(HOSTS, cable), retest_with(cable, retested)
    )
    assert [f.get("pair") for f in flags] == [["host1", "host3"]]
    assert flags[0]["value"] == 5 and "5 of 10000 segments" in flags[0]["reason"]
    assert ("host0", "host2") not in retested  # touches neither host1 nor host3

    def no_retest(pairs):
        raise AssertionError("a clean cluster needs no re-test")

    assert loss.diagnose_loss(HOSTS, lossy_measurements(HOSTS, lambda a, b: 0), no_retest) == []


def test_latency_flags_on_a_lossy_host_are_its_symptoms():
    lossy = [{"host": "host2", "figure": "retransmissions", "reason": "host2: loss"}]
    other = [
        {"pair": ["host1", "host2"], "figure": "latency_us", "reason": "slow pair"},
        {
            "host": "host0",
            "figure": "bandwidth_mbps",
            "value": 90,
            "median": 940,
            "reason": "host0 slow",
        },
    ]
    flags, notes = loss.with_loss(other, lossy)
    assert [f["reason"] for f in flags] == ["host2: loss", "host0 slow"]
    assert notes == ["explained by the packet loss at host2: slow pair"]


def test_retransmissions_of_a_slow_link_are_its_symptom_not_loss():
    """A link shaped slower than the rest drops at its queue: the bandwidth is the fault."""
    lossy = [{"host": "host2", "figure": "retransmissions", "reason": "host2: loss"}]
    slow = [
        {
            "host": "host2",
            "figure": "bandwidth_mbps",
            "value": 9.4,
            "median": 940,
            "reason": "host2 at 10 Mbit/s",
        }
    ]
    flags, notes = loss.with_loss(slow, lossy)
    assert flags == slow and notes == ["goes with the low bandwidth there: host2: loss"]
    one_pair = [{"pair": ["host0", "host2"], "figure": "retransmissions", "reason": "pair loss"}]
    assert loss.with_loss(slow, one_pair)[0] == slow


def test_a_link_slowed_a_little_while_it_retransmits_is_slowed_by_the_loss():
    """0.1 % loss on a paced 1 Gbit wire costs TCP a quarter of its rate: the loss is the
    finding, the bandwidth its symptom; a pair's bandwidth on the lossy host goes too."""
    lossy = [{"host": "host2", "figure": "retransmissions", "reason": "host2: loss"}]
    dented = [
        {"host": "host2", "figure": "bandwidth_mbps", "value": 711, "median": 940, "reason": "host2 711"},
        {"pair": ["host0", "host2"], "figure": "bandwidth_mbps", "value": 650, "median": 940, "reason": "pair"},
        {"host": "host3", "figure": "bandwidth_mbps", "value": 700, "median": 940, "reason": "host3 700"},
    ]  # fmt: skip
    flags, notes = loss.with_loss(dented, lossy)
    assert [f["reason"] for f in flags] == ["host2: loss", "host3 700"]
    assert notes == [
        "slowed by the packet loss there: host2 711",
        "slowed by the packet loss there: pair",
    ]


# --------------------------------------------------------------------------- curve shape
# The matrix's mid-size sweeps (1-256 KiB, two sizes per octave), recorded on 1 Gbit links


def sweep_curve(name):
    return na.curve_from_points(stored(name)["samples"])


@pytest.mark.parametrize(
    "name, found",
    [
        ("tcp-1gbit-paced-loss1pc-dip.json", {"dips": [4096, 5793]}),
        ("tcp-1gbit-tbf-loss1pc-jagged.json", {"jagged": [8192, 23170, 46341]}),
        # healthy: the worst of three sweeps on each wire (tbf: two sizes below 0.6 of
        # their envelope, one short of jagged); 0.1 % loss: only the TCP counters show it
        ("tcp-1gbit-paced-midsweep.json", {}),
        ("tcp-1gbit-tbf-midsweep.json", {}),
        ("tcp-1gbit-paced-loss01pc-midsweep.json", {}),
    ],
)
def test_shape_findings_of_recorded_mid_size_sweeps(name, found):
    got = shapes.shape_findings(sweep_curve(name))
    assert {k: [p["size"] for p in v] for k, v in got.items()} == found
    assert all(p["depth_ratio"] < na.JAGGED_MAX_RATIO for v in got.values() for p in v)


def test_jagged_needs_three_slow_sizes_and_ignores_the_latency_floor():
    size = np.array([1, 2, 4, 8, 16, 32, 64, 128]) * 1024
    thr = np.array([10, 100, 40, 100, 45, 100, 50, 100]) * 1e6  # three saw-teeth
    curve = na.Curve(size=size, time_s=size * 8 / thr)
    assert [p["size"] for p in na.jagged(curve)] == [4096, 16384, 65536]
    assert na.jagged(curve, min_points=4) == []
    assert na.dips(curve) == []  # no two slow sizes in a row
    low = np.array([1, 100, 100, 100, 100, 100, 100, 100]) * 1e6  # slow only where the
    assert na.jagged(na.Curve(size=size, time_s=size * 8 / low)) == []  # envelope is low


def shape_curves(pairs_bad, name_bad="tcp-1gbit-paced-loss1pc-dip.json"):
    """Every pair of HOSTS a healthy recorded sweep, those in ``pairs_bad`` the lossy one."""
    good, bad = sweep_curve("tcp-1gbit-paced-midsweep.json"), sweep_curve(name_bad)
    return {p: bad if p in pairs_bad else good for p in combinations(HOSTS, 2)}


def test_a_host_whose_curves_dip_on_most_links_is_named_with_the_sizes():
    host2 = {p for p in combinations(HOSTS, 2) if "host2" in p}
    curves = shape_curves(host2)
    asked = []
    flags = shapes.diagnose_shapes(HOSTS, curves, lambda pairs: asked.extend(pairs) or curves)
    assert sorted(asked) == sorted(host2)  # only the suspects are measured again
    assert [(f.get("host"), f["figure"]) for f in flags] == [("host2", "dips")]
    assert "on 3 of its links" in flags[0]["reason"] and "4096 B" in flags[0]["reason"]


def test_a_dip_not_seen_again_on_the_retest_is_no_finding_and_one_link_is_the_pair():
    curves = shape_curves({("host1", "host3")})
    assert shapes.diagnose_shapes(HOSTS, curves, lambda pairs: shape_curves(set())) == []
    flags = shapes.diagnose_shapes(HOSTS, curves, lambda pairs: curves)
    assert [(f.get("pair"), f["figure"]) for f in flags] == [(["host1", "host3"], "dips")]
    clean = shape_curves(set())
    assert shapes.diagnose_shapes(HOSTS, clean, lambda pairs: pytest.fail("re-tested")) == []


def test_a_flag_where_another_flag_blames_is_its_symptom():
    lossy = {"host": "host2", "figure": "retransmissions", "reason": "host2 loses"}
    fabric = {"fabric": ["host0", "host1"], "figure": "bandwidth_mbps", "reason": "slow"}
    on_host2 = {"pair": ["host1", "host2"], "figure": "dips", "reason": "host1-host2 dips"}
    elsewhere = {"pair": ["host0", "host3"], "figure": "dips", "reason": "host0-host3 dips"}
    kept, notes = blame.symptoms([lossy, fabric], [on_host2, elsewhere])
    assert kept == [elsewhere]
    assert notes == ["goes with the finding there: host1-host2 dips"]


def test_a_host_left_out_only_for_a_flapping_peer_is_that_peers_symptom():
    """host2's port flaps; the reachability check host2-host3 failed twice, so the tie
    left host3 out (a fresh idle suite): that is host2's symptom, not a finding on host3.
    A host that also failed with a healthy peer stays a finding."""
    flapping = {"host": "host2", "figure": "flapping", "reason": "host2 carrier changes"}
    left_out = {
        "host": "host3",
        "figure": "reachable",
        "peers": ["host2"],
        "reason": "host3: no TCP connection with host2",
    }
    also_host1 = {
        "host": "host3",
        "figure": "reachable",
        "peers": ["host1", "host2"],
        "reason": "host3: no TCP connection with host1, host2",
    }
    kept, notes = blame.symptoms([flapping], [left_out, also_host1])
    assert kept == [also_host1]
    assert notes == ["goes with the finding there: host3: no TCP connection with host2"]


def test_two_flagged_links_of_one_host_out_of_three_put_the_host_at_fault():
    flap = {"pair": ["host2", "host3"], "figure": "flapping", "reason": "host2-host3 came back"}
    resent = {"pair": ["host1", "host2"], "figure": "retransmissions", "reason": "1-2 resent"}
    fabric = {"fabric": HOSTS, "figure": "bandwidth_mbps", "reason": "all slow"}
    flagged, notes = blame.pairs_to_hosts(HOSTS, [flap, resent, fabric])
    assert [(f.get("host"), f.get("pair"), f["figure"]) for f in flagged] == [
        (None, None, "bandwidth_mbps"),
        ("host2", None, "flapping"),
    ]
    assert "2 of its links flagged (1-2 resent; host2-host3 came back)" in flagged[1]["reason"]
    assert notes == [
        "part of host2's finding: 1-2 resent",
        "part of host2's finding: host2-host3 came back",
    ]
    # one flagged link of a host is that link, not the host
    assert blame.pairs_to_hosts(HOSTS, [resent]) == ([resent], [])
