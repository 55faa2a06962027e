#!/usr/bin/env python3
"""ct-qcd and MILC su3_ora on 2 ranks, each as the machine is and beside one busy loop: how
much each slows down when a third program wants one of the two cores (issue 23 item 5).

The kernels' message wait (ct_mpi_waitall, kernels/common/ct_mpi.c) decides that: a rank
that waits for its neighbour's halo while the neighbour has lost its core to the loop should
give its own core away. The wait variants run from one binary, chosen by environment
(CT_MPI_WAIT_SPIN_US, CT_MPI_WAIT_NAP_US; "default" sets neither, "yield" is the wait
before issue 23: poll and sched_yield for ever).

For each lattice and MPI, --repeat rounds; in each round the two conditions (as-is, then
with `sh -c 'while :; do :; done'` beside the ranks, the order alternating round by round)
and in each condition every program once (MILC, then ct-qcd with each wait variant, the
order rotating). Schedule and rate as bench/qcd_vs_milc.py: one trajectory = 1 heat-bath
+ 4 over-relaxation sweeps, cold start, beta 6.0, link updates per second of each program's
own timed loop. Prints per program the rate as-is and busy (best / median), the slowdown
(as-is median / busy median, and per round: the two conditions of a round are neighbours
in time, so they share most of the machine's other load), and per ct-qcd variant its busy
rate over MILC's. MILC's MPI build is Open MPI only (shared/peers/README.md): with
--mpi mpich only ct-qcd runs, and only its slowdown is printed.

Done when (issue 23.5), for the first variant on each lattice: ct-qcd's slowdown <= MILC's
and ct-qcd's busy median >= 1.2 x MILC's; the exit status is 0 if so, 1 if not.

Usage: bench/wait_neighbour.py [--lattices 8x8x8x8,16x16x16x16] [--mpi openmpi|mpich]
                               [--variants default,yield,50/200] [--repeat 3]
                               [--trajectories N] [--peers DIR] [--json F] [--nice N]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import statistics
import subprocess
import sys
from pathlib import Path

from qcd_vs_milc import MPIRUN, ensure_peers, json_lines, run_milc

from clustertune.hostinfo import load_average
from clustertune.levels.qcd import run as qcd

ROOT = Path(__file__).resolve().parents[1]
BUSY_LOOP = ["sh", "-c", "while :; do :; done"]
# the launchers MILC runs with (qcd_vs_milc.py's; Open MPI's blocking calls yield when idle)
LAUNCH = {"openmpi": MPIRUN, "mpich": ["mpiexec.mpich", "-n"]}
# trajectories per run by lattice volume: a timed loop of about 1-2 s idle (both programs),
# 5-15 s under a load of 5-10
TRAJECTORIES = {8**4: 40, 16**4: 6}
TARGET = 1.2


def wait_env(variant: str) -> dict[str, str]:
    """``default``: the built-in wait; ``yield``: the old wait; ``SPIN/NAP``: the knobs."""
    if variant == "default":
        return {}
    if variant == "yield":
        return {"CT_MPI_WAIT_SPIN_US": "-1"}
    spin, nap = variant.split("/")
    return {"CT_MPI_WAIT_SPIN_US": spin, "CT_MPI_WAIT_NAP_US": nap}


def ours_rate(mpi: str, lattice, trajectories: int, variant: str) -> float:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CT_MPI_WAIT_")}
    env.update(wait_env(variant), OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    argv = [
        *LAUNCH[mpi],
        "2",
        str(ROOT / "build" / mpi / "bin" / "ct-qcd"),
        "--lattice",
        qcd.dims_text(lattice),
        "--grid",
        qcd.dims_text(qcd.default_grid(lattice, 2)),
        "--beta",
        "6.0",
        "--sweeps",
        str(trajectories),
        "--or-steps",
        "4",
        "--start",
        "cold",
    ]
    out = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=3600)
    result = next((x for x in json_lines(out.stdout) if x["type"] == "result"), None)
    if out.returncode != 0 or result is None or result["verification"] != "passed":
        raise RuntimeError(f"ct-qcd ({variant}) failed ({out.returncode}): {out.stderr[-2000:]}")
    return result["figures"]["link_updates_per_s"]


def milc_rate(peers: Path, lattice, trajectories: int) -> float:
    warms = trajectories // 2
    seconds, _ = run_milc(peers, 2, lattice, 6.0, warms, trajectories - warms)
    volume = lattice[0] * lattice[1] * lattice[2] * lattice[3]
    return 4 * volume * 5 * trajectories / seconds


def slowdown(asis: list[float], busy: list[float]) -> dict:
    """As-is rate over busy rate: medians, and round by round."""
    rounds = [a / b for a, b in zip(asis, busy, strict=True)]
    return {
        "slowdown": statistics.median(asis) / statistics.median(busy),
        "slowdown_rounds": rounds,
    }


def measure(args, lattice) -> dict:
    volume = lattice[0] * lattice[1] * lattice[2] * lattice[3]
    trajectories = args.trajectories or TRAJECTORIES.get(volume, 6)
    programs = (["milc"] if args.mpi == "openmpi" else []) + args.variants
    rates: dict[tuple[str, str], list[float]] = {}
    for i in range(args.repeat):
        for busy in (False, True) if i % 2 == 0 else (True, False):
            loop = subprocess.Popen(BUSY_LOOP) if busy else None
            cond = "busy" if busy else "as-is"
            try:
                k = i % len(programs)
                for who in programs[k:] + programs[:k]:
                    if who == "milc":
                        rate = milc_rate(args.peers, lattice, trajectories)
                    else:
                        rate = ours_rate(args.mpi, lattice, trajectories, who)
                    rates.setdefault((who, cond), []).append(rate)
                    print(
                        f"round {i + 1} {cond:<5} {qcd.dims_text(lattice)} {who:<10} "
                        f"{rate:10.4g} link updates/s  (load {load_average()})",
                        flush=True,
                    )
            finally:
                if loop is not None:
                    loop.kill()
                    loop.wait()
    rows = {}
    for who in programs:
        asis, busy = rates[(who, "as-is")], rates[(who, "busy")]
        rows[who] = {
            "asis_best": max(asis),
            "asis_median": statistics.median(asis),
            "busy_best": max(busy),
            "busy_median": statistics.median(busy),
            "asis": asis,
            "busy": busy,
            **slowdown(asis, busy),
        }
    return {
        "lattice": qcd.dims_text(lattice),
        "mpi": args.mpi,
        "trajectories": trajectories,
        "programs": rows,
        "load_average": load_average(),
    }


def verdict(result: dict) -> bool | None:
    """The first variant against MILC (None without MILC)."""
    rows = result["programs"]
    if "milc" not in rows:
        return None
    ours, milc = rows[next(w for w in rows if w != "milc")], rows["milc"]
    return (
        ours["slowdown"] <= milc["slowdown"] and ours["busy_median"] >= TARGET * milc["busy_median"]
    )


def report(result: dict) -> None:
    rows = result["programs"]
    print(
        f"{result['lattice']} on 2 ranks ({result['mpi']}), {result['trajectories']} "
        f"trajectories a run; link updates/s best / median; load {result['load_average']}"
    )
    milc = rows.get("milc")
    for who, r in rows.items():
        line = (
            f"  {who:<10} as-is {r['asis_best']:9.3g} / {r['asis_median']:9.3g}   "
            f"busy {r['busy_best']:9.3g} / {r['busy_median']:9.3g}   slowdown "
            f"{r['slowdown']:5.2f} (rounds {' '.join(f'{x:.2f}' for x in r['slowdown_rounds'])})"
        )
        if milc and who != "milc":
            line += (
                f"   / MILC busy {r['busy_median'] / milc['busy_median']:.2f}, "
                f"as-is {r['asis_median'] / milc['asis_median']:.2f}"
            )
        print(line, flush=True)
    ok = verdict(result)
    if ok is not None:
        print(
            f"  done-when (slowdown <= MILC's, busy >= {TARGET} x MILC): {'MET' if ok else 'NOT MET'}"
        )


def ahead(nice: int) -> None:
    """This process and its children ahead of the machine's other work. With the kernel's
    autogroups (sched_autogroup_enabled) a process's nice value counts only against its
    own session: between sessions the CPU is shared per session, so the bench leaves its
    caller's session for one of its own and gives that session the nice value. The busy
    loop and the ranks stay in one session, where they share the two cores as equals."""
    with contextlib.suppress(OSError):  # already a session leader: its session is ours
        os.setsid()
    autogroup = Path("/proc/self/autogroup")
    if autogroup.exists():
        autogroup.write_text(str(nice))
    os.setpriority(os.PRIO_PROCESS, 0, nice)  # inherited by every child


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lattices", default="8x8x8x8,16x16x16x16")
    ap.add_argument("--mpi", choices=sorted(LAUNCH), default="openmpi")
    ap.add_argument("--variants", default="default,yield")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--trajectories", type=int, help="per run (default: by lattice)")
    ap.add_argument("--peers", type=Path, default=ROOT / "build" / "peers")
    ap.add_argument("--json", type=Path)
    ap.add_argument(
        "--nice",
        type=int,
        help="the bench in a session of its own at nice N, its ranks and busy loop with it "
        "(root: N < 0 puts a shared machine's other load far behind them; see ahead())",
    )
    args = ap.parse_args()
    args.variants = args.variants.split(",")
    # killed, the bench still stops its busy loop (the finally around each condition)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    for v in args.variants:
        if v not in ("default", "yield") and not (
            v.count("/") == 1 and all(p.lstrip("-").isdigit() for p in v.split("/"))
        ):
            ap.error(f"--variants: {v!r} is not default, yield or SPIN/NAP")
    if args.mpi == "openmpi":
        ensure_peers(args.peers)
    if args.nice is not None:
        ahead(args.nice)
    print(
        f"load average at start: {load_average()}, nice {os.getpriority(os.PRIO_PROCESS, 0)}",
        flush=True,
    )
    results = []
    for text in args.lattices.split(","):
        results.append(measure(args, qcd.parse_dims(text, "--lattices")))
        report(results[-1])
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    return 1 if any(verdict(r) is False for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
