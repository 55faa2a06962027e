#!/usr/bin/env python3
"""NetPIPE and clustertune side by side on one host pair of a virtual cluster.

Builds a 2-host virtual cluster (default: links shaped to 1 Gbit), runs Debian's NetPIPE
3.7.2 (NPtcp, and NPopenmpi / NPmpich2 with --mpi) and clustertune's ct-tcp-pingpong /
ct-mpi-pingpong between host0 and host1, and prints the ratios clustertune / NetPIPE.
docs/netpipe-comparison.md has the evidence behind every choice below.

How NetPIPE times a point (netpipe.c, tcp.c; 3 trials counted with strace on Debian's
binary): TRIALS=3 trials, each of nrepeat ping-pongs with nrepeat ~ 0.25 s / (previous
point's time), so one trial lasts 0.1-0.5 s; an untimed Sync ("SyncMe" both ways) before
each trial; np.out column 3 = MIN over the trials of the trial's mean half round trip,
in seconds (column 2 is Mbit/s with Mbit = 2^20 bits, not used here). NPtcp sets
TCP_NODELAY on both ends, like ct-tcp-pingpong by default.

clustertune's per-point statistic (t_min_s) is the same kind: MIN over trials of the
trial's mean half round trip, but by default over 5 trials of 20 ms (point time 0.1 s).
Shorter trials make the minimum of the means lower on a noisy box, so each ratio is also
given with ct run NetPIPE-style ("matched": 3 trials, each as long as NetPIPE's).

  bandwidth  mean of size/t over the message sizes >= 2 MiB both tools measured (at
             1 Gbit the token bucket inflates smaller ping-pong messages); per tool the
             MEDIAN over --runs full sweeps. Verdict on the matched ratio; target +-5 %.
  latency    1-byte half round trip. On this 2-vCPU box it is bimodal: ~9 us when both
             ends share a vCPU, 30-50 us when every wake-up crosses vCPUs, whichever
             tool runs. So it is measured in --rounds alternating rounds with both ends
             pinned to one vCPU ("same"), to two vCPUs ("cross") and left to the
             scheduler ("free"); per tool the MEDIAN over the rounds of its per-run value
             (min over trials of trial means). Verdict on "cross" (one vCPU per host, as
             two real hosts have; no scheduler lottery; "same" starves busy-polling MPI:
             MPICH/UCX then pays a scheduler tick, ~8 ms, per message); target +-10 %.
  wall time  whole run of each tool's default full sweep (median over --runs); ours must
             not be longer.
  peak       the highest throughput of any message size in each full sweep, as a share of
             the nominal link, against the link's TCP payload ceiling (1448/1538 of nominal,
             units.payload_rate_bps, + units.ABOVE_CEILING_TOLERANCE): the tbf wire lets
             mid-size messages through its bucket at up to 2x nominal, the paced wire does
             not (issue 19). Both tools, every run.
  delay      --delay-us D holds every packet D us each way (vcluster up --delay-us): the
             latency gains 2D, and a ping-pong of size S reads at most S / (S / rate + 2D),
             so bandwidth needs messages many round trips long (--max-size).

Sweeps alternate their order: odd runs NetPIPE, clustertune, matched; even runs matched
(timed like NetPIPE's trials of the run before), clustertune, NetPIPE (the row's "order"
lists each run's); so do the latency rounds.

Needs root (network namespaces). The cluster is always removed on exit.
    sudo .venv/bin/python bench/netpipe_compare.py [--link 1gbit] [--wire tbf|paced]
                       [--delay-us 0] [--max-size 8M] [--mpi openmpi,mpich] [--runs 1]
                       [--rounds 5] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from clustertune import kernels, vcluster
from clustertune.hostinfo import load_average
from clustertune.launch import process
from clustertune.launch.base import Job
from clustertune.launch.launchers import launcher_for
from clustertune.levels.network import pingpong  # declares the ping-pong kernels
from clustertune.units import ABOVE_CEILING_TOLERANCE, parse_rate, parse_size, payload_rate_bps

BANDWIDTH_FROM = 2 * 1024 * 1024
TCP_PORT = "5003"  # NPtcp uses 5002
NETPIPE_MPI = {"openmpi": "/usr/bin/NPopenmpi", "mpich": "/usr/bin/NPmpich2"}
NETPIPE_TRIALS = 3  # Debian's NetPIPE 3.7.2: 3 Syncs (= trials) per point under strace
FALLBACK_TRIAL_S = 0.25  # NetPIPE's RUNTM, when its trial length cannot be read
TARGETS = {"bandwidth": 0.05, "latency": 0.10}
NETPIPE_POINT = re.compile(r"\d+:\s+(\d+) bytes\s+(\d+) times -->\s+\S+ Mbps in\s+(\S+) usec")

Pin = tuple[str, str] | None  # vCPUs of host0's and host1's end, None = scheduler's choice


@dataclass
class Curve:
    tool: str
    times: dict[int, float]  # size -> the tool's per-point time: min over trials (s)
    wall_s: float
    trial_s: dict[int, float] | None = None  # NetPIPE: length of one trial per size (s)

    def throughput_mbps(self, size: int) -> float:
        return size * 8 / self.times[size] / 1e6

    def peak_share(self, nominal_bps: float) -> float:
        """The highest throughput over all sizes, as a share of the nominal rate."""
        return max(self.throughput_mbps(s) for s in self.times) * 1e6 / nominal_bps


def read_netpipe(path: Path, tool: str, wall_s: float, stderr: str = "") -> Curve:
    """np.out: one line per size: bytes, Mbit/s (2^20), min-over-trials half round trip (s).

    The progress lines on stderr ("N: S bytes R times --> X Mbps in T usec") give the
    repeats R of each point, hence NetPIPE's trial length 2 * R * T there."""
    times = {}
    for line in path.read_text().splitlines():
        fields = line.split()
        if len(fields) >= 3:
            times[int(fields[0])] = float(fields[2])
    if not times:
        raise RuntimeError(f"{tool} wrote no data to {path}")
    trial_s = {
        int(m.group(1)): 2 * int(m.group(2)) * float(m.group(3)) * 1e-6
        for m in NETPIPE_POINT.finditer(stderr)
    }
    return Curve(tool, times, wall_s, trial_s)


