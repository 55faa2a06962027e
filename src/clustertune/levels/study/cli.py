"""``clustertune study list|run|report``: the papers' experiments as declarative studies
(clustertune.studies)."""

from __future__ import annotations

import argparse
from pathlib import Path

from ...commands import Output, open_store, store_parser


def cmd_list(args: argparse.Namespace) -> Output:
    from ...studies import execute, spec

    store = open_store(args)
    rows = []
    for name, path in spec.builtin().items():
        full, quick = spec.load(str(path)), spec.load(str(path), quick=True)
        done = {v: execute.stored(store, full.name, v == "quick") for v in ("quick", "full")}
        rows.append(
            {
                "name": name,
                "title": full.title,
                "paper": full.paper,
                "points_quick": len(quick.points()),
                "points_full": len(full.points()),
                "stored_quick": len(done["quick"]),
                "stored_full": len(done["full"]),
                "file": str(path),
            }
        )
    text = "\n".join(
        f"{r['name']:18} {r['paper']:10} points quick {r['points_quick']:3} "
        f"(stored {r['stored_quick']}), full {r['points_full']:3} (stored {r['stored_full']})"
        f"  {r['title']}"
        for r in rows
    )
    return Output(rows, text)


def cmd_run(args: argparse.Namespace) -> Output:
    from ...studies import execute, spec

    study = spec.load(args.study, quick=args.quick)
    if args.max_points is not None and args.max_points < 0:
        from ...errors import UserError

        raise UserError(f"--max-points {args.max_points}: must be >= 0")
    out = execute.run(
        study,
        open_store(args),
        cluster=args.cluster,
        max_points=args.max_points,
        redo_failed=args.redo_failed,
    )
    payload = out.__dict__ | {"ok": out.ok}
    lines = [
        f"study {out.study} ({out.variant}): {out.points} points, {len(out.ran)} run, "
        f"{len(out.skipped)} done before, {len(out.errors)} refused, "
        f"{len(out.not_run)} not runnable here"
    ]
    lines += [f"  refused {e['point']}: {e['error']}" for e in out.errors]
    lines += [
        f"  not ok {p['point']}: {p['status']} (run {p['runs']})"
        for p in out.ran
        if p["status"] != "ok"
    ]
    if out.stopped_after is not None:
        lines.append(f"  stopped after {out.stopped_after} new point(s); run again to go on")
    lines.append(f"report: clustertune study report {args.study}{' --quick' * args.quick}")
    return Output(payload, "\n".join(lines), 0 if out.ok else 1)


def cmd_report(args: argparse.Namespace) -> Output:
    from ...studies import execute, page, spec

    study = spec.load(args.study, quick=args.quick)
    records = [
        r for rs in execute.stored(open_store(args), study.name, args.quick).values() for r in rs
    ]
    records.sort(key=lambda r: r["id"])
    out = Path(args.out or page.file_name(study.name, execute.variant(args.quick)))
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(page.build(study, records))
    return Output(
        {"report": str(out.resolve()), "runs": len(records)},
        f"study report written to {out.resolve()} ({len(records)} run(s))",
    )


def add_commands(sub, common) -> None:
    st = sub.add_parser("study", help="the papers' experiments: list, run, report")
    st_sub = st.add_subparsers(dest="action", required=True, metavar="ACTION")
    store = store_parser()  # list and report read the store only: no --cluster
    p = st_sub.add_parser("list", parents=[store], help="built-in studies and stored points")
    p.set_defaults(func=cmd_list)
    p = st_sub.add_parser("run", parents=[common], help="run a study's unfinished points")
    p.add_argument("study", help="a built-in study's name or a study file (TOML)")
    p.add_argument("--quick", action="store_true", help="the quick variant (small sizes)")
    p.add_argument("--max-points", type=int, help="stop after this many new points")
    p.add_argument("--redo-failed", action="store_true", help="run failed points again")
    p.set_defaults(func=cmd_run)
    p = st_sub.add_parser("report", parents=[store], help="the study's HTML page")
    p.add_argument("study", help="a built-in study's name or a study file (TOML)")
    p.add_argument("--quick", action="store_true", help="the quick variant's runs")
    p.add_argument("--out", help="output file (default clustertune-study-NAME.html)")
    p.set_defaults(func=cmd_report)
