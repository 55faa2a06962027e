"""The report's network section read as a network engineer would (issue 19 items 5 and 6,
issue 22 item 5): one set of curve plots per link rate with its nominal rate drawn, heat
maps coloured against the nominal (a healthy cluster one colour), a cut-short run drawn
and labelled as such (a complete run preferred), "not determined" once per cause, the
wire of each cluster named, and no figure above the link's TCP payload rate without the
report saying why. All on synthetic records: t(s) of a paced wire is its latency plus
the time of the frames the message becomes."""

from __future__ import annotations

import base64
import io
import math
import re
from html import unescape
from types import SimpleNamespace

import numpy as np
import pytest
from matplotlib import image as mpimg

from clustertune import report, summary
from clustertune.levels.grid import compare
from clustertune.levels.grid import section as grid_section
from clustertune.levels.io import netcdf, remote
from clustertune.levels.io import section as io_section
from clustertune.levels.io import summary as io_summary
from clustertune.levels.network import analysis, section
from clustertune.levels.network import summary as net_summary
from clustertune.units import payload_rate_bps

GBIT, MBIT = 10**9, 10**6
SIZES = [0, 1, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1 << 20, 4 << 20]


def paced_time(size: int, rate_bps: float, latency_s: float = 36e-6) -> float:
    """One-way time over a paced Ethernet wire: latency, then each 1538 B frame of
    1448 B of payload at the nominal rate (as ct-nfq-delay charges it)."""
    frames = max(1, math.ceil(size / 1448))
    return latency_s + (size + 90 * frames) * 8 / rate_bps


def pingpong(
    run_id: int,
    cluster: str,
    rate: int | None,
    wire="paced",
    status="ok",
    times=None,
    pair=("host0", "host1"),
) -> dict:
    """A stored TCP ping-pong record as the report reads it."""
    times = times or (lambda s: paced_time(s, rate or 25 * GBIT, 10e-6 if rate is None else 36e-6))
    samples = [{"size": s, "t_min_s": times(s)} for s in SIZES]
    # as pingpong.bandwidth_min_size: only a tbf bucket's mid-size artefact needs a floor
    min_size = analysis.TBF_BANDWIDTH_MIN_SIZE_BYTES if wire == "tbf" else 0
    cluster_meta = {"name": cluster, "link_bps": dict.fromkeys(pair, rate), "launcher": "vcluster"}
    if wire != "unrecorded":
        cluster_meta["wire"] = wire
    return {
        "id": run_id,
        "status": status,
        "samples": samples,
        "params": {
            "command": "pingpong",
            "layer": "tcp",
            "mode": "pingpong",
            "mpi": None,
            "between": list(pair),
            "sockbuf": None,
            "nagle": False,
            "wait": "block",
        },
        "meta": {"cluster": cluster_meta, "hosts": list(pair)},
        "figures": {"bandwidth_min_size_bytes": min_size} | analysis.summarize(samples, min_size),
        "detail": {},
        "error": None,
    }


def matrix(run_id: int, bandwidth: list[list], latency: list[list], rate=GBIT, wire="paced"):
    hosts = [f"host{i}" for i in range(len(bandwidth))]
    return {
        "id": run_id,
        "status": "ok",
        "samples": [],
        "params": {"command": "matrix", "layer": "tcp", "mode": "pingpong"},
        "meta": {
            "cluster": {
                "name": "lab",
                "link_bps": dict.fromkeys(hosts, rate),
                "wire": wire,
                "launcher": "vcluster",
            },
            "hosts": hosts,
        },
        "figures": {
            "hosts": hosts,
            "size_bytes": 1 << 20,
            "bandwidth_mbps": bandwidth,
            "latency_us": latency,
            "flagged": [],
            "notes": [],
        },
        "detail": {},
        "error": None,
    }


def full(values: dict[tuple[int, int], float], n: int, default: float) -> list[list]:
    return [
        [None if i == j else values.get((min(i, j), max(i, j)), default) for j in range(n)]
        for i in range(n)
    ]


def svgs(html: str) -> list[str]:
    return re.findall(r"<svg.*?</svg>", html, re.S)


def svg_texts(svg: str) -> list[str]:
    return re.findall(r"<text[^>]*>([^<]*)</text>", svg)


def test_payload_ceiling_is_tcp_over_ethernet_framing():
    assert payload_rate_bps(GBIT) == pytest.approx(GBIT * 1448 / 1538)
    assert payload_rate_bps(GBIT, timestamps=False) == pytest.approx(GBIT * 1460 / 1538)
    assert payload_rate_bps(100 * MBIT) / MBIT == pytest.approx(94.15, abs=0.01)
    # the synthetic paced wire of these tests never reads above it, at any size
    for s in SIZES[1:]:
        assert s * 8 / (paced_time(s, GBIT) - 36e-6) <= payload_rate_bps(GBIT) * (1 + 1e-12)


