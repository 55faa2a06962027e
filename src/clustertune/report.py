"""The HTML report: one self-contained file (no script, no external resource): first the
summary table that answers "is it healthy, how fast, against what" (clustertune.summary),
then one section per level present in the store, long tables folded.

Each level's descriptor carries its renderer and its summary rows (clustertune.levels);
the frame never names a level. The helpers the sections draw with are in
:mod:`clustertune.render`.
"""

from __future__ import annotations

from contextlib import suppress
from urllib.parse import quote

from . import __version__, levels, summary
from .render import esc, fold, table
from .results import STATUSES, Store
from .runner import labels_text, now_iso

# Plots are capped at 18em tall, scaled with their aspect ratio kept: two wide plots
# share a line at 1400 px and the demo's page stays about half as tall as it was.
_CSS = """
body{font-family:system-ui,sans-serif;margin:2em auto;max-width:84em;color:#222}
h1{border-bottom:2px solid #345} h2{color:#345;margin-top:2em}
table{border-collapse:collapse;margin:1em 0;font-size:90%}
td,th{border:1px solid #ccc;padding:.25em .6em;text-align:left}
th{background:#eef} .failed{color:#b00;font-weight:bold} .ok{color:#070}
.incomplete,.interrupted{color:#a60}
svg{max-width:100%;max-height:18em;width:auto;height:auto;vertical-align:top}
pre{background:#f6f6f6;padding:.5em;white-space:pre-wrap}
details{margin:.5em 0} summary{cursor:pointer;color:#345}
#summary{font-size:85%;margin-top:.5em} #summary td{padding:.1em .45em}
#summary td:nth-child(3),#summary td:nth-child(6){text-align:right}
#summary tr.good td.v{color:#070} #summary tr.warn td.v{color:#a60;font-weight:bold}
#summary tr.bad td.v{color:#b00;font-weight:bold} #summary tr.none td.v{color:#666}
"""


def _run_table(records: list[dict]) -> str:
    """How many runs ended how, every run in a fold (the runs not ok are listed with
    their errors below it)."""
    counts = ", ".join(
        f"{n} {status}" for status in STATUSES if (n := sum(r["status"] == status for r in records))
    )
    return f"<p>{len(records)} run(s): {counts or 'none'}.</p>" + fold(
        f"All {len(records)} runs", _runs(records)
    )


def _runs(records: list[dict]) -> str:
    rows = []
    for r in records:
        mpi = (r["meta"].get("mpi") or {}).get("flavour") or ""
        rows.append(
            [
                r["id"],
                r["started"],
                r["level"],
                r["kernel"],
                r["meta"]["cluster"]["name"],
                r["meta"].get("np") or "",
                mpi,
                r["status"],
                r["verification"],
                labels_text(r),
            ]
        )
    headers = ["id", "started", "level", "kernel", "cluster", "np", "mpi", "status"]
    text = table([*headers, "verification", "labels"], rows)
    for status in STATUSES:
        text = text.replace(f"<td>{status}</td>", f'<td class="{status}">{status}</td>')
    return text


def _problems(records: list[dict]) -> str:
    bad = [r for r in records if r["status"] != "ok"]
    if not bad:
        return ""
    items = "".join(
        f"<li>run {r['id']} ({esc(r['level'])}/{esc(r['kernel'])}): <pre>{esc(r['error'])}</pre></li>"
        for r in bad
    )
    return f"<h2>Runs that did not succeed</h2><ul>{items}</ul>"


def study_page(name: str, variant: str) -> str:
    """The file name ``clustertune study report NAME [--quick]`` and the demo write a
    study's page to (levels/study): the main report links to it relatively, so both
    belong in one directory."""
    return f"clustertune-study-{name}{'-quick' if variant == 'quick' else ''}.html"


def _studies(records: list[dict]) -> str:
    """The studies whose points are among the records (``meta.study``), each linked to
    its page."""
    found: dict[tuple[str, str], dict] = {}
    for r in records:
        tag = r["meta"].get("study")
        if not isinstance(tag, dict) or not tag.get("name"):
            continue
        entry = found.setdefault(
            (str(tag["name"]), str(tag.get("variant") or "full")),
            {"points": set(), "runs": 0, "not_ok": 0},
        )
        entry["points"].add(tag.get("point"))
        entry["runs"] += 1
        entry["not_ok"] += r["status"] != "ok"
    if not found:
        return ""
    titles = _study_titles()
    rows = []
    for (name, variant), e in sorted(found.items()):
        href = quote(study_page(name, variant))
        rows.append(
            f"<tr><td><a href='{esc(href)}'>{esc(name)}</a></td><td>{esc(variant)}</td>"
            f"<td>{esc(titles.get(name, ''))}</td><td>{len(e['points'])}</td>"
            f"<td>{e['runs']}</td><td>{e['not_ok']}</td></tr>"
        )
    head = "".join(
        f"<th>{h}</th>" for h in ("study", "variant", "title", "points", "runs", "runs not ok")
    )
    return (
        "<h2 id='studies'>Studies</h2><p>The papers' experiments among these runs; each "
        "study's page (<code>clustertune study report NAME [--quick]</code>, written beside "
        f"this report) has its findings, tables and plots.</p><table><thead><tr>{head}</tr>"
        f"</thead><tbody>{''.join(rows)}</tbody></table>"
    )


def _study_titles() -> dict[str, str]:
    from .errors import UserError
    from .studies import spec  # local: studies.page imports this module

    titles = {}
    for name in spec.builtin():
        with suppress(UserError):
            titles[name] = spec.load(name).title
    return titles


def _level_section(level: levels.Level, records: list[dict]) -> str:
    """The level's section on its own runs; the studies' points (their clusters, their
    settings) drawn the same way in a fold below, as their pages show them in full."""
    own = [r for r in records if not summary.in_study(r)]
    studied = [r for r in records if summary.in_study(r)]
    text = level.render(own) if own else ""
    if studied:
        names = ", ".join(sorted({str(r["meta"]["study"].get("name")) for r in studied}))
        text += fold(f"{len(studied)} run(s) of studies ({names})", level.render(studied))
    return text


def build(store: Store, run_ids: list[int] | None = None) -> str:
    records = store.list()
    if run_ids:
        wanted = set(run_ids)
        records = [r for r in records if r["id"] in wanted]
    by_level: dict[str, list[dict]] = {}
    for record in records:
        by_level.setdefault(record["level"], []).append(record)
    parts = [
        "<!DOCTYPE html><html><head><meta charset='utf-8'><title>clustertune report</title>",
        f"<style>{_CSS}</style></head><body><h1>clustertune report</h1>",
        f"<p>Generated {esc(now_iso())} by clustertune {esc(__version__)} from "
        f"{esc(store.path)}: {len(records)} run(s).</p><p>Each row is read from the newest "
        "run of its kind; its level links to the section with every run.</p>",
        summary.html_table(summary.rows(store, records)),
    ]
    for level in levels.all_levels():
        level_records = by_level.pop(level.name, [])
        if level_records and level.render is not None:
            parts.append(f"<h2 id='{esc(level.name)}'>{esc(level.title)}</h2>")
            parts.append(_level_section(level, level_records))
        elif level_records:
            by_level[level.name] = level_records
    for level, level_records in sorted(by_level.items()):  # levels without a renderer
        parts.append(f"<h2>{esc(level)}</h2><p>{len(level_records)} run(s); no renderer.</p>")
    parts.append(_studies(records))
    parts.append("<h2>All runs</h2>" + _run_table(records))
    parts.append(_problems(records))
    parts.append("</body></html>")
    return "\n".join(parts)