def read_clustertune(completed: process.Completed, tool: str) -> Curve:
    out = kernels.parse_output(completed.stdout)
    if completed.returncode != 0 or out.result is None or out.errors:
        raise RuntimeError(
            f"{tool} failed (exit {completed.returncode}): "
            f"{'; '.join(out.errors) or completed.stderr[-500:]}"
        )
    if out.result["verification"] != "passed":
        raise RuntimeError(f"{tool}: payload verification failed")
    return Curve(tool, {s["size"]: s["t_min_s"] for s in out.samples}, completed.elapsed_s)


def pinned(argv: list[str], cpu: str | None) -> list[str]:
    return ["taskset", "-c", cpu, *argv] if cpu is not None else argv


def netpipe_tcp(launcher, workdir: Path, max_size: int, pin: Pin = None) -> Curve:
    out = workdir / "nptcp.out"
    cpu0, cpu1 = pin or (None, None)
    # the receiver stops at its own upper bound (NetPIPE's default 8 MiB): give it ours
    receiver = pinned(["NPtcp", "-u", str(max_size), "-o", str(workdir / "nptcp.rx")], cpu1)
    # NPtcp's receiver says nothing when ready and its transmitter does not retry a
    # refused connect: the loop below waits for it; it is killed when the block ends
    with launcher.service("host1", receiver, ready=lambda: True, stop_grace=0.0):
        for _ in range(40):
            argv = ["NPtcp", "-h", "host1", "-u", str(max_size), "-o", str(out)]
            run = launcher.run_on_host("host0", pinned(argv, cpu0), timeout=600)
            if run.returncode == 0 or run.elapsed_s > 2:
                break
            time.sleep(0.25)
    if run.returncode != 0:
        raise RuntimeError(f"NPtcp failed: {run.stderr[-500:]}")
    return read_netpipe(out, "NPtcp", run.elapsed_s, run.stderr)


