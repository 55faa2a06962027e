#!/usr/bin/env python3
"""The long fuzz run of ct-io-server's request handling (issue 20): ct-io-fuzz, built with
AddressSanitizer + UndefinedBehaviorSanitizer (``make kernels`` builds build/sanitize),
drives the server's own serve() in process with generated and mutated frames (see
kernels/io/io_fuzz.c) until --frames frames were tried. Prints the frames tried, the
sessions, the findings (broken invariants: a file outside the export touched, a temporary
left, a descriptor leaked, a file slot left in use) and the sanitizer reports, with the
wall time and the load average. Exit status 1 on any finding or report.

Usage: bench/io_fuzz.py [--frames 1000000] [--seed S] [--log FILE]
"""

from __future__ import annotations

import argparse
import os
import random
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FUZZER = ROOT / "build/sanitize/bin/ct-io-fuzz"
SANITIZER_REPORT = re.compile(r"ERROR: AddressSanitizer|runtime error:|ERROR: LeakSanitizer")
SUMMARY = re.compile(r"^frames (\d+) sessions (\d+) findings (\d+)$", re.M)


def fuzz_env() -> dict[str, str]:
    """A singleton OpenMPI process (root allowed), ROMIO as the server runs, and the
    sanitizers' reports fatal (leaks aside: MPI's own allocations at exit are not ours)."""
    return os.environ | {
        "OMPI_ALLOW_RUN_AS_ROOT": "1",
        "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
        "OMPI_MCA_io": "romio321",
        "ASAN_OPTIONS": "detect_leaks=0:abort_on_error=0",
        "UBSAN_OPTIONS": "print_stacktrace=1",
    }


def run(frames: int, seed: int, seconds: float | None = None) -> dict:
    """One run of ct-io-fuzz: its summary, its sanitizer reports and its output."""
    if not FUZZER.is_file():
        raise SystemExit(f"{FUZZER} missing: run 'make kernels'")
    argv = [str(FUZZER), "--frames", str(frames), "--seed", str(seed)]
    if seconds:
        argv += ["--seconds", str(int(seconds))]
    started = time.monotonic()
    out = subprocess.run(argv, env=fuzz_env(), capture_output=True, text=True, errors="replace")
    summary = SUMMARY.search(out.stdout)
    return {
        "returncode": out.returncode,
        "frames": int(summary[1]) if summary else None,
        "sessions": int(summary[2]) if summary else None,
        "findings": [line for line in out.stdout.splitlines() if line.startswith("finding:")],
        "reports": [line for line in out.stderr.splitlines() if SANITIZER_REPORT.search(line)],
        "wall_s": time.monotonic() - started,
        "stdout": out.stdout,
        "stderr": out.stderr,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--frames", type=int, default=1_000_000)
    ap.add_argument("--seed", type=int, default=random.randrange(1 << 32))
    ap.add_argument("--log", help="file for the fuzzer's whole output (the server's log)")
    args = ap.parse_args()
    load = os.getloadavg()[0]
    print(f"ct-io-fuzz --frames {args.frames} --seed {args.seed} (load {load:.1f})", flush=True)
    r = run(args.frames, args.seed)
    if args.log:
        Path(args.log).write_text(r["stdout"] + r["stderr"])
    refused = r["stderr"].count("ct-io-server: refused")
    print(
        f"frames tried {r['frames']}, sessions {r['sessions']}, refusals logged {refused}, "
        f"findings {len(r['findings'])}, sanitizer reports {len(r['reports'])}, "
        f"exit status {r['returncode']}, {r['wall_s']:.0f} s, load "
        f"{load:.1f} -> {os.getloadavg()[0]:.1f}"
    )
    for line in r["findings"] + r["reports"]:
        print(" ", line)
    if r["reports"] or r["returncode"] not in (0, 1):
        print(r["stderr"][-4000:], file=sys.stderr)
    return 0 if r["returncode"] == 0 and not r["findings"] and not r["reports"] else 1


if __name__ == "__main__":
    sys.exit(main())
