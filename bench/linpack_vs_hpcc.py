#!/usr/bin/env python3
"""ct-linpack beside HPL as shipped in Debian's hpcc, same N, NB, P x Q, variant and BLAS.

Prints two ratios and where ct-linpack's time goes:
  1. ct-linpack Gflops / hpcc HPL Gflops at each N of --n (default 2000,4000,8000,16000,
     NB 192, 1 x 2, WR11C2R4): a table of the best and median ratio, the spread of the
     per-round ratios and the load average around each N;
  2. ct-linpack Gflops at --peak-n as a percentage of the machine's measured DGEMM rate
     (ct-gemm --local: every rank multiplies its own matrices, one BLAS thread each).
For the best ct-linpack run at each N, a second table gives its phases in seconds (mean
over ranks; the kernel's JSON sample has every rank's): panel factorisation, row swaps,
the update's DTRSM and DGEMM, the owner's look-ahead (bringing the next panel's block up
to date), waiting, the solve, the LU's time not in any phase, the LU's wall and CPU
time; then the update DGEMM's rate per rank (Gflop/s), to set beside ct-gemm's square
DGEMM.
The issue's target for (2) is the largest N that fits --mem-fraction of memory
(`--peak-n max`); that run takes long on a small machine, so the default is capped at
--peak-cap (20000). On a shared machine the numbers move with the load: runs are
interleaved (--repeat rounds, the order alternating), the best of each is kept (the
median ratio is printed too), and the load average is printed with the result. DGEMM
is measured before and after the peak run and the higher rate is the denominator.

Usage: bench/linpack_vs_hpcc.py [--n 2000,4000,8000,16000] [--nb 192] [-P 1 -Q 2] [--repeat 3]
                                 [--peak-n max|N] [--skip-peak] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

from clustertune.hostinfo import load_average, memory_bytes
from clustertune.launch import process
from clustertune.levels.linpack.run import n_for_memory

ROOT = Path(__file__).resolve().parents[1]
LAUNCH = ["mpirun.openmpi", "--oversubscribe", "--mca", "mpi_yield_when_idle", "1", "-np"]
HPCC_LINE = re.compile(r"^(W[RC]\d+\S*)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+([\d.]+)\s+([\d.eE+-]+)")
RESID_LINE = re.compile(r"^\|\|Ax-b\|\|_oo/.*=\s*([\d.eE+-]+)\s*\.+\s*(PASSED|FAILED)")

# HPL.dat body shared by hpcc's input and ct-linpack (ct-linpack reads HPL.dat natively).
HPL_DAT = """HPLinpack benchmark input file
clustertune bench/linpack_vs_hpcc.py
HPL.out      output file name (if any)
6            device out (6=stdout,7=stderr,file)
1            # of problems sizes (N)
{n}          Ns
1            # of NBs
{nb}         NBs
0            PMAP process mapping (0=Row-,1=Column-major)
1            # of process grids (P x Q)
{p}          Ps
{q}          Qs
16.0         threshold
1            # of panel fact
{pfact}      PFACTs (0=left, 1=Crout, 2=Right)
1            # of recursive stopping criterium
{nbmin}      NBMINs (>= 1)
1            # of panels in recursion
{ndiv}       NDIVs
1            # of recursive panel fact.
{rfact}      RFACTs (0=left, 1=Crout, 2=Right)
1            # of broadcast
{bcast}      BCASTs (0=1rg,1=1rM,2=2rg,3=2rM,4=Lng,5=LnM)
1            # of lookahead depth
{depth}      DEPTHs (>=0)
{swap}       SWAP (0=bin-exch,1=long,2=mix)
{swap_threshold}  swapping threshold
0            L1 in (0=transposed,1=no-transposed) form
0            U  in (0=transposed,1=no-transposed) form
1            Equilibration (0=no,1=yes)
8            memory alignment in double (> 0)
"""
# hpcc's extra lines (PTRANS sizes); kept minimal, PTRANS then reuses HPL's N.
HPCC_TAIL = """##### This line (no. 32) is ignored (it serves as a separator). ######
0                               Number of additional problem sizes for PTRANS
1200 10000 30000                values of N
0                               number of additional blocking sizes for PTRANS
40 9 8 13 13 20 16 32 64        values of NB
"""


def environment() -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("OPENBLAS_CORETYPE", "Haswell")  # what Debian's 0.3.21 needs here
    env["OPENBLAS_NUM_THREADS"] = "1"  # one rank per core
    env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    return env


# hpcc sizes its other tests (RandomAccess, FFT, STREAM, PTRANS...) from this memory
# instead of HPL's N, so that a round at N=16000 does not spend minutes on them; HPL
# itself runs at the N of hpccinf.txt either way.
HPCC_MEMORY = "Total=64\n"


def run_hpcc(dat: str, np: int, env: dict[str, str], timeout: float) -> dict:
    with tempfile.TemporaryDirectory(prefix="ct-hpcc-") as tmp:
        Path(tmp, "hpccinf.txt").write_text(dat + HPCC_TAIL)
        Path(tmp, "hpccmemf.txt").write_text(HPCC_MEMORY)
        launched(["hpcc"], np, env, timeout, cwd=tmp)
        return parse_hpcc_output(Path(tmp, "hpccoutf.txt").read_text(errors="replace"))


def parse_hpcc_output(text: str) -> dict:
    """HPL's result line (variant, time, Gflops) and residual line of hpccoutf.txt."""
    out: dict = {}
    for line in text.splitlines():
        if m := HPCC_LINE.match(line):
            out.update(variant=m[1], time_s=float(m[6]), gflops=float(m[7]))
        elif m := RESID_LINE.match(line):
            out.update(residual=float(m[1]), passed=m[2] == "PASSED")
    if "gflops" not in out:
        raise RuntimeError("no HPL result line in hpccoutf.txt")
    return out


