#!/usr/bin/env python3
"""The Linpack tuner judged: against an exhaustive sweep of its space, against the
machine's DGEMM rate, and against Debian's hpcc as shipped.

Prints three ratios:
  1. tuned / exhaustive at the same N (--n, both searches on this host): the exhaustive
     sweep runs every combination of the tuner's space after the BLAS choice (every
     ranks x threads layout, NB, P x Q, DEPTH, BCAST, SWAP, PFACT, RFACT, NBMIN) with the
     BLAS the tuner chose; then the tuned configuration and the sweep's best are rerun
     alternately (--repeat rounds, each launch several LUs filling ~2 s) and the ratio is
     that of their medians, so it is not the max of thousands of noisy samples against
     one. The tuned configuration is the one the tuner confirmed at --n; its scale
     stage (layout and NB again at a larger N, for the HPL.dat's N) has no counterpart
     in the sweep. The time ratio is the tuner's launch time in the same stages (layout,
     search, confirm) over the sweep's, the BLAS and scale stages printed apart.
     Target (issue 14): >= 0.95 of the rate in <= 0.25 of the time.
  2. tuned Linpack (the configuration after the scale stage) at the largest N that fits
     / the best DGEMM (ct-gemm --local, np ranks x 1 thread, before and after, the
     higher) of every BLAS that passed the tuner's checks: target >= 0.92; --growth
     runs it at smaller Ns first (the ratio against N). "Fits": --peak-n memory is the largest N for
     --mem-fraction of memory (~25 min per run here); --peak-n auto (default) the
     largest whose run lasts about --peak-minutes at 0.9 of the DGEMM rate, capped by
     memory; the N used is printed. --memory-run adds one run at the memory N after
     the peak round (hpcc stays at the peak round's N, where its ratio is printed): the
     figure at the largest N that fits, in one bench; its expected length is printed
     first, from the peak round's rate.
  3. tuned Linpack / hpcc (Debian's hpcc, its default BLAS, the tuned HPL.dat: same N,
     NB, P x Q, variant, ranks and BLAS threads), alternating, --peak-repeat rounds;
     hpcc also runs its other tests, so its round takes longer than ours.
--default, instead of the tuner: issue 23's untuned figure, `clustertune linpack --np NP
--mem-fraction F` as a user runs it (no HPL.dat: the host's BLAS choice, its NB and
grid) / the best correct DGEMM of the host (ct-gemm --local on NP ranks, --dgemm-n, 5
products, with every BLAS whose DGEMM passed the host's choice at half the best's rate
or more, before the run; the best of them again after; the higher): target >= 0.92.
The machine is shared: the load average is printed before and after, and the whole
bench's time at the end.

Usage: bench/tune_linpack.py [--np 2] [--n 1024] [--space quick|full] [--budget 3]
                             [--peak-n auto|memory|N] [--peak-minutes 1] [--repeat 3]
                             [--peak-repeat 1] [--growth N,N,..] [--memory-run]
                             [--skip-peak] [--json out]
       bench/tune_linpack.py --default [--np 2] [--mem-fraction 0.8] [--dgemm-n 4000]
                             [--json out]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import linpack_vs_hpcc as hpcc  # noqa: E402  (the hpcc runner and HPL.dat helpers)

from clustertune.cluster import local_cluster  # noqa: E402
from clustertune.hostinfo import load_average  # noqa: E402
from clustertune.levels.linpack import blas as blaslib  # noqa: E402
from clustertune.levels.linpack import choice, jobs  # noqa: E402
from clustertune.levels.tune import hpldat, linpack, space  # noqa: E402
from clustertune.levels.tune.space import Config  # noqa: E402
from clustertune.results import Store  # noqa: E402

# Linpack at a large N runs at about this share of the DGEMM rate (0.90-0.94 measured
# here): the rate the --peak-n auto N is sized with
PEAK_OF_DGEMM = 0.9
# what names a BLAS in the environment (choice.told): not set for a default run
NAMES_BLAS = ("LD_LIBRARY_PATH", "OPENBLAS_CORETYPE")
# the quick space: BCAST and SWAP whole, the factorisations' two usual choices each
QUICK = {"depth": (0, 1), "bcast": (0, 1, 2, 3, 4, 5), "swap": (0, 1, 2), "pfact": (1, 2),
         "rfact": (1, 2), "nbmin": (4,)}  # fmt: skip


def exhaustive(
    tuner: linpack.Tuner, blas: str, n: int, nbs: list[int]
) -> tuple[Config, float, float, int]:
    """Every combination, one launch per layout x SWAP (the kernel runs the lists'
    product); the best passing configuration, its rate, the launch time, the count."""
    began, trials = time.monotonic(), []
    for ranks, threads in space.layouts(tuner.np, tuner.cores_per_host(), 1):
        grids = space.grids(ranks)
        base = Config(blas, ranks, threads)
        extra = {
            "--nb": ",".join(map(str, nbs)),
            "-P": ",".join(str(p) for p, _ in grids),
            "-Q": ",".join(str(q) for _, q in grids),
        }
        for dim, values in tuner.dimensions.items():
            if dim != "swap":
                extra[space.FLAGS[dim]] = ",".join(map(str, values))
        for swap in tuner.dimensions["swap"]:
            record = tuner.lu("exhaustive", replace(base, swap=swap), n, extra, tuner.timeout)
            trials += tuner.passing(record, replace(base, swap=swap))
    best = max(trials, key=lambda t: t[1])
    return best[0], best[1], time.monotonic() - began, len(trials)


def head_to_head(
    tuner: linpack.Tuner, a: Config, b: Config, n: int, repeat: int, samples: int
) -> tuple[list, list]:
    """``repeat`` rounds, the order alternating; each launch runs ``samples`` LUs
    (-N n,n,..) so that a round holds seconds of both, not one tenth of a second."""
    ra: list[float] = []
    rb: list[float] = []
    ns = {"-N": ",".join([str(n)] * samples)}
    for i in range(repeat):
        for cfg, out in ((a, ra), (b, rb)) if i % 2 == 0 else ((b, rb), (a, ra)):
            out += [
                r
                for _, r in tuner.passing(tuner.lu("head-to-head", cfg, n, ns, tuner.timeout), cfg)
            ]
    return ra, rb


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--np", type=int, default=2)
    ap.add_argument("--n", type=int, default=1024, help="N of the search and the sweep")
    ap.add_argument("--space", choices=("quick", "full"), default="quick")
    ap.add_argument("--budget", type=float, default=3.0, help="tuner budget, minutes")
    ap.add_argument(
        "--peak-n",
        default="auto",
        help="N of the peak run: a number, 'memory' (the largest for --mem-fraction"
        " of memory) or 'auto' (the run lasts ~--peak-minutes, capped by memory;"
        " default)",
    )
    ap.add_argument(
        "--peak-minutes",
        type=float,
        default=1.0,
        help="length of one peak run with --peak-n auto (1: hpcc's other tests come on top)",
    )
    ap.add_argument("--mem-fraction", type=float, default=0.8)
    ap.add_argument("--dgemm-n", type=int, default=4000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--peak-repeat", type=int, default=1)
    ap.add_argument(
        "--growth",
        default="",
        help="Ns (comma-separated) at which the peak's configuration also runs once, before the"
        " peak run: the ratio to DGEMM against N",
    )
    ap.add_argument(
        "--memory-run",
        action="store_true",
        help="after the peak round, run the tuned configuration once more at the largest N"
        " for --mem-fraction of memory (hpcc is not run there)",
    )
    ap.add_argument("--skip-peak", action="store_true")
    ap.add_argument(
        "--default",
        action="store_true",
        help="no tuner: the default `clustertune linpack --np NP --mem-fraction F` against"
        " the best correct DGEMM of the host",
    )
    ap.add_argument("--timeout", type=float, default=7200)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    if args.peak_n not in ("auto", "memory") and not args.peak_n.isdigit():
        ap.error(f"--peak-n: a number, 'auto' or 'memory', not {args.peak_n!r}")
    if args.memory_run and (args.peak_n == "memory" or args.skip_peak):
        ap.error(
            "--memory-run: the peak round must run at another N (not --peak-n memory,"
            " not --skip-peak)"
        )
    if not all(v.isdigit() for v in filter(None, args.growth.split(","))):
        ap.error(f"--growth: comma-separated numbers, not {args.growth!r}")
    started = time.monotonic()
    print(f"load average before: {load_average()}", flush=True)
    if args.default:
        return finish(args, default_vs_dgemm(args), started)
    with tempfile.TemporaryDirectory(prefix="ct-tune-bench-") as tmp:
        store = Store(Path(tmp) / "results.db")
        dims = QUICK if args.space == "quick" else dict(space.DIMENSIONS)
        tuner = linpack.Tuner(
            local_cluster(),
            store,
            args.np,
            "openmpi",
            args.budget * 60,
            n_search=args.n,
            n_confirm=args.n,
            dimensions=dict(dims),
            timeout=args.timeout,
            mem_fraction=args.mem_fraction,
        )
        began = time.monotonic()
        summary = tuner.tune()
        tuned_s = time.monotonic() - began
        # the comparison is at --n: the configuration confirmed there; the scale stage
        # (layout and NB again at a larger N, for the HPL.dat's N) has no counterpart in
        # the sweep, so its time is apart and its result is what the peak run uses
        tuned, scaled = Config(**summary["config_confirmed"]), Config(**summary["config"])
        scale_s = summary["stage_s"].get("scale", 0.0)
        same_s = sum(v for k, v in summary["stage_s"].items() if k not in ("blas", "scale"))
        print(
            f"tuner: {tuned.code()} NB {tuned.nb} {tuned.p}x{tuned.q} {tuned.ranks}x"
            f"{tuned.threads} {summary['blas']}, {summary['gflops_confirm']:.2f} Gflop/s at "
            f"N={args.n}; {tuned_s:.0f} s in all, BLAS stage {summary['stage_s']['blas']:.0f} s, "
            f"scale stage {scale_s:.0f} s, the rest {same_s:.0f} s",
            flush=True,
        )
        print(
            f"tuner at N={summary['n_scale']}: NB {scaled.nb} {scaled.p}x{scaled.q} "
            f"{scaled.ranks}x{scaled.threads}, {summary['gflops_scale']:.2f} Gflop/s ("
            f"{summary['why']['at N']})",
            flush=True,
        )
        nbs = choice.nb_candidates(choice.DEFAULT_BLOCK, None, args.n)
        ex, ex_rate, ex_s, count = exhaustive(tuner, tuned.blas, args.n, nbs)
        print(
            f"exhaustive: {count} combinations in {ex_s:.0f} s, best {ex.code()} NB {ex.nb} "
            f"{ex.p}x{ex.q} {ex.ranks}x{ex.threads} {ex_rate:.2f} Gflop/s",
            flush=True,
        )
        samples = space.samples_for(
            args.n, summary["gflops_search"], linpack.CONFIRM_LAUNCH_S, linpack.CONFIRM_SAMPLES
        )
        rt, rx = head_to_head(tuner, tuned, ex, args.n, args.repeat, samples)
        ratio, best = statistics.median(rt) / statistics.median(rx), max(rt) / max(rx)
        print(
            f"rerun alternately x{args.repeat}, {samples} LUs per launch: tuned median "
            f"{statistics.median(rt):.2f} (best {max(rt):.2f}), exhaustive's best median "
            f"{statistics.median(rx):.2f} (best {max(rx):.2f}) Gflop/s"
        )
        print(
            f"RATIO tuned / exhaustive: rate {ratio:.3f} (medians of {len(rt)} and {len(rx)} "
            f"samples; best {best:.3f}; target >= 0.95), time {same_s / ex_s:.3f} (target "
            f"<= 0.25; with the BLAS and scale stages {tuned_s / ex_s:.3f})",
            flush=True,
        )
        if summary["within_noise"]:
            print(
                "tuner's choices within the noise: "
                + "; ".join(f"{k}: {v}" for k, v in summary["within_noise"].items())
            )
        figures = {
            "n": args.n,
            "space": args.space,
            "tuned": asdict(tuned),
            "exhaustive": asdict(ex),
            "combinations": count,
            "tuned_runs": rt,
            "exhaustive_runs": rx,
            "rate_ratio": ratio,
            "rate_ratio_best": best,
            "tuner_s": tuned_s,
            "within_noise": summary["within_noise"],
            "tuner_same_stages_s": same_s,
            "exhaustive_s": ex_s,
            "scale_s": scale_s,
            "scaled": asdict(scaled),
            "n_scale": summary["n_scale"],
            "time_ratio": same_s / ex_s,
            "why": summary["why"],
        }
        if not args.skip_peak:
            figures |= peak(args, tuner, scaled, summary)
    return finish(args, figures, started)


def finish(args: argparse.Namespace, figures: dict, started: float) -> int:
    """The load after and the bench's time printed and added to ``figures``, written to
    --json."""
    figures["load_average_after"] = load_average()
    figures["bench_s"] = time.monotonic() - started
    print(
        f"load average after: {figures['load_average_after']}; "
        f"the bench took {figures['bench_s'] / 60:.1f} min"
    )
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
    return 0


def default_vs_dgemm(args: argparse.Namespace) -> dict:
    """`clustertune linpack --np NP --mem-fraction F` as a user runs it, against the best
    correct DGEMM of the host (module docstring, --default)."""
    # no BLAS named in the environment (else the run would not take the host's choice)
    plain = {k: v for k, v in hpcc.environment().items() if k not in NAMES_BLAS}
    with tempfile.TemporaryDirectory(prefix="ct-default-bench-") as tmp:
        store = Store(Path(tmp) / "r.db")
        # the host's choice: stored, or measured now as a first run would
        host = choice.resolve(local_cluster(), store, args.np, "openmpi", None)
        store.close()
    if host is None:
        sys.exit("no BLAS of this host passed its checks")
    print(f"host's BLAS choice ({host['how']}): {host['label']}", flush=True)
    # its candidates that passed every check they ran, at half the best's rate or more
    screen = {k: r for k, r in host["rates"]["screen"].items() if k not in host["excluded"]}
    correct = [
        b for b in choice.candidates() if screen.get(b.key, 0.0) >= 0.5 * max(screen.values())
    ]

    def dgemm(b: blaslib.Blas) -> float:
        env = plain | jobs.BLAS_THREADS | blaslib.environment(b)
        return hpcc.run_dgemm(args.dgemm_n, args.np, 5, env, args.timeout)

    before = {b.label: dgemm(b) for b in correct}
    print(
        "DGEMM before " + ", ".join(f"{k} {v:.2f}" for k, v in before.items()) + " Gflop/s",
        flush=True,
    )
    run = default_linpack(args, plain)
    best = max(correct, key=lambda b: before[b.label])
    after = dgemm(best)
    top = max(*before.values(), after)
    ratio = run["gflops"] / top
    print(
        f"RATIO default Linpack N={run['n']} ({args.mem_fraction:.0%} of memory) / best "
        f"correct DGEMM ({best.label}, {args.np} ranks, higher of before/after {top:.2f}): "
        f"{ratio:.3f} (target >= 0.92)",
        flush=True,
    )
    return {"default_run": run, "dgemm_before": before, "dgemm_after": after, "vs_dgemm": ratio}


def default_linpack(args: argparse.Namespace, env: dict[str, str]) -> dict:
    """One `clustertune linpack --np NP --mem-fraction F` (its own database): its best
    passing result (0 Gflop/s when none passed), what it picked and the BLAS it ran."""
    with tempfile.TemporaryDirectory(prefix="ct-default-run-") as tmp:
        argv = [sys.executable, "-m", "clustertune.cli", "linpack", "--np", str(args.np)]
        argv += ["--mem-fraction", str(args.mem_fraction), "--timeout", str(args.timeout)]
        argv += ["--json", "--db", f"{tmp}/r.db"]
        began = time.monotonic()
        done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=args.timeout)
        wall = time.monotonic() - began
    if done.returncode not in (0, 1):  # 1: stored, its check failed (a rate of 0 below)
        sys.exit(f"clustertune linpack: exit {done.returncode}: {done.stderr[-2000:]}")
    record = json.loads(done.stdout)
    if not record["results"]:
        sys.exit(f"clustertune linpack: no result: {record['error']}")
    passed = [r for r in record["results"] if r["passed"] is True]
    best = max(passed, key=lambda r: r["gflops"], default=record["results"][0])
    said = record["params"].get("blas_choice") or {}
    run = {
        "n": best["n"],
        "nb": best["nb"],
        "grid": f"{best['p']}x{best['q']}",
        "gflops": best["gflops"] if passed else 0.0,
        "residual": best["residual"],
        "blas": said.get("label"),
        "core_that_ran": record["detail"].get("blas", {}).get("core"),
        "defaults": record["params"].get("defaults", {}),
        "wall_s": wall,
    }
    print(
        f"default Linpack N={run['n']} NB {run['nb']} {run['grid']} [{run['blas']}, core that "
        f"ran {run['core_that_ran']}]: {run['gflops']:.2f} Gflop/s, residual "
        f"{run['residual']} {'PASSED' if passed else 'FAILED'} ({wall:.0f} s wall)",
        flush=True,
    )
    return run


def peak_n(args: argparse.Namespace, tuned: Config, n_memory: int, dgemm: float) -> tuple[int, str]:
    """The peak run's N and how it was chosen."""
    if args.peak_n == "memory":
        return n_memory, f"the largest for {args.mem_fraction:.0%} of memory"
    if args.peak_n != "auto":
        return int(args.peak_n), "given"
    rate = PEAK_OF_DGEMM * dgemm
    n = space.n_for_time(rate, 60.0 * args.peak_minutes, tuned.nb, n_memory, tuned.nb)
    capped = " (the memory cap)" if n == n_memory // tuned.nb * tuned.nb else ""
    return n, (
        f"auto: ~{args.peak_minutes:g} min at {PEAK_OF_DGEMM} x DGEMM = {rate:.1f} "
        f"Gflop/s, memory N {n_memory}{capped}"
    )


