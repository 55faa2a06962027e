#!/usr/bin/env python3
"""How the kernels' message wait (ct_mpi_waitall, kernels/common/ct_mpi.c) holds up when
the ranks share their cores with other work: one A/B run, one binary, the wait chosen by
environment (CT_MPI_WAIT_SPIN_US, CT_MPI_WAIT_NAP_US).

For each wait variant, a 2-rank ct-qcd timed loop (its time_s: from a barrier after the
cold start to the last sweep) on the machine as it is and beside one more busy loop (a
process spinning for the whole run), the variants and the two conditions interleaved in
--repeat rounds, the order alternating. Prints per variant and condition the best and
median time and the busy / as-is ratio (the slowdown the busy loop causes), with the load
average. Variant "yield" is the wait before issue 23 (poll and sched_yield for ever).

Usage: bench/wait_neighbour.py [--lattice 8x8x8x8] [--sweeps 20] [--repeat 3]
                               [--mpi openmpi|mpich] [--variants yield,50/200,...]
                               [--nice N]
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
from pathlib import Path

from clustertune.hostinfo import load_average

ROOT = Path(__file__).resolve().parents[1]
TIME_S = re.compile(r'"figures":\{[^}]*?"time_s":([0-9.eE+-]+)')
LAUNCH = {
    "openmpi": ["mpirun.openmpi", "--allow-run-as-root", "--oversubscribe", "-np"],
    "mpich": ["mpiexec.mpich", "-n"],
}


def wait_env(variant: str) -> dict[str, str]:
    """``yield``: the old wait; ``SPIN/NAP``: spin SPIN us, then naps up to NAP us."""
    if variant == "yield":
        return {"CT_MPI_WAIT_SPIN_US": "-1"}
    spin, nap = variant.split("/")
    return {"CT_MPI_WAIT_SPIN_US": spin, "CT_MPI_WAIT_NAP_US": nap}


def qcd_time(args: argparse.Namespace, variant: str) -> float:
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    env.update(wait_env(variant))
    argv = [
        *args.prefix,
        *LAUNCH[args.mpi],
        "2",
        str(ROOT / "build" / args.mpi / "bin" / "ct-qcd"),
        "--lattice",
        args.lattice,
        "--sweeps",
        str(args.sweeps),
    ]
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=args.timeout)
    for line in done.stdout.splitlines():
        # the figures only: a rank's late stderr can land inside the line's detail
        if '"type":"result"' in line and '"verification":"passed"' in line:
            found = TIME_S.search(line)
            if found:
                return float(found[1])
    raise RuntimeError(f"ct-qcd failed ({variant}): {done.stderr[-500:]}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lattice", default="8x8x8x8")
    ap.add_argument("--sweeps", type=int, default=20)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--mpi", choices=sorted(LAUNCH), default="openmpi")
    ap.add_argument("--variants", default="yield,50/200,50/1000")
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument(
        "--nice",
        type=int,
        help="ranks and busy loop under nice -n N (root: "
        "N < 0 puts the rest of a shared machine's load far behind them)",
    )
    args = ap.parse_args()
    args.prefix = ["nice", "-n", str(args.nice)] if args.nice is not None else []
    variants = args.variants.split(",")
    times: dict[tuple[str, str], list[float]] = {}
    for i in range(args.repeat):
        for busy in (False, True) if i % 2 == 0 else (True, False):
            loop = (
                subprocess.Popen([*args.prefix, sys.executable, "-c", "while True: pass"])
                if busy
                else None
            )
            try:
                for v in variants if i % 2 == 0 else variants[::-1]:
                    t = qcd_time(args, v)
                    cond = "busy" if busy else "as-is"
                    times.setdefault((v, cond), []).append(t)
                    print(
                        f"round {i + 1} {cond:<5} {v:<10} {t:8.3f} s  (load {load_average()})",
                        flush=True,
                    )
            finally:
                if loop is not None:
                    loop.kill()
                    loop.wait()
    print(
        f"ct-qcd {args.lattice}, {args.sweeps} sweeps, 2 ranks ({args.mpi}"
        f"{f', nice {args.nice}' if args.prefix else ''}); time_s best / median of "
        f"{args.repeat}; load {load_average()}"
    )
    for v in variants:
        idle, busy = times[(v, "as-is")], times[(v, "busy")]
        print(
            f"{v:<10} as-is {min(idle):7.3f} / {statistics.median(idle):7.3f} s   "
            f"+1 busy loop {min(busy):7.3f} / {statistics.median(busy):7.3f} s   "
            f"slowdown {min(busy) / min(idle):5.2f} / "
            f"{statistics.median(busy) / statistics.median(idle):5.2f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