def test_curve_plots_are_split_by_link_rate_with_the_nominal_drawn():
    records = [
        pingpong(1, "slow", GBIT),
        pingpong(2, "fast", None, wire=None),
        pingpong(3, "fe", 100 * MBIT),
    ]
    html = section.render(records)
    throughput = [s for s in svgs(html) if "Throughput graph" in s]
    assert len(throughput) == 3, "one throughput graph per link rate"
    for svg in svgs(html):  # never two rates on the same axes
        assert sum(f"({name})" in svg for name in ("slow", "fast", "fe")) <= 1, svg_texts(svg)
    one_gbit = next(s for s in throughput if "(slow)" in s)
    assert "Throughput graph, 1gbit links" in one_gbit
    assert "nominal 1000 Mbit/s" in one_gbit and "TCP payload ceiling 941.5 Mbit/s" in one_gbit
    fast = next(s for s in throughput if "(fast)" in s)
    assert "unshaped links" in fast and "nominal" not in fast
    for title in ("Signature graph, 100mbit links", "Saturation graph, 100mbit links"):
        assert title in html


def pixels(svg: str) -> np.ndarray:
    """The colours of a heat map's opaque cells (its embedded raster)."""
    data = re.search(r'xlink:href="data:image/png;base64,([^"]+)"', svg).group(1)
    img = mpimg.imread(io.BytesIO(base64.b64decode(data)), format="png")
    return img[img[..., 3] > 0.5][:, :3]


def test_heat_maps_are_coloured_against_the_nominal_so_healthy_looks_uniform():
    n = 4
    healthy = matrix(
        1, full({(0, 1): 940.1, (2, 3): 941.0}, n, 940.6), full({(0, 2): 36.4}, n, 36.0)
    )
    html = section.render([healthy])
    bandwidth, latency = (
        next(s for s in svgs(html) if t in s) for t in ("Bandwidth per", "Latency")
    )
    for svg in (bandwidth, latency):  # a 0.1 % spread (or 1 %) is one colour
        colours = pixels(svg)
        assert np.ptp(colours, axis=0).max() < 0.02, svg_texts(svg)
    assert "share of the nominal rate" in svg_texts(bandwidth)
    assert {"0.0", "1.0"} <= set(svg_texts(bandwidth))  # the scale: 0 to nominal
    assert "0" in svg_texts(latency)  # absolute µs from 0
    assert "940.6" in svg_texts(bandwidth)  # the cells still give Mbit/s
    # a pair at half the nominal rate is another colour
    slow = matrix(2, full({(0, 1): 470.0}, n, 940.6), full({}, n, 36.0))
    html = section.render([slow])
    colours = pixels(next(s for s in svgs(html) if "Bandwidth per" in s))
    assert np.ptp(colours, axis=0).max() > 0.2


def test_a_cut_short_run_is_labelled_and_a_complete_one_preferred():
    records = [
        pingpong(1, "lab", GBIT),  # complete: drawn in place of the newer interrupted run 2
        pingpong(2, "lab", GBIT, status="interrupted"),
        pingpong(3, "lab", GBIT, status="interrupted", pair=("host0", "host2")),  # alone
        pingpong(4, "lab", GBIT, status="incomplete", pair=("host1", "host2")),
    ]
    throughput = next(s for s in svgs("".join(section._graphs(records))) if "Throughput" in s)
    legend = svg_texts(throughput)
    assert "TCP host0-host1 (lab)" in legend and "run 2" not in throughput
    assert "TCP host0-host2 (lab) [run 3 interrupted: cut short]" in legend
    assert "TCP host1-host2 (lab) [run 4 incomplete: cut short]" in legend


def test_not_determined_is_listed_once_per_cause():
    # tbf: mid-size messages outrun the wire, so n½ is not determined, nine times over
    def tbf(s: int) -> float:
        return paced_time(s, 2 * GBIT if 1024 <= s <= 65536 else 1.07 * GBIT)

    records = [pingpong(i, "lab", GBIT, wire="tbf", times=tbf) for i in range(1, 10)]
    assert all("n_half_bytes not determined" in r["figures"]["unavailable"] for r in records)
    html = section._pingpong_table(records)
    listed = html[html.index("Not determined:") :].split("</ul>")[0]
    assert listed.count("<li>") == 1, listed
    assert "run(s) 1, 2, 3, 4, 5, 6, 7, 8, 9" in listed and "smaller messages ran faster" in listed
    # on a paced wire every figure is determined: no list at all
    assert "Not determined" not in section._pingpong_table([pingpong(1, "lab", GBIT)])


