"""The host's BLAS choice (levels/linpack/choice.py): how long it takes and what it picks,
against the choice of an earlier commit, then a referee for the picks.

    .venv/bin/python bench/blas_choice.py --against 6404dbe --rounds 3

Each round runs ``clustertune blas choose`` with an empty choice cache once with this
tree's source and once with the source of ``--against`` (``git archive`` into a temporary
directory; the same built kernels), in alternating order, and prints the wall time, the
CPU time of the command and its children, the load and the library + core chosen. Then
every pick is measured by one referee (ct-gemm --local DGEMM at --referee-n, 2 ranks,
best CPU-time rate of --referee-rounds alternating launches of 3 products): a pick
other than the other method's is no worse when its referee rate is within the referee's
own spread.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from clustertune.cluster import local_cluster  # noqa: E402
from clustertune.levels.linpack import blas as blaslib  # noqa: E402
from clustertune.levels.linpack import choice, jobs  # noqa: E402
from clustertune.results import Store  # noqa: E402


def choose(src: Path, work: Path, tag: str) -> dict:
    """One ``blas choose`` with an empty cache, the source tree ``src``."""
    cache = Path(tempfile.mkdtemp(prefix=f"{tag}-", dir=work))
    env = os.environ | {
        "PYTHONPATH": str(src),
        "CLUSTERTUNE_BUILD_DIR": str(ROOT / "build"),
        "CLUSTERTUNE_BLAS_CACHE": str(cache),
    }
    argv = [sys.executable, "-m", "clustertune.cli", "blas", "choose", "--json"]
    argv += ["--db", str(cache / "results.db")]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    load, start = os.getloadavg()[0], time.monotonic()
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=1800)
    wall = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{tag}: blas choose failed: {done.stderr[-2000:]}")
    chosen = json.loads(done.stdout)
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    return {
        "tag": tag,
        "wall_s": wall,
        "cpu_s": cpu,
        "load": (load, os.getloadavg()[0]),
        "pick": chosen["directory"] + (f"#{chosen['coretype']}" if chosen["coretype"] else ""),
        "label": chosen["label"],
        "version": chosen["version"],
    }


def referee(keys: list[str], n: int, rounds: int, work: Path) -> dict[str, list[float]]:
    """The best CPU-time DGEMM rate of each launch of each candidate, alternating."""
    by_key = {b.key: b for b in choice.candidates()}
    store = Store(work / "referee.db")
    rates: dict[str, list[float]] = {k: [] for k in keys}
    for round_ in range(rounds):
        for key in keys if round_ % 2 == 0 else keys[::-1]:
            b = by_key[key]
            record = jobs.gemm_job(
                local_cluster(),
                store,
                2,
                "openmpi",
                jobs.gemm_args(str(n), 192, "d", 3, True, 1, 2),
                env=blaslib.environment(b),
                derive=blaslib.library_check(b),
            )
            if record["status"] != "ok" or record.get("verification") != "passed":
                print(f"referee: {key} run {record.get('id')} failed: {record.get('error')}")
                continue  # a failed launch is no rate
            rates[key].append(choice.best_cpu_rate(record))
    return rates


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--against", default="6404dbe", help="the commit to compare with")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--referee-n", type=int, default=2048)
    ap.add_argument("--referee-rounds", type=int, default=4)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="blas-choice-bench-"))
    print(f"caches, databases and the old source in {work} (left for inspection)", flush=True)
    old = work / "old"
    old.mkdir()
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", args.against, "src"], capture_output=True, check=True
    )
    subprocess.run(["tar", "-x", "-C", str(old)], input=archive.stdout, check=True)
    trees = {"this tree": ROOT / "src", args.against: old / "src"}
    runs = []
    for round_ in range(args.rounds):
        order = list(trees) if round_ % 2 == 0 else list(trees)[::-1]
        for tag in order:
            run = choose(trees[tag], work, tag.replace(" ", "-"))
            runs.append(run)
            print(
                f"round {round_ + 1}: {tag:<10} {run['wall_s']:6.1f} s wall {run['cpu_s']:6.1f} s CPU"
                f"  load {run['load'][0]:.1f}-{run['load'][1]:.1f}  {run['label']}"
                f" [{run['version']}]",
                flush=True,
            )
    for tag in trees:
        walls = [r["wall_s"] for r in runs if r["tag"] == tag.replace(" ", "-")]
        cpus = [r["cpu_s"] for r in runs if r["tag"] == tag.replace(" ", "-")]
        print(
            f"{tag:<10} wall best {min(walls):.1f} median {statistics.median(walls):.1f} "
            f"(spread {min(walls):.1f}-{max(walls):.1f}) s; CPU median {statistics.median(cpus):.1f} s"
        )
    picks = sorted({r["pick"] for r in runs})
    rates = referee(picks, args.referee_n, args.referee_rounds, work)
    top = max((max(v) for v in rates.values() if v), default=0.0)
    print(f"referee: DGEMM N={args.referee_n}, 2 ranks, best CPU-time rate of each launch")
    for key, values in rates.items():
        if not values:
            print(f"  {key:<70} no launch passed")
            continue
        chosen_by = sorted({r["tag"] for r in runs if r["pick"] == key})
        print(
            f"  {key:<70} best {max(values):6.1f} ({100 * max(values) / top:5.1f} %)"
            f" launches {', '.join(f'{v:.1f}' for v in values)}  chosen by {', '.join(chosen_by)}"
        )


if __name__ == "__main__":
    main()
