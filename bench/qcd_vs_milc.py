#!/usr/bin/env python3
"""ct-qcd beside MILC su3_ora (shared/peers), same lattice, beta, schedule and rank count.

Speed: one trajectory = 4 over-relaxation sweeps + 1 heat-bath sweep (MILC's
steps_per_trajectory 4, qhb_steps 1; ct-qcd --or-steps 4, one sweep per trajectory), cold
start, beta 6.0. For each lattice (8^4, 16^4) and rank count (1, 2; MILC's MPI build is
OpenMPI only) the two run --repeat times, the order alternating; link updates per second
(HB + OR, 4 V x 5 per trajectory over each program's own timed loop) best and median,
and the ratio (target >= 1.2), also round by round (the two runs of a round are
neighbours in time, so they share most of the load). What is timed is each program's own
loop over the trajectories on rank 0: MILC's "Time =" (its warm-up and measured
trajectories, the plaquette and Polyakov loop of the measured ones; set-up, the cold start
and the lattice layout come before it) and ct-qcd's time_s (from a barrier after the cold start
and its first halo exchange to the end of the last sweep, the plaquette after every
sweep; the gauge-invariance check after it). Beside it, the same link updates per CPU second of the
whole job (user + system time of mpirun and its ranks, start-up included): on a shared
machine a run's wall time moves with what else runs in its seconds, its CPU time much
less. ct-qcd's counted Gflops is set against the DGEMM rate of
the same ranks (ct-gemm --local). --baseline BIN runs a second ct-qcd build (e.g. the
previous commit's, copied aside) in the same rounds, the three programs' order rotating,
and prints new / baseline best and median: an A/B of two kernels under the same load.

Physics (--physics): thermalised plaquette at beta 6.0 and 5.7 on --physics-lattice from
both programs, mean with an autocorrelation-aware error (clustertune.levels.qcd.stats),
compared with each other (combined errors) and with the references of paper_qcd.json
(3 sigma). The machine is shared: the load average is printed with every figure.

Usage: bench/qcd_vs_milc.py [--lattices 8x8x8x8,16x16x16x16] [--ranks 1,2] [--repeat 3]
                            [--chrt P] [--baseline BIN] [--physics] [--physics-sweeps 600]
                            [--peers DIR] [--json F]
`bench/qcd_vs_milc.py --repeat 3` takes about 3 minutes on an idle machine (2 min 15 s when
the 8^4 runs were 40 trajectories; an estimate), far longer under load (docs/qcd.md).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from clustertune.hostinfo import load_average
from clustertune.levels.qcd import run as qcd
from clustertune.levels.qcd.paper import paper
from clustertune.levels.qcd.stats import estimate

ROOT = Path(__file__).resolve().parents[1]
PEERS_SRC = Path("/work/shared/peers")
MPIRUN = [
    "mpirun.openmpi",
    "--allow-run-as-root",
    "--oversubscribe",
    "--mca",
    "mpi_yield_when_idle",
    "1",
    "-np",
]
# --chrt P: both programs under `chrt -f P` (real-time FIFO), a core each while other jobs
# run, so that they are measured, not the load of the moment
PRIORITY: list[str] = []
CT_QCD = ROOT / "build/openmpi/bin/ct-qcd"
TIME_LINE = re.compile(r"^Time\s*=\s*([\d.eE+-]+)\s*seconds", re.M)
GMES_LINE = re.compile(r"^GMES\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)", re.M)
# trajectories (warm-up + measured) of the speed runs per lattice volume: each program's
# timed loop (MILC's "Time =" covers both) lasts 3-6 s idle on 8^4 and 6-20 s on 16^4, long
# enough that one run is not a few moments of another job's noise
SPEED_TRAJ = {8**4: (60, 60), 16**4: (3, 5)}


def milc_input(lattice: tuple[int, ...], beta: float, warms: int, trajecs: int, seed: int) -> str:
    nx, ny, nz, nt = lattice
    return (
        f"prompt 0\nnx {nx}\nny {ny}\nnz {nz}\nnt {nt}\niseed {seed}\n\nwarms {warms}\n"
        f"trajecs {trajecs}\ntraj_between_meas 1\nbeta {beta}\nsteps_per_trajectory 4\n"
        "qhb_steps 1\nfresh\nno_gauge_fix\nforget\n"
    )


def parse_milc(text: str) -> tuple[float, list[float]]:
    """MILC's 'Time =' and the normalised plaquette (ss + st) / 6 of every GMES line."""
    t = TIME_LINE.search(text)
    if not t:
        raise RuntimeError(f"MILC wrote no 'Time =' line:\n{text[-2000:]}")
    plaq = [(float(m.group(4)) + float(m.group(5))) / 6.0 for m in GMES_LINE.finditer(text)]
    return float(t.group(1)), plaq