def kernel(mpi: str, name: str) -> Path:
    path = ROOT / "build" / mpi / "bin" / name
    if not path.exists():
        sys.exit(f"{path} not found: run `make kernels` first")
    return path


def launched(
    argv: list[str], np: int, env: dict[str, str], timeout: float, cwd: str | None = None
) -> process.Completed:
    """argv on np ranks; at the timeout every rank is killed, not only mpirun (a spinning
    orphan would slow every later measurement)."""
    done = process.run([*LAUNCH, str(np), *argv], timeout, env=env, cwd=cwd)
    if done.timed_out or done.returncode:
        why = "timed out" if done.timed_out else f"exit status {done.returncode}"
        raise RuntimeError(f"{' '.join(done.argv)}: {why}: {done.stderr.strip()[-500:]}")
    return done


def run_json(argv: list[str], np: int, env: dict[str, str], timeout: float) -> list[dict]:
    done = launched(argv, np, env, timeout)
    records = [json.loads(x) for x in done.stdout.splitlines() if x.startswith("{")]
    errors = [r["message"] for r in records if r["type"] == "error"]
    if errors:
        raise RuntimeError(f"{' '.join(done.argv)} failed: {errors}")
    return records


def run_ct_linpack(dat: str, np: int, env: dict[str, str], timeout: float) -> tuple[dict, dict]:
    with tempfile.TemporaryDirectory(prefix="ct-linpack-") as tmp:
        path = Path(tmp, "HPL.dat")
        path.write_text(dat)
        argv = [str(kernel("openmpi", "ct-linpack")), "--dat", str(path)]
        records = run_json([*argv, "--hpl-out", str(Path(tmp, "HPL.out"))], np, env, timeout)
    sample = next(r for r in records if r["type"] == "sample")
    result = next(r for r in records if r["type"] == "result")
    return sample, result


def run_dgemm(n: int, np: int, repeat: int, env: dict[str, str], timeout: float) -> float:
    argv = [str(kernel("openmpi", "ct-gemm"))]
    argv += ["--local", "--type", "d", "-N", str(n), "--repeat", str(repeat)]
    records = run_json(argv, np, env, timeout)
    result = next(r for r in records if r["type"] == "result")
    if result["verification"] != "passed":
        raise RuntimeError("DGEMM verification failed")
    return float(result["figures"]["best_dgemm_gflops"])