def clustertune_tcp(
    launcher, workdir: Path, max_size: int, pin: Pin = None, extra: tuple[str, ...] = ()
) -> Curve:
    binary = str(kernels.kernel_path("ct-tcp-pingpong", "serial"))
    cpu0, cpu1 = pin or (None, None)
    server = pinned([binary, "--server", "--port", TCP_PORT], cpu1)
    with launcher.service("host1", server, ready=pingpong.READY_PORT):
        argv = [binary, "--connect", f"host1:{TCP_PORT}", "--max-size", str(max_size), *extra]
        client = launcher.run_on_host("host0", pinned(argv, cpu0), timeout=600)
    return read_clustertune(client, "ct-tcp-pingpong")


def rank_pinner(workdir: Path, pin: Pin) -> Path | None:
    """A wrapper that pins rank 0 to pin[0] and rank 1 to pin[1], then execs the program."""
    if pin is None:
        return None
    path = workdir / f"pin-{pin[0]}-{pin[1]}.sh"
    path.write_text(
        "#!/bin/sh\n"
        'r="${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-0}}"\n'
        f'if [ "$r" = 0 ]; then c={pin[0]}; else c={pin[1]}; fi\n'
        'exec taskset -c "$c" "$@"\n'
    )
    path.chmod(0o755)
    return path


def mpi_job(program: Path, args: list[str], flavour: str, workdir: Path, pin: Pin) -> Job:
    wrapper = rank_pinner(workdir, pin)
    if wrapper is not None:
        program, args = wrapper, [str(program), *args]
    return Job(program, args, 2, flavour, hosts=["host0", "host1"], timeout=900)


def netpipe_mpi(launcher, workdir: Path, max_size: int, flavour: str, pin: Pin = None) -> Curve:
    out = workdir / f"np{flavour}.out"
    out.unlink(missing_ok=True)
    program = Path(NETPIPE_MPI[flavour])
    run = launcher.run_mpi(
        mpi_job(program, ["-u", str(max_size), "-o", str(out)], flavour, workdir, pin)
    )
    if run.returncode != 0 or not out.is_file():
        raise RuntimeError(f"{program} failed: {run.stderr[-500:]}")
    return read_netpipe(out, program.name, run.elapsed_s, run.stderr)


def clustertune_mpi(
    launcher,
    workdir: Path,
    max_size: int,
    flavour: str,
    pin: Pin = None,
    extra: tuple[str, ...] = (),
) -> Curve:
    program = kernels.kernel_path("ct-mpi-pingpong", flavour)
    job = mpi_job(program, ["--max-size", str(max_size), *extra], flavour, workdir, pin)
    return read_clustertune(launcher.run_mpi(job), f"ct-mpi-pingpong[{flavour}]")


def matched(theirs: Curve, sizes: list[int]) -> tuple[str, ...]:
    """ct options timing a point like NetPIPE: its 3 trials, each as long as NetPIPE's
    (median over `sizes` of NetPIPE's trial length there)."""
    lengths = [theirs.trial_s[s] for s in sizes if theirs.trial_s and s in theirs.trial_s]
    trial = statistics.median(lengths) if lengths else FALLBACK_TRIAL_S
    return ("--trials", str(NETPIPE_TRIALS), "--point-time", f"{NETPIPE_TRIALS * trial:.4f}")


def mean_bandwidth(curve: Curve, sizes: list[int]) -> float:
    return statistics.mean(curve.throughput_mbps(s) for s in sizes)