def phases(sample: dict) -> str:
    """Where an LU's time went: each phase's maximum over the ranks (docs/linpack.md)."""
    return "phases (s, max over ranks) " + " ".join(
        f"{k} {v['max']:.1f}" for k, v in sample["phase_stats"].items()
    )


def blas_said(env: dict[str, str]) -> str:
    """The BLAS a launch with ``env`` loads: the library its libblas.so.3 resolves to
    (LD_LIBRARY_PATH first, else the system's alternative) and the OpenBLAS core (the
    environment's, else the one the library picks on this CPU)."""
    first = [Path(d) / "libblas.so.3" for d in env.get("LD_LIBRARY_PATH", "").split(":") if d]
    lib = next((p for p in first if p.exists()), blaslib.LIBDIR / "libblas.so.3")
    facts = blaslib.library_facts(lib)
    core = env.get("OPENBLAS_CORETYPE") or facts.get("core")
    return f"{lib.resolve()}" + (f", core {core}" if core else "")


def peak(args: argparse.Namespace, tuner: linpack.Tuner, tuned: Config, summary: dict) -> dict:
    """The tuned HPL.dat at the largest N that fits (memory, or --peak-minutes of run),
    against the best DGEMM and against hpcc as shipped at the same N."""
    dgemm = {}
    rates = summary["blas_rates"]
    # a BLAS below half the best's rate in the tuner's check cannot be the best here
    for key in [d for d, r in rates.items() if r >= 0.5 * max(rates.values())]:
        env = hpcc.environment() | tuner.env(tuner.blas_of(key), 1)
        dgemm[tuner.blas_of(key).label] = hpcc.run_dgemm(
            args.dgemm_n, args.np, 5, env, args.timeout
        )
    best_blas = max(dgemm, key=dgemm.__getitem__)
    print("DGEMM " + ", ".join(f"{k} {v:.2f}" for k, v in dgemm.items()) + " Gflop/s", flush=True)
    n, how = peak_n(args, tuned, summary["n"], max(dgemm.values()))
    print(f"peak N={n} ({how})", flush=True)
    dat = hpldat.text(tuned, n)
    env_ct = hpcc.environment() | tuner.env(tuner.blas_of(tuned.blas), tuned.threads)
    growth = {}
    for g in map(int, filter(None, args.growth.split(","))):
        sample, _ = hpcc.run_ct_linpack(hpldat.text(tuned, g), tuned.ranks, env_ct, args.timeout)
        growth[g] = sample["gflops"] if sample["passed"] is True else 0.0
        print(
            f"growth: ct N={g} {growth[g]:.2f} Gflop/s = {growth[g] / max(dgemm.values()):.3f}"
            f" of DGEMM; {phases(sample)}",
            flush=True,
        )
    # hpcc twice: as shipped (its default BLAS: the system's libblas.so.3, with the
    # tuned ranks x threads) and with the tuned BLAS (its environment: library first on
    # the path, OpenBLAS core), so the ratio against HPL is also said for the same BLAS
    threads = {"OPENBLAS_NUM_THREADS": str(tuned.threads)}
    env_hpcc = {"shipped": hpcc.environment() | threads, "same": env_ct}
    blas_of = {"ct": blas_said(env_ct), "shipped": blas_said(env_hpcc["shipped"])}
    runs: dict[str, list[float]] = {"ct": [], "shipped": [], "same": []}
    walls: dict[str, list[float]] = {tool: [] for tool in runs}
    said = ""
    for i in range(args.peak_repeat):
        for tool in list(runs) if i % 2 == 0 else list(runs)[::-1]:
            began = time.monotonic()
            if tool == "ct":
                sample, _ = hpcc.run_ct_linpack(dat, tuned.ranks, env_ct, args.timeout)
                ok = sample["passed"] is True
                runs[tool].append(sample["gflops"] if ok else 0.0)
                said = f"; {phases(sample)}"
            else:
                got = hpcc.run_hpcc(dat, tuned.ranks, env_hpcc[tool], args.timeout)
                runs[tool].append(got["gflops"] if got.get("passed") else 0.0)
            walls[tool].append(time.monotonic() - began)
            name = "ct" if tool == "ct" else f"hpcc ({tool} BLAS)"
            print(
                f"round {i + 1}: {name:<20} N={n} {runs[tool][-1]:.2f} Gflop/s "
                f"({walls[tool][-1]:.0f} s wall{said if tool == 'ct' else ''})",
                flush=True,
            )
    ct_runs, hpcc_runs = runs["ct"], runs["shipped"]
    memory = memory_run(args, tuned, summary["n"], max(ct_runs), env_ct) if args.memory_run else {}
    env_1 = hpcc.environment() | tuner.env(tuner.blas_of(tuned.blas), 1)
    after = hpcc.run_dgemm(args.dgemm_n, args.np, 5, env_1, args.timeout)
    top = max(max(dgemm.values()), after)
    vs_dgemm, vs_hpcc = max(ct_runs) / top, max(ct_runs) / max(hpcc_runs)
    print(
        f"RATIO tuned Linpack N={n} / best DGEMM ({best_blas}, {args.np} ranks, higher of "
        f"before/after {top:.2f}): {vs_dgemm:.3f} (target >= 0.92"
        f"{'; the N that fits is the memory run below' if memory else ''})"
    )
    print(
        f"RATIO tuned Linpack [{blas_of['ct']}] / hpcc as shipped [{blas_of['shipped']}] "
        f"(same N={n}, NB, grid, variant, ranks): {vs_hpcc:.3f} "
        f"(median {statistics.median(ct_runs) / statistics.median(hpcc_runs):.3f})"
    )
    vs_same = max(ct_runs) / max(max(runs["same"]), 1e-9)
    print(
        f"RATIO tuned Linpack / hpcc with the same BLAS [{blas_of['ct']}]: {vs_same:.3f} "
        f"(median {statistics.median(ct_runs) / max(statistics.median(runs['same']), 1e-9):.3f}"
        f"; load {load_average()})"
    )
    if memory:
        memory["vs_dgemm"] = memory["gflops"] / top
        print(
            f"RATIO tuned Linpack N={memory['n']} (the largest for {args.mem_fraction:.0%} of "
            f"memory) / best DGEMM ({top:.2f}): {memory['vs_dgemm']:.3f} (target >= 0.92; "
            f"hpcc ran at N={n} only, its ratio above)"
        )
    return {
        "peak_n": n,
        "peak_n_how": how,
        "dgemm": dgemm,
        "dgemm_after": after,
        "growth": growth,
        "peak_runs": ct_runs,
        "hpcc_runs": hpcc_runs,
        "hpcc_same_blas_runs": runs["same"],
        "blas": blas_of,
        "peak_wall_s": walls,
        "vs_dgemm": vs_dgemm,
        "vs_hpcc": vs_hpcc,
        "vs_hpcc_same_blas": vs_same,
        "memory_run": memory,
    }


