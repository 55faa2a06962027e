#!/usr/bin/env python3
"""ct-npb-ep / ct-npb-lu beside the official NPB 3.4 MPI build (gfortran -O3), same MPI,
same class, same rank count, same machine.

The official binaries come from NPB_BIN (a directory holding ep.A.x, lu.A.x, ...) or are
built once with /work/shared/peers/build-peers.sh (cached under --peer-dir). Every case
runs --repeat rounds, the order of the two alternating each round; both must verify
(NPB's "Verification = SUCCESSFUL"; our result line's "verified"). Printed per case:
best and median Mop/s of each, the ratios ours / official (best and median), and the
load average, since the machine is shared. Exit status 1 if any run failed verification.

Usage: bench/npb_vs_official.py [--cases ep.A.1,ep.A.2,lu.A.1,lu.A.2] [--repeat 3]
                                [--mpi openmpi|mpich] [--peer-dir DIR] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
from pathlib import Path

from clustertune.hostinfo import load_average
from clustertune.launch import process

ROOT = Path(__file__).resolve().parents[1]
PEERS = Path("/work/shared/peers")
DEFAULT_CASES = "ep.A.1,ep.A.2,lu.A.1,lu.A.2"
OURS = {"ep": "ct-npb-ep", "lu": "ct-npb-lu", "bt": "ct-npb-bt"}
NPB_FIELD = re.compile(r"^\s*(Time in seconds|Mop/s total|Verification)\s*=\s*(\S+)", re.M)


def launcher(mpi: str, np: int) -> list[str]:
    if mpi == "openmpi":
        return [
            "mpirun.openmpi",
            "--oversubscribe",
            "--mca",
            "mpi_yield_when_idle",
            "1",
            "-np",
            str(np),
        ]
    return ["mpirun.mpich", "-np", str(np)]


def environment() -> dict[str, str]:
    env = dict(os.environ)
    env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    return env


def parse_npb(text: str) -> dict:
    """Time, Mop/s and verification of NPB's print_results block."""
    fields = dict(NPB_FIELD.findall(text))
    if "Mop/s total" not in fields:
        raise RuntimeError(f"no NPB result block in the output: {text[-400:]}")
    return {
        "time_s": float(fields["Time in seconds"]),
        "mops": float(fields["Mop/s total"]),
        "verified": fields.get("Verification") == "SUCCESSFUL",
    }


def parse_ours(text: str) -> dict:
    result = next(
        (
            json.loads(x)
            for x in text.splitlines()
            if x.startswith("{") and json.loads(x).get("type") == "result"
        ),
        None,
    )
    if result is None:
        raise RuntimeError(f"no result line in the output: {text[-400:]}")
    f = result["figures"]
    return {"time_s": f["time_s"], "mops": f["mops_total"], "verified": bool(f["verified"])}


def peer_bin(args: argparse.Namespace, cases: list[tuple[str, str, int]]) -> Path:
    """NPB_BIN, or the official build for these benchmarks and classes (built once)."""
    if os.environ.get("NPB_BIN"):
        return Path(os.environ["NPB_BIN"])
    out = Path(args.peer_dir) / args.mpi
    wanted = {f"{b}.{c}.x" for b, c, _ in cases}
    if all((out / "bin" / w).exists() for w in wanted):
        return out / "bin"
    env = environment() | {
        "SKIP_MILC": "1",
        "PEER_MPI": args.mpi,
        "NPB_BENCHES": " ".join(sorted({b for b, _, _ in cases})),
        "NPB_CLASSES": " ".join(sorted({c for _, c, _ in cases})),
    }
    print(f"building the official NPB ({args.mpi}) into {out} ...", file=sys.stderr)
    subprocess.run(
        [str(PEERS / "build-peers.sh"), str(out)], env=env, check=True, stdout=subprocess.DEVNULL
    )
    return out / "bin"


def our_kernel(mpi: str, bench: str) -> Path:
    build = Path(os.environ.get("CLUSTERTUNE_BUILD_DIR", ROOT / "build"))
    path = build / mpi / "bin" / OURS[bench]
    if not path.exists():
        sys.exit(f"{path} not found: run `make kernels` first")
    return path


def run(argv: list[str], mpi: str, np: int, timeout: float, parse) -> dict:
    done = process.run([*launcher(mpi, np), *argv], timeout, env=environment())
    if done.timed_out or done.returncode:
        why = "timed out" if done.timed_out else f"exit status {done.returncode}"
        return {
            "error": f"{' '.join(done.argv)}: {why}: {done.stderr.strip()[-300:]}",
            "verified": False,
        }
    return parse(done.stdout)


def summary(runs: list[dict]) -> dict:
    good = [r["mops"] for r in runs if r.get("verified")]
    return {
        "best": max(good) if good else None,
        "median": statistics.median(good) if good else None,
        "all_verified": len(good) == len(runs),
        "runs": runs,
    }


def ratio(a: float | None, b: float | None) -> str:
    return f"{a / b:.3f}" if a and b else "n/a"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", default=DEFAULT_CASES, help="bench.CLASS.np, comma-separated")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--mpi", choices=("openmpi", "mpich"), default="openmpi")
    ap.add_argument("--peer-dir", default=str(Path.home() / ".cache" / "clustertune" / "npb"))
    ap.add_argument("--timeout", type=float, default=900.0)
    ap.add_argument("--json", help="write every run here")
    args = ap.parse_args()
    cases = []
    for text in args.cases.split(","):
        bench, cls, np = text.strip().split(".")
        cases.append((bench.lower(), cls.upper(), int(np)))
    bins = peer_bin(args, cases)
    print(f"# load average before: {load_average()}  ({os.cpu_count()} cores, {args.mpi})")
    print(
        f"# {'case':<8} {'official best':>13} {'median':>9} {'ours best':>10} {'median':>9}"
        f" {'ratio best':>10} {'ratio med':>9}  verified"
    )
    report, failed = {}, False
    for bench, cls, np in cases:
        official = [str(bins / f"{bench}.{cls}.x")]
        ours = [str(our_kernel(args.mpi, bench)), "--class", cls]
        runs: dict[str, list[dict]] = {"official": [], "ours": []}
        for r in range(args.repeat):
            order = ("official", "ours") if r % 2 == 0 else ("ours", "official")
            for who in order:
                argv, parse = (official, parse_npb) if who == "official" else (ours, parse_ours)
                runs[who].append(run(argv, args.mpi, np, args.timeout, parse))
        o, u = summary(runs["official"]), summary(runs["ours"])
        failed |= not (o["all_verified"] and u["all_verified"])
        name = f"{bench.upper()}.{cls}.{np}"
        report[name] = {"official": o, "ours": u, "load_average": load_average()}
        fmt = lambda v: f"{v:.2f}" if v else "n/a"  # noqa: E731
        print(
            f"  {name:<8} {fmt(o['best']):>13} {fmt(o['median']):>9} {fmt(u['best']):>10}"
            f" {fmt(u['median']):>9} {ratio(u['best'], o['best']):>10}"
            f" {ratio(u['median'], o['median']):>9}  official {o['all_verified']},"
            f" ours {u['all_verified']}  (load {load_average()})"
        )
        for who in ("official", "ours"):
            for x in runs[who]:
                if "error" in x:
                    print(f"    {who}: {x['error']}")
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