def ratio_row(ours: list[float], theirs: list[float], target: float | None) -> dict:
    """Median over runs of each side (and min, for reference); ratio ours / theirs."""
    mo, mt = statistics.median(ours), statistics.median(theirs)
    row = {
        "ours": ours,
        "theirs": theirs,
        "median": [mo, mt],
        "ratio": mo / mt,
        "min": [min(ours), min(theirs)],
        "ratio_of_min": min(ours) / min(theirs),
    }
    if target is not None:
        row["pass"] = abs(row["ratio"] - 1) <= target
    return row


def in_turn(k: int, first, second):
    """Both results, the first call first in even turns and last in odd ones."""
    if k % 2:
        b = second()
        return first(), b
    return first(), second()


def peak_limit(nominal_bps: float) -> float:
    """The most any message size may read, as a share of nominal: the payload ceiling."""
    return payload_rate_bps(nominal_bps) / nominal_bps * (1 + ABOVE_CEILING_TOLERANCE)


def side_by_side(
    pair: str,
    ours_fn,
    theirs_fn,
    max_size: int,
    runs: int,
    rounds: int,
    placements: dict[str, Pin],
    bandwidth_from: int,
    nominal_bps: float | None,
) -> dict:
    """Full sweeps (bandwidth, peak, wall time), then 1-byte rounds (latency); the order
    of the three sweeps of a run (NetPIPE, clustertune, matched) reverses every run."""
    bw_ours, bw_theirs, bw_matched, bw_theirs_m, wall_ours, wall_theirs = [], [], [], [], [], []
    peak_ours, peak_theirs = [], []
    sizes: list[int] = []
    order: list[list[str]] = []
    previous: Curve | None = None  # NetPIPE's sweep of the run before

    def sweep(name: str, fn, *args, **kwargs) -> Curve:
        order[-1].append(name)
        return fn(*args, **kwargs)

    def match_of(theirs: Curve) -> Curve:
        big = [s for s in theirs.times if s >= bandwidth_from]
        extra = ("--min-size", str(bandwidth_from), *matched(theirs, big))
        return sweep("matched", ours_fn, max_size, extra=extra)

    for run in range(runs):
        order.append([])
        match = match_of(previous) if run % 2 else None  # first, after the last run's
        theirs, ours = in_turn(
            run,
            lambda: sweep("NetPIPE", theirs_fn, max_size),
            lambda: sweep("clustertune", ours_fn, max_size),
        )
        match = match or match_of(theirs)
        previous = theirs
        if nominal_bps:
            peak_theirs.append(theirs.peak_share(nominal_bps))
            peak_ours.append(ours.peak_share(nominal_bps))
        sizes = sorted(s for s in set(ours.times) & set(theirs.times) if s >= bandwidth_from)
        msizes = [s for s in sizes if s in match.times]
        if not msizes:
            raise RuntimeError(f"{pair}: no common size >= {bandwidth_from} bytes")
        bw_theirs.append(mean_bandwidth(theirs, sizes))
        bw_ours.append(mean_bandwidth(ours, sizes))
        bw_theirs_m.append(mean_bandwidth(theirs, msizes))
        bw_matched.append(mean_bandwidth(match, msizes))
        wall_ours.append(ours.wall_s)
        wall_theirs.append(theirs.wall_s)
    lat: dict[str, dict[str, list[float]]] = {}
    last: dict[str, Curve] = {}  # NetPIPE's latest 1-byte run per placement
    for k in range(rounds):
        for name, pin in placements.items():
            got = lat.setdefault(name, {"theirs": [], "ours": [], "ours_default": []})
            if k % 2:  # ours first, matched to NetPIPE's trials of the round before
                got["ours"].append(ours_fn(1, pin=pin, extra=matched(last[name], [1])).times[1])
                last[name] = theirs_fn(1, pin=pin)
            else:
                last[name] = theirs_fn(1, pin=pin)
                got["ours"].append(ours_fn(1, pin=pin, extra=matched(last[name], [1])).times[1])
            got["theirs"].append(last[name].times[1])
            if name == "free":
                got["ours_default"].append(ours_fn(1, pin=pin).times[1])
    us = {name: {k: [t * 1e6 for t in v] for k, v in got.items()} for name, got in lat.items()}
    verdict_on = next(name for name in ("cross", "same", "free") if name in us)
    row = {
        "pair": pair,
        "order": order,
        "bandwidth_sizes": sizes,
        "bandwidth_mbps_default": ratio_row(bw_ours, bw_theirs, None),
        "bandwidth_mbps_matched": ratio_row(bw_matched, bw_theirs_m, TARGETS["bandwidth"]),
        "wall_s": ratio_row(wall_ours, wall_theirs, None),
        "latency_us": {
            name: ratio_row(
                v["ours"], v["theirs"], TARGETS["latency"] if name == verdict_on else None
            )
            for name, v in us.items()
        },
        "latency_verdict_on": verdict_on,
    }
    if "free" in us and us["free"]["ours_default"]:
        row["latency_us"]["free, ct default trials"] = ratio_row(
            us["free"]["ours_default"], us["free"]["theirs"], None
        )
    row["wall_s"]["pass"] = row["wall_s"]["ratio"] <= 1.0
    row["pass"] = {
        "bandwidth": row["bandwidth_mbps_matched"]["pass"],
        "latency": row["latency_us"][verdict_on]["pass"],
        "wall": row["wall_s"]["pass"],
    }
    if peak_theirs:
        row["peak_share"] = ratio_row(peak_ours, peak_theirs, None)
        row["peak_limit"] = peak_limit(nominal_bps)
        row["pass"]["peak"] = max(peak_ours + peak_theirs) <= row["peak_limit"]
    return row


