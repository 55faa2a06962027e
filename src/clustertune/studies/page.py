"""A study's HTML page: the paper's findings marked reproduced or not with the measured
evidence, this cluster beside the paper's machines, a table and a plot per step. Self-
contained (inline SVG, no external resource), drawn with clustertune.render's helpers."""

from __future__ import annotations

from collections import defaultdict

from .. import __version__, render
from ..render import esc, svg, table
from ..runner import now_iso
from ..units import format_rate
from . import catalog, findings, reference
from .execute import summary
from .kinds import point_label
from .spec import Study


def file_name(name: str, variant: str) -> str:
    """The file name ``clustertune study report NAME [--quick]`` and the demo write a
    study's page to (levels/study): the main report links to it relatively, so both
    belong in one directory."""
    return f"clustertune-study-{name}{'-quick' if variant == 'quick' else ''}.html"


STATUS_CLASS = {
    "reproduced": "ok",
    "not reproduced": "failed",
    "no data": "incomplete",
    "not judged": "incomplete",
}


def _findings(study: Study, records: list[dict]) -> tuple[str, list[dict]]:
    results = [findings.evaluate(f, records) for f in study.findings]
    rows = [
        [
            r["text"],
            "" if r["paper"] is None else f"{r['paper']} {r['unit']}".strip(),
            "-" if r["measured"] is None else f"{r['measured']:.3g} {r['unit']}".strip(),
            r["status"],
            r["evidence"],
            ", ".join(map(str, r["runs"])),
        ]
        for r in results
    ]
    text = table(["finding (paper)", "paper", "here", "verdict", "evidence", "runs"], rows)
    for status, css in STATUS_CLASS.items():
        text = text.replace(f"<td>{status}</td>", f'<td class="{css}">{status}</td>')
    return text, results


def _wires(records: list[dict]) -> str:
    """Which wire each of the study's clusters had: a finding on mid-size messages is
    judged only on a paced wire (findings.MID_SIZE_FIGURES)."""
    seen: dict[str, set] = defaultdict(set)
    for r in records:
        cluster = r["meta"]["cluster"]
        links = {format_rate(v) for v in cluster.get("link_bps", {}).values()}
        wire = cluster.get("wire")
        seen[r["meta"]["study"]["cluster"]].add(
            f"{', '.join(sorted(links))} links, "
            + (f"{wire} wire (virtual)" if wire else "real links")
        )
    if not seen:
        return ""
    items = "".join(
        f"<li>{esc(name)}: {esc('; '.join(sorted(wires)))}</li>"
        for name, wires in sorted(seen.items())
    )
    return f"<h2>Clusters and their wires</h2><ul>{items}</ul>"


def _beside(study: Study, records: list[dict]) -> str:
    if study.reference is None:
        return ""
    rows = [
        [r["item"], r["machine"], r["quantity"], f"{r['value']:g}", r["unit"], r["source"]]
        for r in reference.load(study.reference)
    ]
    for here in study.here:
        value, runs = findings.select(records, here["a"])
        scaled = None if value is None else value * here.get("scale", 1.0)
        rows.append(
            [
                here.get("item", ""),
                f"this cluster (runs {', '.join(map(str, runs))})",
                here["quantity"],
                findings.fmt(scaled),
                here.get("unit", ""),
                f"{here['a']['step']} {here['a'].get('where', {})}",
            ]
        )
    rows.sort(key=lambda r: (r[2], r[0], r[1].startswith("this cluster")))
    return "<h2>The paper's machines and this cluster</h2>" + table(
        ["table/figure", "machine", "quantity", "value", "unit", "source"], rows
    )


def _figure_plot(step_records: list[dict], figure: str, x: str) -> str:
    """The kind's figure against the step's swept value ``x``, a line per other value."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6.4, 4.0))
    ax = fig.add_subplot()
    ax.grid(True, which="both", alpha=0.3)
    order: list = []  # x in the order the points ran ("4K" before "256K")
    by_label = defaultdict(dict)
    for r in sorted(step_records, key=lambda r: r["id"]):
        got = findings.values_of(r, figure)
        xv = findings.text_of(r["meta"]["study"]["values"].get(x))
        if got:
            order += [xv] if xv not in order else []
            by_label[point_label(r, skip=x)][xv] = max(got)
    numeric = all(isinstance(v, int | float) for v in order)
    for label, pts in by_label.items():
        xs = [v for v in order if v in pts]
        ax.plot(
            xs if numeric else [order.index(v) for v in xs],
            [pts[v] for v in xs],
            marker="o",
            label=label,
        )
    if not ax.lines:
        return ""
    if not numeric:
        ax.set_xticks(range(len(order)), [str(v) for v in order])
    ax.set_xlabel(x)
    ax.set_ylabel(figure.removeprefix("samples."))
    ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), fontsize="small")
    return svg(fig)


def _steps(study: Study, records: list[dict]) -> str:
    parts = []
    by_step = defaultdict(list)
    for r in records:
        by_step[r["meta"]["study"]["step"]].append(r)
    for step in study.steps:
        got = by_step.get(step.name, [])
        parts.append(
            f"<h3 id='step-{esc(step.name)}'>{esc(step.title or step.name)} "
            f"<small>({esc(step.kind)} on {esc(step.cluster)})</small></h3>"
        )
        if not got:
            parts.append("<p>No run stored yet.</p>")
            continue
        rows = [
            [
                r["meta"]["study"]["point"],
                r["id"],
                r["meta"]["cluster"]["name"],
                r["status"],
                summary(r),
                (r["error"] or "").split("\n")[0],
            ]
            for r in got
        ]
        parts.append(table(["point", "run", "cluster", "status", "figures", "error"], rows))
        varying = [*step.sweep, *dict.fromkeys(k for c in step.cases for k in c)]
        x = "np" if "np" in varying else next(iter(varying), None)
        oks = [r for r in got if r["status"] == "ok"]
        kind = catalog.kinds()[step.kind]
        if oks and kind.figure and x is not None and (plot := _figure_plot(oks, kind.figure, x)):
            parts.append(plot)
        if oks and kind.plots is not None and (plot := kind.plots(oks)):
            parts.append(plot)
    return "<h2>Measurements</h2>" + "\n".join(parts)


def build(study: Study, records: list[dict]) -> str:
    """The page; ``records`` are the study's stored records (one variant)."""
    found, results = _findings(study, records)
    tally = {s: sum(r["status"] == s for r in results) for s in STATUS_CLASS}
    head = (
        f"<p>{esc(study.description)}</p><p>Paper: {esc(study.paper)}. Variant: "
        f"{'quick' if study.quick else 'full'}; {len(records)} stored run(s); findings "
        f"reproduced {tally['reproduced']}, not reproduced {tally['not reproduced']}, "
        f"not judged {tally['not judged']}, "
        f"without data {tally['no data']}. Generated {esc(now_iso())} by clustertune "
        f"{esc(__version__)}.</p>"
    )
    return "\n".join(
        [
            "<!DOCTYPE html><html><head><meta charset='utf-8'>",
            f"<title>clustertune study {esc(study.name)}</title><style>{render.CSS}</style></head><body>",
            f"<h1>Study {esc(study.name)}: {esc(study.title)}</h1>",
            head,
            "<h2>The paper's findings</h2>",
            found,
            _wires(records),
            _beside(study, records),
            _steps(study, records),
            "</body></html>",
        ]
    )
