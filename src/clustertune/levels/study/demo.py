"""The studies' step in ``make demo``: every built-in study's quick variant."""

from __future__ import annotations

from .. import DEMO_DIR


def demo(cluster, store) -> list[dict]:
    """The quick variant of every built-in study on its own virtual clusters (root), or on
    the demo's cluster without root (fault-injecting steps then left out); each study's
    page written to out/ beside the report."""
    import os
    import sys

    from ...studies import execute, page, spec

    records, refused = [], []
    for name in spec.builtin():
        study = spec.load(name, quick=True)
        out = execute.run(study, store, cluster=None if os.geteuid() == 0 else cluster)
        records += [store.get(run_id) for p in out.ran for run_id in p["runs"]]
        refused += [f"{name} {e['point']}" for e in out.errors]
        stored = sorted(
            (r for rs in execute.stored(store, name, True).values() for r in rs),
            key=lambda r: r["id"],
        )
        DEMO_DIR.mkdir(parents=True, exist_ok=True)
        path = DEMO_DIR / page.file_name(name, "quick")  # beside the report, which links it
        path.write_text(page.build(study, stored))
        print(f"[demo] study {name}: {path.resolve()}", file=sys.stderr, flush=True)
    if refused:  # no record stands for these, so the demo's "runs not ok" cannot count them
        print(
            f"[demo] study points refused, nothing stored: {'; '.join(refused)}",
            file=sys.stderr,
            flush=True,
        )
    return records