def test_wire_of_each_cluster_is_named():
    html = section._wires([pingpong(1, "new", GBIT), pingpong(2, "old", GBIT, wire="unrecorded")])
    assert "new: paced wire" in html and "old: wire not recorded" in html


def numbers(cell: str) -> list[float]:
    return [float(x) for x in re.findall(r"\d+(?:\.\d+)?", cell)]


def test_no_figure_above_the_payload_ceiling_without_saying_why():
    ceiling = payload_rate_bps(GBIT) / MBIT
    paced = [pingpong(1, "lab", GBIT), pingpong(2, "lab", GBIT, pair=("host0", "host2"))]
    healthy = matrix(3, full({}, 3, 938.0), full({}, 3, 36.0))
    html = section._pingpong_table(paced) + "".join(section._matrices([healthy]))
    assert "payload ceiling of" not in html
    for r in paced:  # the table's bandwidth is read from the paced curve: never above
        assert r["figures"]["bandwidth_mbps"] <= ceiling
    # a figure above it is shown with its reason: tbf's bucket ...
    burst = [
        pingpong(i, "old", GBIT, wire="tbf", times=lambda s: paced_time(s, 1.14 * GBIT))
        for i in (4, 5)
    ]
    html = unescape(section._pingpong_table(burst))
    listed = html[html.index("Above the link's TCP payload rate") :].split("</ul>")[0]
    assert listed.count("<li>") == 1 and "run(s) 4 (1068 Mbit/s), 5 (1068 Mbit/s)" in listed
    assert f"above the {ceiling:.0f} Mbit/s payload ceiling of 1gbit: tbf's bucket" in html
    # ... or, on a paced wire, as the measurement fault it must be
    bad = matrix(5, full({(0, 1): 1074.0}, 3, 938.0), full({}, 3, 36.0))
    html = "".join(section._matrices([bad]))
    assert "impossible on a paced wire" in html
    assert html.count("host0-host1 1074") == 1 and "host1-host0" not in html  # once per pair


def remote_io(run_id: int, wire: str, link_bps: int, read_s: float, op: str = "read") -> dict:
    """A remote collective read (or ``op``) of 32^3 ints over a 1 Gbit WAN, as the I/O
    level stores it."""
    nbytes = 4 * 32**3
    sample = {
        "size": 32,
        "op": op,
        "mode": "collective",
        "np": 1,
        "variant": "netcdf",
        "format": "cdf1",
        "bytes": nbytes,
        "reps": 3,
        "verified": True,
        "open_to_close_s": {"min": read_s, "median": read_s},
        "io_only_s": {"min": read_s, "median": read_s},
        "mbps": nbytes / read_s / 1e6,
        "mbps_io": nbytes / read_s / 1e6,
    }
    hosts = {"host0": link_bps, "host1": link_bps}
    return {
        "id": run_id,
        "level": "io",
        "kernel": "ct-io-fwd",
        "status": "ok",
        "error": None,
        "samples": [sample],
        "detail": {},
        "params": {"remote": "site1", "servers": 1},
        "meta": {
            "cluster": {"name": "io", "link_bps": hosts, "wire": wire},
            "hosts": ["host0"],
            "mpi": {"flavour": "mpich"},
        },
        "figures": {"files": {}, "wan_bps": GBIT, "link_share": remote.link_shares([sample], GBIT)},
    }


def test_remote_io_link_share_above_the_payload_ceiling_says_why():
    """Issue 19: a 32^3 remote read at 147 % of 1gbit. Measured here (load 3-4): 120 % on a
    tbf WAN, and on a paced cluster whose hosts are paced at 10 Gbit the WAN is still a
    tbf bucket; with the hosts at the WAN's rate the read stays under the ceiling."""
    burst = remote_io(1, "tbf", 10 * GBIT, read_s=0.000713)  # 147 %
    fast_hosts = remote_io(2, "paced", 10 * GBIT, read_s=0.000875)  # 120 %
    paced = remote_io(3, "paced", GBIT, read_s=0.00125)  # 84 %
    html = unescape(io_section.render([burst, fast_hosts, paced]))
    remote_table = html[html.index("Remote collective I/O") :].split("</table>")[0]
    rows = {r.split("</td>")[0]: r for r in remote_table.split("<tr><td>")[1:]}
    assert "147% of 1gbit (above the 941 Mbit/s payload ceiling of 1gbit: tbf's bucket" in rows["1"]
    assert (
        "120% of 1gbit (above the 941 Mbit/s payload ceiling of 1gbit: its hosts are paced at their faster links"
        in rows["2"]
    )
    assert "84% of 1gbit" in rows["3"] and "above" not in rows["3"]