def ratio_at(n: int, fields: dict, np: int, env: dict[str, str], args) -> dict:
    """Interleaved rounds of hpcc and ct-linpack at one N; the figures of that N."""
    dat = HPL_DAT.format(n=n, **fields)
    load_before = load_average()
    hpcc_runs, ct_runs, info = [], [], {}
    for i in range(args.repeat):
        # alternate who goes first, so that a drift in the machine's load favours neither
        for tool in ("hpcc", "ct") if i % 2 == 0 else ("ct", "hpcc"):
            if tool == "hpcc":
                hpcc_runs.append(run_hpcc(dat, np, env, args.timeout))
                gflops = hpcc_runs[-1]["gflops"]
            else:
                sample, result = run_ct_linpack(dat, np, env, args.timeout)
                ct_runs.append(sample)
                info = result["detail"]["blas"]
                gflops = sample["gflops"]
            name = "hpcc HPL  " if tool == "hpcc" else "ct-linpack"
            print(f"N={n} round {i + 1}: {name} {gflops:8.2f} Gflops", flush=True)
    ok = all(r.get("passed") for r in hpcc_runs) and all(r["passed"] is True for r in ct_runs)
    # a rate whose residual failed is not a result, for either tool; a round counts in the
    # spread only when both of its runs passed
    rounds = [
        c["gflops"] / h["gflops"]
        for h, c in zip(hpcc_runs, ct_runs, strict=True)
        if h.get("passed") and c["passed"] is True
    ]
    hpcc_runs = [r for r in hpcc_runs if r.get("passed")]
    ct_runs = [r for r in ct_runs if r["passed"] is True]
    if not hpcc_runs or not ct_runs:
        sys.exit(f"N={n}: no run of " + ("hpcc" if not hpcc_runs else "ct-linpack") + " PASSED")
    hpcc_best = max(hpcc_runs, key=lambda r: r["gflops"])
    ct_best = max(ct_runs, key=lambda r: r["gflops"])
    figures = {
        "n": n,
        **fields,
        "variant": ct_best["variant"],
        "hpcc_gflops": hpcc_best["gflops"],
        "ct_linpack_gflops": ct_best["gflops"],
        "hpcc_gflops_runs": [r["gflops"] for r in hpcc_runs],
        "ct_linpack_gflops_runs": [r["gflops"] for r in ct_runs],
        "ratio": ct_best["gflops"] / hpcc_best["gflops"],
        "median_ratio": statistics.median(r["gflops"] for r in ct_runs)
        / statistics.median(r["gflops"] for r in hpcc_runs),
        "round_ratios": rounds,
        "residuals_passed": ok,
        "ct_linpack_phases": phase_means(ct_best),
        "ct_linpack_update_dgemm_gflops": ct_best["update_dgemm_gflops"],
        "blas": info,
        "load_average_before": load_before,
        "load_average_after": load_average(),
    }
    print(
        f"N={n} NB={args.nb} {args.P}x{args.Q} {ct_best['variant']}  BLAS core "
        f"{info.get('core') or '?'} ({info.get('library')}): hpcc {hpcc_best['gflops']:.2f}, "
        f"ct-linpack {ct_best['gflops']:.2f} Gflops, ratio {figures['ratio']:.3f} best, "
        f"{figures['median_ratio']:.3f} median; residuals "
        f"{'all PASSED' if ok else 'NOT all passed: the passed runs only'}",
        flush=True,
    )
    return figures


def table(rows: list[dict], repeat: int) -> str:
    lines = [
        f"ct-linpack / hpcc HPL, best and median of {repeat} interleaved rounds",
        "     N   best  median  spread (per round)   load before-after",
    ]
    for r in rows:
        spread = f"{min(r['round_ratios']):.3f}-{max(r['round_ratios']):.3f}"
        lines.append(
            f"{r['n']:6d}  {r['ratio']:.3f}  {r['median_ratio']:.3f}   {spread:18s}  "
            f"{r['load_average_before']} - {r['load_average_after']}"
        )
    return "\n".join(lines)


# The columns of the phase table: the kernel's disjoint phases, the parts inside the
# update, and the LU time no phase covers ("untimed").
PHASE_COLUMNS = ("pfact", "swap", "dtrsm", "dgemm", "lookahead", "wait", "bcast", "solve")


def phase_means(sample: dict) -> dict[str, float]:
    """Seconds per phase, mean over ranks, of one ct-linpack sample."""
    per_rank = {**sample["phases"], **sample["phase_parts"]}
    means = {name: statistics.fmean(values) for name, values in per_rank.items()}
    means["untimed"] = means["lu"] - sum(statistics.fmean(v) for v in sample["phases"].values())
    return means


