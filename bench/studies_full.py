#!/usr/bin/env python3
"""The four built-in studies in full, one after the other, into one database (issue 14).

Each study's full variant runs on its own virtual clusters (root; built and removed by the
study), every point stored in --db; a study that fails (a point not ok, a point refused, or
an exception) is reported and the next one runs. Then each study's page and the main report
(which links the pages beside it) are written to --out. Printed per study: its wall time,
points run / done before / not ok, and the load average at its start and end.

A rerun with the same --db skips the points already stored (the studies resume): delete
the database for a fresh measurement. --quick runs the quick variants instead (a check of
the script itself: 112 s at load 4.5-5).

Usage (root): bench/studies_full.py [--db out/studies-full.db] [--out out]
                                    [--studies grid-linpack,npb-qcd,...] [--quick] [--json F]
Exit status 0 when every study ran all its points ok, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from clustertune import report  # noqa: E402
from clustertune.errors import UserError  # noqa: E402
from clustertune.launch.process import signal_of, stop_on_signals  # noqa: E402
from clustertune.results import Store  # noqa: E402
from clustertune.studies import execute, page, spec  # noqa: E402


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def run_study(name: str, store: Store, quick: bool, out: Path) -> dict:
    """One study run (resuming) and its page written: the row of the summary."""
    study = spec.load(name, quick=quick)
    got = execute.run(study, store)
    records = sorted(
        (r for rs in execute.stored(store, name, quick).values() for r in rs), key=lambda r: r["id"]
    )
    path = out / page.file_name(name, execute.variant(quick))
    path.write_text(page.build(study, records))
    bad = [f"{p['point']}: {p['status']}" for p in got.ran if p["status"] != "ok"]
    bad += [f"{e['point']}: refused: {e['error']}" for e in got.errors]
    return {
        "points": got.points,
        "ran": len(got.ran),
        "skipped": len(got.skipped),
        "not_run": len(got.not_run),
        "problems": bad,
        "ok": got.ok,
        "page": str(path),
    }


def run_all(
    names: list[str], one: Callable[[str], dict], log: Callable[[str], None] = print
) -> list[dict]:
    """Every study in turn, timed; an exception fails that study only; SIGINT/SIGTERM stop
    the study running (its point stored interrupted, its clusters removed) and the rest."""
    rows = []
    for name in names:
        begin, load_before = time.monotonic(), load()
        log(f"== {name}: start (load {load_before})")
        stop = False
        try:
            row = one(name)
        except Exception as exc:  # noqa: BLE001 - one study's failure must not stop the others
            traceback.print_exc()
            row = {"ok": False, "problems": [f"{type(exc).__name__}: {exc}"]}
        except KeyboardInterrupt as exc:
            row = {
                "ok": False,
                "problems": [f"interrupted ({signal.Signals(signal_of(exc)).name})"],
            }
            stop = True
        row |= {
            "study": name,
            "wall_s": time.monotonic() - begin,
            "load_before": load_before,
            "load_after": load(),
        }
        log(f"== {name}: {'ok' if row['ok'] else 'FAILED'} in {row['wall_s']:.0f} s")
        rows.append(row)
        if stop:
            break
    return rows


def summary(rows: list[dict]) -> str:
    lines = [
        f"{'study':18} {'wall s':>7} {'points':>6} {'ran':>4} {'before':>6} "
        f"{'not ok':>6}  load start / end"
    ]
    for r in rows:
        lines.append(
            f"{r['study']:18} {r['wall_s']:7.0f} {r.get('points', '-'):>6} "
            f"{r.get('ran', '-'):>4} {r.get('skipped', '-'):>6} "
            f"{len(r['problems']):>6}  {r['load_before']} / {r['load_after']}"
        )
        lines += [f"    {p}" for p in r["problems"]]
    lines.append(
        f"total {sum(r['wall_s'] for r in rows):.0f} s; "
        f"{sum(not r['ok'] for r in rows)} of {len(rows)} studies failed"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", default="out/studies-full.db", help="the results database")
    ap.add_argument("--out", default="out", help="directory of the pages and the report")
    ap.add_argument("--studies", default=",".join(spec.builtin()), help="comma-separated")
    ap.add_argument("--quick", action="store_true", help="the quick variants (a check)")
    ap.add_argument("--json", help="the summary rows as JSON")
    args = ap.parse_args(argv)
    names = [n for n in args.studies.split(",") if n]
    try:
        for name in names:
            spec.load(name)  # an unknown name is refused before anything runs
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    Path(args.db).parent.mkdir(parents=True, exist_ok=True)
    store = Store(args.db)
    stop_on_signals()  # as the CLI: a stop signal stops the running job, which is stored
    try:
        rows = run_all(names, lambda name: run_study(name, store, args.quick, out))
        main_report = out / "clustertune-report.html"
        main_report.write_text(report.build(store))
    finally:
        store.close()
    print(summary(rows))
    print(f"report: {main_report.resolve()} (study pages beside it)")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