def test_grid_bandwidth_across_sites_above_the_wan_payload_says_why():
    def pp(run_id, placement, mbps, wire="paced"):
        record = pingpong(run_id, "g", GBIT, wire=wire, pair=("host0", "host2"))
        grid = {"name": "g", "wan_bps": 100 * MBIT, "link_bps": GBIT, "sites": []}
        record["kernel"] = "ct-mpi-pingpong"
        record["params"] = {
            "comparison": "pingpong",
            "placement": placement,
            "grid": grid,
            "mode": "pingpong",
            "path": "grid",
        }
        record["figures"]["bandwidth_mbps"] = mbps
        return record

    healthy = [pp(1, "within", 930.0), pp(2, "across", 93.9)]
    assert "payload ceiling" not in grid_section.render(healthy)
    html = unescape(grid_section.render([*healthy, pp(3, "across", 131.0)]))
    assert "run 3 (across): bandwidth 131.0 Mbit/s above the 94 Mbit/s payload ceiling of " in html
    assert "100mbit: its hosts are paced at their faster links, this one is a tbf bucket" in html
    # since the WAN pacers (meta wire_late "hostN>wan") the WAN is paced too: impossible
    paced_wan = pp(4, "across", 131.0)
    paced_wan["meta"]["wire_late"] = {"host0>wan": {"packets": 9, "p99_us": 20.0}}
    html = unescape(grid_section.render([*healthy, paced_wan]))
    assert "100mbit: impossible on a paced wire: a measurement fault" in html
    assert "tbf bucket" not in html


def test_mpi_overhead_not_judged_above_the_load_rule_as_the_cli():
    """An MPI run out of line with its TCP baseline is flagged, unless the record says the
    machine its virtual hosts share was above runner.STARVED_LOAD_PER_CPU per CPU."""

    def run(run_id, layer, latency_s, load, wait=None, mpi=None):
        r = pingpong(run_id, "lab", GBIT, times=lambda s: paced_time(s, GBIT, latency_s))
        r["params"] |= {"layer": layer, "wait": wait, "mpi": mpi}
        r["meta"] |= {
            "load": {"start": [load, 1, 1], "end": [load, 1, 1]},
            "cpus": {"online": 2, "usable": 2},
        }
        return r

    tcp = run(1, "tcp", 20e-6, 1.0, wait="poll")
    quiet, busy = run(2, "mpi", 200e-6, 1.0, mpi="mpich"), run(3, "mpi", 200e-6, 12.0, mpi="mpich")
    html = unescape(section._overhead([tcp, quiet]))
    assert "MPI overhead out of line with TCP (busy-poll): latency" in html
    html = unescape(section._overhead([tcp, busy]))
    assert "out of line with TCP (busy-poll)" not in html
    assert "not judged: run 3 had load 12.0 on the 2 CPUs its hosts share" in html
    # a real cluster (no emulated wire, its own CPUs) is judged whatever this machine's load
    real = run(4, "mpi", 200e-6, 12.0, mpi="mpich")
    real["meta"]["cluster"] |= {"wire": None, "launcher": "ssh"}
    tcp_real = run(5, "tcp", 20e-6, 1.0, wait="poll")
    tcp_real["meta"]["cluster"] |= {"wire": None, "launcher": "ssh"}
    assert "out of line with TCP" in section._overhead([tcp_real, real])


@pytest.mark.root
def test_remote_io_link_share_stays_under_the_wan_payload_ceiling(make_vcluster, store, tmp_path):
    """Remote collective I/O across a 1 Gbit WAN between sites of 10 Gbit hosts (b4dfdb4's
    demo), on the default (paced) wire: no size's share of the WAN above the TCP payload the
    WAN carries. On the tbf wire, b4dfdb4's default, the 32^3 read passed the WAN's buckets
    at 120-122 % of 1gbit here (147 % in the issue's demo); an upper bound only: a loaded
    machine slows the transfer, it cannot speed it up."""
    cluster = make_vcluster(2, 10 * GBIT, sites=2, wan_bps=GBIT)  # the WAN the slower link
    remote.prepare_ca(tmp_path, "alice")
    record = netcdf.measure(
        cluster,
        store,
        np=1,
        mpi="mpich",
        sizes=[32, 64],
        mode="collective",
        ops=["write", "read"],
        fmt="cdf1",
        reps=5,
        remote=cluster.sites[1].name,
        ca_dir=tmp_path,
        identity="alice",
    )
    assert record["status"] == "ok", record["error"]
    shares = record["figures"]["link_share"]
    assert set(shares) == {"32", "64"}
    ceiling = payload_rate_bps(GBIT) / GBIT
    for size, ops in shares.items():
        for op, share in ops.items():
            assert share <= ceiling, (
                f"{size}^3 {op}: {share:.0%} of the WAN (ceiling {ceiling:.1%})"
            )


