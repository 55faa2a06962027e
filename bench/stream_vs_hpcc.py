#!/usr/bin/env python3
"""ct-stream beside the STREAM of Debian's hpcc, same cores, same array length.

hpcc runs all its tests; its STREAM arrays follow HPL's N (N^2 x 8 bytes / ranks / 3 per
array), so N is chosen to make them, over the ranks of the host, 4 x its last-level caches
(the same arrays as ct-stream's default), and ct-stream is given hpcc's STREAM_VectorSize.
hpcc's StarSTREAM times every loop between two barriers on every rank and keeps the
fastest rank's time: the slowest rank's loop and a barrier, so its rate is one rank's
bytes over the job's time. Its counterpart is ct-stream's job rate divided by the ranks
(`triad_gb_s / np`; the per-rank mean, each rank's own best, is printed beside it).
hpcc runs twice a round: on 1 rank (its StarSTREAM is then a plain one-process STREAM)
and on --np ranks. Its SingleSTREAM is not used: its best times can be the StarSTREAM
section's before it (hpcc keeps them in static variables across the two sections; in our
first run on 1 rank both printed the same best times to 4 digits).
ct-stream runs with its default streaming (non-temporal) stores and with --stores cached,
so the printout shows how much of a difference is the stores. Rounds are interleaved (the
order alternating), a run that failed verification (either tool) is not a figure, and the
best and the median of the rounds are printed with their spread and the load average.

Usage: bench/stream_vs_hpcc.py [--np 2] [--rounds 3] [--keep DIR] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

from linpack_vs_hpcc import HPCC_TAIL, HPL_DAT, environment, kernel, launched

HPCC_FIELD = re.compile(r"^(\w+)=(\S+)$")
STORES = ("streaming", "cached")


def llc_bytes() -> int:
    """The host's last-level caches (sysfs): the highest data level, each instance once."""
    found: dict[int, dict[str, int]] = {}
    for index in Path("/sys/devices/system/cpu").glob("cpu[0-9]*/cache/index[0-9]*"):
        if (index / "type").read_text().strip() == "Instruction":
            continue
        text = (index / "size").read_text().strip()
        scale = {"K": 2**10, "M": 2**20, "G": 2**30}.get(text[-1], 1)
        level = found.setdefault(int((index / "level").read_text()), {})
        level[(index / "shared_cpu_list").read_text().strip()] = int(text.rstrip("KMG")) * scale
    if not found:
        sys.exit("no cache sizes in sysfs: give --hpl-n")
    return sum(found[max(found)].values())


def hpl_n_for(array_bytes: float) -> int:
    """HPL's N whose hpcc STREAM arrays over all ranks (N^2 x 8 / 3 bytes each, split
    evenly) reach array_bytes."""
    return math.ceil(math.sqrt(array_bytes * 3 / 8))


def run_hpcc(n: int, np: int, env: dict[str, str], timeout: float, keep: Path | None) -> dict:
    """One hpcc run (its output kept in ``keep``), read by parse_hpcc."""
    dat = HPL_DAT.format(
        n=n,
        nb=192,
        p=1,
        q=np,
        pfact=2,
        nbmin=4,
        ndiv=2,
        rfact=1,
        bcast=1,
        depth=1,
        swap=2,
        swap_threshold=64,
    )
    with tempfile.TemporaryDirectory(prefix="ct-hpcc-") as tmp:
        Path(tmp, "hpccinf.txt").write_text(dat + HPCC_TAIL)
        launched(["hpcc"], np, env, timeout, cwd=tmp)
        text = Path(tmp, "hpccoutf.txt").read_text(errors="replace")
    if keep:
        keep.mkdir(parents=True, exist_ok=True)
        runs = len(list(keep.glob("hpccoutf-*.txt")))
        (keep / f"hpccoutf-{runs + 1}-np{np}.txt").write_text(text)
    return parse_hpcc(text)


def parse_hpcc(text: str) -> dict:
    """hpccoutf.txt's STREAM_VectorSize and StarSTREAM_Triad (its summary section), and
    whether the StarSTREAM section says its solution validates."""
    fields = {m[1]: m[2] for line in text.splitlines() if (m := HPCC_FIELD.match(line.strip()))}
    if "StarSTREAM_Triad" not in fields:
        raise RuntimeError("no StarSTREAM figures in hpccoutf.txt")
    star = text.split("Begin of StarSTREAM section.")[-1].split("End of StarSTREAM section.")[0]
    return {
        "vector_size": int(fields["STREAM_VectorSize"]),
        "triad": float(fields["StarSTREAM_Triad"]),
        "validated": "Solution Validates" in star,
    }