def run_milc(
    peers: Path,
    np: int,
    lattice,
    beta: float,
    warms: int,
    trajecs: int,
    seed: int = 8352,
    timeout: float = 3600,
) -> tuple[float, list[float]]:
    with tempfile.NamedTemporaryFile("w", suffix=".in", delete=False) as f:
        f.write(milc_input(lattice, beta, warms, trajecs, seed))
    out = subprocess.run(
        [*PRIORITY, *MPIRUN, str(np), str(peers / "bin" / "su3_ora.mpi"), f.name],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    Path(f.name).unlink()
    if out.returncode != 0:
        raise RuntimeError(f"su3_ora.mpi exit {out.returncode}: {out.stderr[-2000:]}")
    return parse_milc(out.stdout)


def json_lines(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


def run_ours(
    np: int,
    lattice,
    beta: float,
    sweeps: int,
    start: str = "cold",
    seed: int = 1,
    timeout: float = 3600,
    binary: Path = CT_QCD,
) -> tuple[dict, list[float]]:
    grid = qcd.default_grid(lattice, np)
    argv = [
        *PRIORITY,
        *MPIRUN,
        str(np),
        str(binary),
        "--lattice",
        qcd.dims_text(lattice),
        "--grid",
        qcd.dims_text(grid),
        "--beta",
        str(beta),
        "--sweeps",
        str(sweeps),
        "--or-steps",
        "4",
        "--start",
        start,
        "--seed",
        str(seed),
    ]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    lines = json_lines(out.stdout)
    result = next((x for x in lines if x["type"] == "result"), None)
    if out.returncode != 0 or result is None or result["verification"] != "passed":
        raise RuntimeError(f"ct-qcd failed ({out.returncode}): {out.stderr[-2000:]}")
    series = [x["plaquette"] for x in lines if x["type"] == "sample" and "start" not in x]
    return result["figures"], series


def children_cpu() -> float:
    """User + system seconds of the finished child processes so far (mpirun and its ranks)."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def dgemm_gflops(np: int) -> float | None:
    argv = [
        *MPIRUN,
        str(np),
        str(ROOT / "build/openmpi/bin/ct-gemm"),
        "-N",
        "1000",
        "--type",
        "d",
        "--local",
        "--repeat",
        "3",
    ]
    env = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
    out = subprocess.run(
        argv, capture_output=True, text=True, timeout=600, env={**os.environ, **env}
    )
    rates = [
        x["gflops"] for x in json_lines(out.stdout) if x["type"] == "sample" and x.get("passed")
    ]
    return max(rates) if rates else None


def ensure_peers(peers: Path) -> None:
    if (peers / "bin" / "su3_ora.mpi").exists():
        return
    print(f"building MILC su3_ora into {peers} (shared/peers/build-peers.sh) ...", flush=True)
    subprocess.run(
        [str(PEERS_SRC / "build-peers.sh"), str(peers)],
        check=True,
        env={"SKIP_NPB": "1", "PATH": "/usr/bin:/bin"},
        stdout=subprocess.DEVNULL,
    )


def rotation(programs: list[str], i: int) -> list[str]:
    """Round i's order: each program goes first in turn (with two, the order alternates)."""
    k = i % len(programs)
    return programs[k:] + programs[:k]


def compare(ours: list[float], milc: list[float]) -> dict:
    """ct-qcd over MILC: best over best, median over median, and round by round."""
    return {
        "ratio_best": max(ours) / max(milc),
        "ratio_median": statistics.median(ours) / statistics.median(milc),
        "ratio_rounds": [o / m for o, m in zip(ours, milc, strict=True)],
    }


def speed(peers: Path, lattices, ranks, repeat: int, baseline: Path | None = None) -> list[dict]:
    rows = []
    programs = ["milc", "ours"] + (["baseline"] if baseline else [])
    for lattice in lattices:
        volume = 1
        for n in lattice:
            volume *= n
        warms, trajecs = SPEED_TRAJ.get(volume, (5, 10))
        links = 4 * volume * 5 * (warms + trajecs)
        for np in ranks:
            rate: dict[str, list[float]] = {who: [] for who in programs}
            cpu: dict[str, list[float]] = {who: [] for who in programs}
            gflops = []
            for i in range(repeat):
                for who in rotation(programs, i):
                    before = children_cpu()
                    if who == "milc":
                        t, _ = run_milc(peers, np, lattice, 6.0, warms, trajecs)
                        rate[who].append(links / t)
                    else:
                        binary = baseline if who == "baseline" else CT_QCD
                        f, _ = run_ours(np, lattice, 6.0, warms + trajecs, binary=binary)
                        rate[who].append(f["link_updates_per_s"])
                        if who == "ours":
                            gflops.append(f["counted_gflops"])
                    cpu[who].append(links / (children_cpu() - before))
            milc, ours = rate["milc"], rate["ours"]
            dgemm = dgemm_gflops(np)
            row = {
                "lattice": qcd.dims_text(lattice),
                "ranks": np,
                "milc_best": max(milc),
                "milc_median": statistics.median(milc),
                "ours_best": max(ours),
                "ours_median": statistics.median(ours),
                **compare(ours, milc),
                "loop_s": {who: links / statistics.median(r) for who, r in rate.items()},
                "ours_counted_gflops": max(gflops),
                "dgemm_gflops": dgemm,
                "milc_cpu_best": max(cpu["milc"]),
                "ours_cpu_best": max(cpu["ours"]),
                "ratio_cpu_best": max(cpu["ours"]) / max(cpu["milc"]),
                "ratio_cpu_median": statistics.median(cpu["ours"]) / statistics.median(cpu["milc"]),
                "load_average": load_average(),
            }
            if baseline:
                base = rate["baseline"]
                row.update(
                    {
                        "baseline_best": max(base),
                        "baseline_median": statistics.median(base),
                        "vs_baseline_best": max(ours) / max(base),
                        "vs_baseline_median": statistics.median(ours) / statistics.median(base),
                    }
                )
            rows.append(row)
            pct = f"{100 * row['ours_counted_gflops'] / dgemm:.1f} %" if dgemm else "n/a"
            print(
                f"{row['lattice']:>12} np={np}: MILC {row['milc_best']:.3g} (median "
                f"{row['milc_median']:.3g}), ct-qcd {row['ours_best']:.3g} (median "
                f"{row['ours_median']:.3g}) link updates/s; ratio best {row['ratio_best']:.2f}, "
                f"median {row['ratio_median']:.2f}, per round "
                f"{' '.join(f'{x:.2f}' for x in row['ratio_rounds'])}; timed loops "
                f"{row['loop_s']['milc']:.1f} s and {row['loop_s']['ours']:.1f} s (median); "
                f"ct-qcd {row['ours_counted_gflops']:.2f} "
                f"counted Gflops = {pct} of DGEMM ({dgemm or 0:.2f} Gflops on {np} ranks); "
                f"per CPU second: MILC {row['milc_cpu_best']:.3g}, ct-qcd {row['ours_cpu_best']:.3g}, "
                f"ratio best {row['ratio_cpu_best']:.2f}, median {row['ratio_cpu_median']:.2f}; "
                f"load {row['load_average']}",
                flush=True,
            )
            if baseline:
                print(
                    f"{'':>12} baseline {baseline}: {row['baseline_best']:.3g} (median "
                    f"{row['baseline_median']:.3g}); ct-qcd / baseline best "
                    f"{row['vs_baseline_best']:.2f}, median {row['vs_baseline_median']:.2f}",
                    flush=True,
                )
    return rows


def physics(peers: Path, lattice, sweeps: int, therm: int, np: int) -> list[dict]:
    rows = []
    refs = paper()["plaquette_references"]
    for beta in (6.0, 5.7):
        _, series = run_ours(np, lattice, beta, therm + sweeps, start="hot", seed=17)
        ours = estimate(series[therm:])
        _, milc_series = run_milc(peers, np, lattice, beta, therm, sweeps, seed=8352)
        milc = estimate(milc_series)
        row = {
            "beta": beta,
            "lattice": qcd.dims_text(lattice),
            "ours": ours.__dict__,
            "milc": milc.__dict__,
            "ours_vs_milc_sigmas": ours.sigmas_from(milc.mean, milc.error),
        }
        print(
            f"beta {beta} {row['lattice']}: ct-qcd <P> = {ours.mean:.5f} +- {ours.error:.5f} "
            f"(tau_int {ours.tau_int:.1f}, naive {ours.naive_error:.5f}, {ours.n} sweeps); "
            f"MILC {milc.mean:.5f} +- {milc.error:.5f} (tau_int {milc.tau_int:.1f}); "
            f"difference {row['ours_vs_milc_sigmas']:.1f} sigma",
            flush=True,
        )
        volume = f"{lattice[0]}^4" if len(set(lattice)) == 1 else row["lattice"]
        for ref in refs:
            if ref["beta"] == beta:
                s = ours.sigmas_from(ref["plaquette"], ref["error"])
                judged = ref["lattice"] in (volume, "large volume")
                row.setdefault("references", []).append({**ref, "sigmas": s, "judged": judged})
                verdict = (
                    ("OK" if s <= 3 else "OUTSIDE 3 sigma")
                    if judged
                    else "other volume, for information"
                )
                print(
                    f"    vs {ref['plaquette']} +- {ref['error']} ({ref['lattice']}): "
                    f"{s:.1f} sigma, {verdict}"
                )
        rows.append(row)
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lattices", default="8x8x8x8,16x16x16x16")
    ap.add_argument("--ranks", default="1,2")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--physics", action="store_true")
    ap.add_argument("--physics-lattice", default="8x8x8x8")
    ap.add_argument("--physics-sweeps", type=int, default=600)
    ap.add_argument("--physics-therm", type=int, default=100)
    ap.add_argument("--skip-speed", action="store_true")
    ap.add_argument("--peers", type=Path, default=ROOT / "build" / "peers")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--chrt", type=int, metavar="P", help="run both under chrt -f P (root)")
    ap.add_argument(
        "--baseline",
        type=Path,
        metavar="BIN",
        help="a second ct-qcd (OpenMPI build) run in the same rounds: an A/B",
    )
    args = ap.parse_args()
    if args.baseline and not os.access(args.baseline, os.X_OK):
        ap.error(f"--baseline: {args.baseline} is not an executable")
    if args.chrt:
        PRIORITY[:] = ["chrt", "-f", str(args.chrt)]
    ensure_peers(args.peers)
    print(f"load average at start: {load_average()}", flush=True)
    out: dict = {}
    if not args.skip_speed:
        lattices = [qcd.parse_dims(x, "--lattices") for x in args.lattices.split(",")]
        out["speed"] = speed(
            args.peers,
            lattices,
            [int(r) for r in args.ranks.split(",")],
            args.repeat,
            args.baseline,
        )
    if args.physics:
        out["physics"] = physics(
            args.peers,
            qcd.parse_dims(args.physics_lattice, "--physics-lattice"),
            args.physics_sweeps,
            args.physics_therm,
            1,
        )
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))
    slow = [r for r in out.get("speed", []) if r["ratio_best"] < 1.2]
    off = [
        r
        for r in out.get("physics", [])
        if r["ours_vs_milc_sigmas"] > 3
        or any(x["judged"] and x["sigmas"] > 3 for x in r.get("references", []))
    ]
    return 1 if slow or off else 0


if __name__ == "__main__":
    sys.exit(main())
