#!/usr/bin/env python3
"""ct-npb-bt beside the official NPB 3.4 MPI BT (gfortran -O3): BT.A on 1 rank and on 4
(oversubscribed when the machine has fewer than 4 cores, as the 2-core test machine has).

The runs, the official build (NPB_BIN or build-peers.sh, cached), the alternating order,
best and median of --repeat rounds and the ratios ours / official are those of
bench/npb_vs_official.py, which this script drives with BT's cases; every option of that
script passes through (--repeat, --mpi, --peer-dir, --json, --timeout, --cases).

Usage: bench/npb_bt_vs_official.py [--cases bt.A.1,bt.A.4] [--repeat 3] [--mpi openmpi|mpich]
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

DEFAULT_CASES = "bt.A.1,bt.A.4"


def shared_bench():
    path = Path(__file__).with_name("npb_vs_official.py")
    spec = importlib.util.spec_from_file_location("npb_vs_official", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def cases_of(argv: list[str]) -> str:
    for i, a in enumerate(argv):
        if a == "--cases" and i + 1 < len(argv):
            return argv[i + 1]
        if a.startswith("--cases="):
            return a.split("=", 1)[1]
    return DEFAULT_CASES


def main() -> int:
    argv = sys.argv[1:]
    cases = cases_of(argv)
    if "--cases" not in " ".join(argv):
        argv = ["--cases", cases, *argv]
    cores = os.cpu_count() or 1
    for case in cases.split(","):
        np_ = int(case.strip().split(".")[2])
        if np_ > cores:
            print(
                f"# {case.strip()}: {np_} ranks on {cores} cores, oversubscribed "
                "(both builds alike)"
            )
    bench = shared_bench()
    sys.argv = [sys.argv[0], *argv]
    return bench.main()


if __name__ == "__main__":
    sys.exit(main())