def phase_table(rows: list[dict]) -> str:
    names = (*PHASE_COLUMNS, "untimed", "lu", "lu_cpu")
    lines = [
        "ct-linpack's best run per N: seconds, mean over ranks (dtrsm and dgemm are the "
        "update; lookahead, the next panel's block brought up, is also inside swap, dtrsm "
        "and dgemm: the columns add up to more than lu)",
        "     N " + "".join(f"{name:>10s}" for name in names) + "   update DGEMM Gflop/s per rank",
    ]
    for r in rows:
        t = r["ct_linpack_phases"]
        rates = " ".join(f"{g:.1f}" for g in r["ct_linpack_update_dgemm_gflops"])
        lines.append(
            f"{r['n']:6d} " + "".join(f"{t[name]:10.3f}" for name in names) + f"   {rates}"
        )
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", default="2000,4000,8000,16000", help="comma-separated Ns")
    ap.add_argument("--nb", type=int, default=192)
    ap.add_argument("-P", type=int, default=1)
    ap.add_argument("-Q", type=int, default=2)
    ap.add_argument("--depth", type=int, default=1)
    ap.add_argument("--bcast", type=int, default=1)
    ap.add_argument("--pfact", type=int, default=2)
    ap.add_argument("--rfact", type=int, default=1)
    ap.add_argument("--nbmin", type=int, default=4)
    ap.add_argument("--ndiv", type=int, default=2)
    ap.add_argument("--swap", type=int, default=2)
    ap.add_argument("--swap-threshold", type=int, default=64)
    ap.add_argument("--repeat", type=int, default=3, help="interleaved hpcc/ct-linpack rounds")
    ap.add_argument("--mem-fraction", type=float, default=0.6)
    ap.add_argument("--peak-n", default=None, help="N of the %%-of-DGEMM run, or 'max'")
    ap.add_argument("--peak-cap", type=int, default=20000)
    ap.add_argument("--dgemm-n", type=int, default=4000)
    ap.add_argument("--skip-peak", action="store_true")
    ap.add_argument("--timeout", type=float, default=3600)
    ap.add_argument("--json", type=Path, help="also write the figures here")
    args = ap.parse_args()
    try:
        ns = [int(x) for x in args.n.split(",")]
    except ValueError:
        ap.error(f"--n: expected comma-separated integers, got {args.n!r}")
    if shutil.which("hpcc") is None or shutil.which(LAUNCH[0]) is None:
        sys.exit("needs hpcc and mpirun.openmpi (Debian packages hpcc, openmpi-bin)")
    env = environment()
    np = args.P * args.Q
    fields = dict(
        nb=args.nb,
        p=args.P,
        q=args.Q,
        pfact=args.pfact,
        nbmin=args.nbmin,
        ndiv=args.ndiv,
        rfact=args.rfact,
        bcast=args.bcast,
        depth=args.depth,
        swap=args.swap,
        swap_threshold=args.swap_threshold,
    )
    print(f"load average before: {load_average()}", flush=True)
    rows = [ratio_at(n, fields, np, env, args) for n in ns]
    ok = all(r["residuals_passed"] for r in rows)
    print("\n" + table(rows, args.repeat), flush=True)
    print("\n" + phase_table(rows), flush=True)
    figures: dict = {"ratios": rows}
    if not args.skip_peak:
        nmax = n_for_memory(args.mem_fraction, memory_bytes(), args.nb)
        if args.peak_n == "max":
            peak_n = nmax
        else:
            peak_n = int(args.peak_n) if args.peak_n else min(nmax, args.peak_cap)
        # DGEMM before and after the long run, the higher one kept: a slow spell of the
        # shared machine must not inflate the percentage
        dgemm_before = run_dgemm(args.dgemm_n, np, 5, env, args.timeout)
        sample, _ = run_ct_linpack(HPL_DAT.format(n=peak_n, **fields), np, env, args.timeout)
        dgemm = max(dgemm_before, run_dgemm(args.dgemm_n, np, 5, env, args.timeout))
        ok = ok and sample["passed"] is True
        pct = 100.0 * sample["gflops"] / dgemm
        figures.update(
            dgemm_gflops=dgemm,
            dgemm_n=args.dgemm_n,
            peak_n=peak_n,
            peak_n_max=nmax,
            peak_gflops=sample["gflops"],
            percent_of_dgemm=pct,
            peak_passed=sample["passed"],
        )
        print(f"DGEMM ({np} ranks x 1 thread, N={args.dgemm_n})  {dgemm:8.2f} Gflops")
        print(
            f"ct-linpack N={peak_n}{' (max for memory)' if peak_n == nmax else ''}"
            f"  {sample['gflops']:8.2f} Gflops = {pct:.1f} % of DGEMM  residual "
            f"{'PASSED' if sample['passed'] is True else 'FAILED: the percentage does not count'}"
            f"  (largest N for {args.mem_fraction:.0%} of memory: {nmax})"
        )
    figures["load_average_after"] = load_average()
    print(f"load average after: {figures['load_average_after']}")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