def run_ct(n: int, np: int, stores: str, env: dict[str, str], timeout: float) -> dict:
    argv = [str(kernel("openmpi", "ct-stream")), "--n", str(n), "--stores", stores]
    done = launched(argv, np, env, timeout)
    lines = [json.loads(x) for x in done.stdout.splitlines() if x.startswith("{")]
    result = next(x for x in lines if x["type"] == "result")
    f = result["figures"]
    return {
        "passed": result["verification"] == "passed",
        "triad": (f.get("triad_gb_s") or 0.0) / np,  # hpcc's StarSTREAM measure
        "triad_rank_mean": f.get("triad_rank_gb_s") or 0.0,
    }


def stats(values: list[float]) -> str:
    return (
        f"best {max(values):7.2f}  median {statistics.median(values):7.2f}  "
        f"spread {min(values):.2f}-{max(values):.2f}  ({len(values)} runs)"
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--np", type=int, default=os.cpu_count() or 1, help="ranks (default: cores)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--hpl-n", type=int, help="HPL's N (default: arrays of 4 x the caches)")
    ap.add_argument("--timeout", type=float, default=3600)
    ap.add_argument("--keep", type=Path, help="keep each hpccoutf.txt in this directory")
    ap.add_argument("--json", type=Path, help="also write the figures here")
    args = ap.parse_args()
    if shutil.which("hpcc") is None:
        sys.exit("needs hpcc (Debian package hpcc: apt-get install -y hpcc)")
    env = environment()
    n_hpl = args.hpl_n or hpl_n_for(4 * llc_bytes())
    print(f"load average before: {os.getloadavg()}; hpcc HPL N={n_hpl}", flush=True)
    nps = sorted({1, args.np})
    hpcc: dict[int, list[dict]] = {np: [] for np in nps}
    ct: dict[tuple[int, str], list[dict]] = {(np, s): [] for np in nps for s in STORES}
    vector: dict[int, int] = {}
    for i in range(args.rounds):
        # alternate who goes first, so that a drift in the machine's load favours neither;
        # the first round needs hpcc's vector sizes first
        for tool in ("hpcc", "ct") if i % 2 == 0 or not vector else ("ct", "hpcc"):
            if tool == "hpcc":
                for np in nps:
                    h = run_hpcc(n_hpl, np, env, args.timeout, args.keep)
                    vector.setdefault(np, h["vector_size"])
                    hpcc[np].append(h)
                    print(
                        f"round {i + 1}: hpcc np {np} StarSTREAM Triad {h['triad']:7.2f} GB/s"
                        f"  validated {h['validated']}  load {os.getloadavg()[0]:.1f}",
                        flush=True,
                    )
                continue
            for (np, stores), got in ct.items():
                got.append(run_ct(vector[np], np, stores, env, args.timeout))
                c = got[-1]
                print(
                    f"round {i + 1}: ct-stream np {np} {stores:9} Triad {c['triad']:7.2f} GB/s"
                    f" per rank (each rank's own: {c['triad_rank_mean']:7.2f})  passed "
                    f"{c['passed']}  load {os.getloadavg()[0]:.1f}",
                    flush=True,
                )
    figures: dict = {"hpl_n": n_hpl, "vector_size": vector}
    print("\nTriad GB/s per rank (one rank's bytes over the job's time):")
    for np in nps:
        ok = [h["triad"] for h in hpcc[np] if h["validated"]]
        print(f"np {np}: arrays of {vector[np]} doubles ({vector[np] * 8 / 2**20:.0f} MiB) a rank")
        if not ok:
            print("  hpcc: no run validated its STREAM")
            continue
        print(f"  hpcc StarSTREAM          {stats(ok)}")
        figures[f"hpcc_np{np}"] = ok
        for stores in STORES:
            got = [c["triad"] for c in ct[(np, stores)] if c["passed"]]
            if not got:
                print(f"  ct-stream {stores}: no run passed verification")
                continue
            ratio = max(got) / max(ok)
            median_ratio = statistics.median(got) / statistics.median(ok)
            print(f"  ct-stream {stores:9}      {stats(got)}")
            print(f"    / hpcc: {ratio:.3f} (best / best), {median_ratio:.3f} (median / median)")
            figures[f"ct_np{np}_{stores}"] = got
            figures[f"ratio_np{np}_{stores}"] = {"best": ratio, "median": median_ratio}
    print(f"load average after: {os.getloadavg()}")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