def memory_run(
    args: argparse.Namespace, tuned: Config, n_memory: int, rate: float, env: dict[str, str]
) -> dict:
    """One run of the tuned configuration at the memory N (the tuner's N: the largest
    multiple of its NB whose N x (N+1) doubles fit --mem-fraction of the memory), announced
    with its expected length at ``rate`` (the peak round's best)."""
    n = n_memory
    expect = (2 / 3 * n**3 + 1.5 * n**2) / (rate * 1e9) if rate > 0 else float("nan")
    print(
        f"memory run: N={n} ({8.0 * n * (n + 1) / 2**30:.1f} GiB in all), expected "
        f"~{expect / 60:.0f} min at the peak round's {rate:.2f} Gflop/s",
        flush=True,
    )
    began = time.monotonic()
    sample, _ = hpcc.run_ct_linpack(hpldat.text(tuned, n), tuned.ranks, env, args.timeout)
    gflops = sample["gflops"] if sample["passed"] is True else 0.0
    wall = time.monotonic() - began
    print(
        f"memory run: ct   N={n} {gflops:.2f} Gflop/s ({wall:.0f} s wall; {phases(sample)})",
        flush=True,
    )
    return {"n": n, "gflops": gflops, "wall_s": wall, "phases": sample["phase_stats"]}


if __name__ == "__main__":
    sys.exit(main())