def render(
    rows: list[dict],
    link: str,
    wire: str,
    delay_us: int,
    runs: int,
    rounds: int,
    load: dict[str, str],
) -> str:
    def verdict(r: dict) -> str:
        return "" if "pass" not in r else ("  ok" if r["pass"] else "  MISS")

    def line(label: str, r: dict, unit: str, fmt: str) -> str:
        (mo, mt), (lo, lt) = r["median"], r["min"]
        return (
            f"  {label:30s} {mo:{fmt}} / {mt:{fmt}} {unit:6s} ratio {r['ratio']:.3f}"
            f"   (min: {lo:{fmt}} / {lt:{fmt}}, ratio {r['ratio_of_min']:.3f})" + verdict(r)
        )

    lines = [
        f"NetPIPE vs clustertune, host0 <-> host1, links shaped to {link} ({wire} wire)"
        + (f", {delay_us} us delay each way" if delay_us else ""),
        f"values: clustertune / NetPIPE, MEDIAN over {runs} full sweep(s) or {rounds} latency"
        " round(s) (min over them in brackets)",
        "per run, both tools: min over trials of the trial's mean half round trip;"
        " 'matched' = ct with NetPIPE's 3 trials of NetPIPE's trial length",
        "targets: bandwidth (matched) 1 +- 0.05, latency (pinned, one vCPU per end) 1 +- 0.10,"
        " wall time <= 1",
        f"load average before {load['before']}, after {load['after']}"
        " (latency is only comparable on an otherwise idle machine)",
        "",
    ]
    for r in rows:
        big = r["bandwidth_sizes"]
        runs_order = "; ".join(f"run {i + 1}: {', '.join(o)}" for i, o in enumerate(r["order"]))
        lines += [
            r["pair"],
            f"  sweeps in the order {runs_order}",
            f"  bandwidth over {len(big)} sizes {big[0]}..{big[-1]} B:",
            line("bandwidth, matched", r["bandwidth_mbps_matched"], "Mbit/s", "8.1f"),
            line("bandwidth, ct default trials", r["bandwidth_mbps_default"], "Mbit/s", "8.1f"),
            "  latency, 1 byte half round trip:",
        ]
        for name, lat in r["latency_us"].items():
            label = name if "default" in name else f"{name}, matched"
            lines.append(line(label, lat, "us", "8.2f"))
        lines.append(line("wall time, default sweeps", r["wall_s"], "s", "8.1f"))
        if "peak_share" in r:
            peak = r["peak_share"]
            lines.append(
                line("peak of any size / nominal", peak, "", "8.3f")
                + (
                    f"   max {max(peak['ours'] + peak['theirs']):.3f}, limit (payload) "
                    f"{r['peak_limit']:.3f}{'  ok' if r['pass']['peak'] else '  MISS'}"
                )
            )
        lines.append("")
    return "\n".join(lines)