def test_grid_reads_bandwidth_from_every_size_on_a_paced_wire():
    """The tbf floor (many buckets long) only where a tbf bucket is the wire, as the network
    level's pingpong.bandwidth_min_size: a paced grid's pacers hold every size to the rate."""
    state = {"link_bps": GBIT, "wan_bps": 100 * MBIT}
    assert compare.shaped_min_size(state | {"wire": "tbf"}, "across") > 0
    assert compare.shaped_min_size(state | {"wire": "paced"}, "across") == 0
    assert compare.shaped_min_size(state | {"wire": "paced"}, "within") == 0


def test_remote_io_first_screen_row_judges_the_ceiling_as_the_section():
    """Issue 19.6: a remote write at 1.2 of its 1 Gbit WAN is above what the link carries;
    the first screen must not call it "at least 80 % of link" (green) while the I/O
    section calls it above the payload ceiling. A receive pacer (meta wire_late
    "hostN<rx") means the slower side was paced: impossible, not a tbf bucket."""
    nbytes = 4 * 32**3
    over = remote_io(1, "paced", 10 * GBIT, read_s=8 * nbytes / (1.2 * GBIT), op="write")
    row = io_summary.remote_row(over)
    assert row.ratio == pytest.approx(1.2)
    assert (row.verdict, row.state) == ("above payload ceiling", summary.WARN)
    assert "above the 941 Mbit/s payload ceiling of 1gbit" in unescape(io_section.render([over]))
    over["meta"]["wire_late"] = {"host1<rx": {"packets": 9, "p99_us": 20.0}}
    assert "impossible on a paced wire" in unescape(io_section.render([over]))
    healthy = remote_io(2, "paced", GBIT, read_s=8 * nbytes / (0.85 * GBIT), op="write")
    row = io_summary.remote_row(healthy)
    assert (row.verdict, row.state) == ("at least 80% of link", summary.GOOD)
    assert "payload ceiling" not in unescape(io_section.render([healthy]))


@pytest.mark.parametrize(("mbps", "above"), [(955.0, True), (1010.0, True), (945.0, False)])
def test_one_payload_ceiling_rule_on_the_first_screen_and_in_the_section(mbps, above):
    """955 Mbit/s on 1 Gbit is 1.4 % above its 941 Mbit/s of payload: above the ceiling in
    the network table and on the first screen alike; 945 (+0.4 %, a stack without TCP
    timestamps carries 1460 B a frame) is in line in both."""
    record = pingpong(1, "lab", GBIT)
    record["figures"]["bandwidth_mbps"] = mbps
    row = net_summary.pingpong_row("lab", "TCP", "host0-host1", record)
    why = section.above_ceiling(record, mbps)
    assert why.startswith("above the 941 Mbit/s payload ceiling") is above
    assert (row.verdict == "above payload ceiling") is above
    assert row.verdict == ("above payload ceiling" if above else "in line")


def test_remote_io_change_compares_runs_of_the_same_size_only():
    """Issue 24.3: the first screen's change column compares a remote write with the
    previous one of the same size and ranks; a run of another size is not a change."""
    nbytes = 4 * 32**3
    first = remote_io(1, "paced", GBIT, read_s=8 * nbytes / (0.9 * GBIT), op="write")
    other = remote_io(2, "paced", GBIT, read_s=8 * nbytes / (0.5 * GBIT), op="write")
    other["samples"][0]["size"] = 16  # another size: its MB/s are not comparable
    again = remote_io(3, "paced", GBIT, read_s=8 * nbytes / (0.45 * GBIT), op="write")
    records = [first, other, again]
    for r in records:
        r["figures"]["link_share"] = remote.link_shares(r["samples"], GBIT)
    history = report._History(SimpleNamespace(list=lambda: records))
    assert history.change("io", io_summary.rows, io_summary.remote_row(other)) == ""
    change = history.change("io", io_summary.rows, io_summary.remote_row(again))
    assert change == "remote netCDF to site1 write -50 % since run 1"