def placements(which: str) -> dict[str, Pin]:
    cpus = sorted(os.sched_getaffinity(0))
    known: dict[str, Pin] = {"same": (str(cpus[0]), str(cpus[0])), "free": None}
    if len(cpus) > 1:
        known["cross"] = (str(cpus[0]), str(cpus[1]))
    return {name: known[name] for name in which.split(",") if name in known}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--link", default="1gbit", help="link rate of both hosts (1gbit)")
    parser.add_argument(
        "--wire",
        choices=vcluster.WIRES,
        default=vcluster.DEFAULT_WIRE,
        help=f"the virtual cluster's link model ({vcluster.DEFAULT_WIRE})",
    )
    parser.add_argument(
        "--delay-us", type=int, default=0, help="delay of every packet each way, us (0)"
    )
    parser.add_argument("--max-size", default="8M", help="largest message (8M)")
    parser.add_argument("--mpi", default="", help="also compare MPI: openmpi,mpich")
    parser.add_argument("--runs", type=int, default=1, help="full sweeps per tool (1)")
    parser.add_argument("--rounds", type=int, default=5, help="1-byte latency rounds (5)")
    parser.add_argument(
        "--placements", default="same,cross,free", help="latency placements: same,cross,free (all)"
    )
    parser.add_argument("--bandwidth-from", default="2M", help="smallest size for bandwidth")
    parser.add_argument("--name", default="npbench", help="virtual cluster name (npbench)")
    parser.add_argument("--json", action="store_true", help="print the rows as JSON")
    args = parser.parse_args(argv)
    max_size = parse_size(args.max_size)
    flavours = [f for f in args.mpi.split(",") if f]
    where = placements(args.placements)
    link = parse_rate(args.link)
    common = dict(
        max_size=max_size,
        runs=args.runs,
        rounds=args.rounds,
        placements=where,
        bandwidth_from=parse_size(args.bandwidth_from),
        nominal_bps=link,
    )

    state = vcluster.plan(args.name, 2, link, wire=args.wire, delay_us=args.delay_us)
    rows = []
    load = {"before": load_average()}
    try:
        vcluster.up(state)
        launcher = launcher_for(vcluster.cluster_from_state(state))
        with tempfile.TemporaryDirectory(prefix="netpipe-compare-") as tmp:
            workdir = Path(tmp)
            rows.append(
                side_by_side(
                    "ct-tcp-pingpong / NPtcp",
                    partial(clustertune_tcp, launcher, workdir),
                    partial(netpipe_tcp, launcher, workdir),
                    **common,
                )
            )
            for flavour in flavours:
                ours = partial(clustertune_mpi, launcher, workdir, flavour=flavour)
                theirs = partial(netpipe_mpi, launcher, workdir, flavour=flavour)
                pair = f"ct-mpi-pingpong[{flavour}] / {Path(NETPIPE_MPI[flavour]).name}"
                rows.append(side_by_side(pair, ours, theirs, **common))
    finally:
        vcluster.down(args.name)
    load["after"] = load_average()
    if args.json:
        print(json.dumps({"rows": rows, "load_average": load}, indent=1))
    else:
        print(render(rows, args.link, args.wire, args.delay_us, args.runs, args.rounds, load))
    return 0 if all(all(r["pass"].values()) for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
