"""The HTML report: one self-contained file (no script, no external resource): first the
summary table that answers "is it healthy, how fast, against what" (clustertune.summary),
then one section per level present in the store, long tables folded.

Each level's manifest names its section and its summary rows (clustertune.levels), which
this module asks for in the levels' declared order (clustertune.catalog); the frame never
names a level. The helpers the sections draw with are in
:mod:`clustertune.render`.
"""

from __future__ import annotations

from contextlib import suppress
from urllib.parse import quote

from . import __version__, catalog, render, summary
from .levels import Level
from .render import esc, fold, table
from .results import STATUSES, Store
from .runner import labels_text, now_iso, wire_late


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
    from .studies import page  # local: the study pages are drawn only when studied

    titles = _study_titles()
    rows = []
    for (name, variant), e in sorted(found.items()):
        href = quote(page.file_name(name, variant))
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
    from .studies import spec  # local: reading the study files is needed for their titles only

    titles = {}
    for name in spec.builtin():
        with suppress(UserError):
            titles[name] = spec.load(name).title
    return titles


def _level_section(level: Level, records: list[dict]) -> str:
    """The level's section on its own runs; the studies' points (their clusters, their
    settings) drawn the same way in a fold below, as their pages show them in full."""
    own = [r for r in records if not summary.in_study(r)]
    studied = [r for r in records if summary.in_study(r)]
    render_section = level.part("section")
    text = render_section(own) if own else ""
    if studied:
        names = ", ".join(sorted({str(r["meta"]["study"].get("name")) for r in studied}))
        text += fold(f"{len(studied)} run(s) of studies ({names})", render_section(studied))
    return text


def summary_rows(store: Store, records: list[dict]) -> list[summary.Row]:
    """The first screen of a report on ``records`` (earlier runs looked up in ``store``):
    every level that has a section or a summary, in report order, then the studies.
    A study's points are read on its own page, not in the levels' rows: its clusters and
    settings are the study's, not the user's cluster's."""
    by_level: dict[str, list[dict]] = {}
    for record in records:
        if not summary.in_study(record):
            by_level.setdefault(record["level"], []).append(record)
    studied = [r for r in records if summary.in_study(r)]
    history = _History(store)
    out: list[summary.Row] = []
    for level in catalog.all_levels():
        level_rows = level.part("summary")
        if level.section is None and level_rows is None:
            continue  # a level with nothing of its own in the report (e.g. study)
        mine = by_level.get(level.name, [])
        if not mine:
            in_studies = any(r["level"] == level.name for r in studied)
            got = [
                summary.Row(
                    level.title,
                    "in studies only" if in_studies else "not run",
                    state=summary.NONE,
                    linked=in_studies,
                )
            ]
        elif level_rows is None:
            got = [_counted(level.title, mine)]
        else:
            try:
                got = level_rows(mine) or [_counted(level.title, mine)]
            except (KeyError, TypeError, ValueError) as exc:
                # a record of an older shape: the row says so, the report is still written
                got = [
                    summary.Row(
                        level.title,
                        f"no summary: {exc!r}",
                        verdict="summary failed",
                        state=summary.BAD,
                        run=mine[-1]["id"],
                    )
                ]
        by_id = {r["id"]: r for r in mine}
        for row in got:
            row.level = level.name
            row.change = history.change(level.name, level_rows, row)
            late = wire_late(by_id[row.run]) if row.run in by_id else None
            if late and row.over_wire and row.state != summary.BAD:  # may be the wire's
                row.verdict, row.state = late, summary.WARN
        out += got
    return out + _study_rows(studied)


def _study_rows(records: list[dict]) -> list[summary.Row]:
    """One row for the studies among the runs (their pages hold the findings)."""
    if not records:
        return []
    names = sorted({str(r["meta"]["study"].get("name")) for r in records})
    bad = sum(r["status"] != "ok" for r in records)
    return [
        summary.Row(
            f"{len(names)} stud{'y' if len(names) == 1 else 'ies'}: {', '.join(names)}",
            f"{len(records)} run(s)",
            "each study's page",
            verdict=f"{bad} not ok" if bad else "all ok",
            state=summary.BAD if bad else summary.GOOD,
            level="studies",
        )
    ]


def _counted(title: str, records: list[dict]) -> summary.Row:
    """A level without headline figures: how many of its runs succeeded."""
    ok = sum(r["status"] == "ok" for r in records)
    bad = len(records) - ok
    return summary.Row(
        title,
        f"{len(records)} run(s)",
        verdict=f"{bad} not ok" if bad else "all ok",
        state=summary.BAD if bad else summary.GOOD,
        run=records[-1]["id"],
    )


class _History:
    """The store's runs of each level, read once, to find a row's previous value: the
    level's rows over its runs before the row's run, the one with the same key."""

    def __init__(self, store: Store):
        self.store = store
        self.by_level: dict[str, list[dict]] | None = None

    def change(self, level: str, level_rows, row: summary.Row) -> str:
        """``level_rows``: the level's summary part (None: its rows are not compared)."""
        if level_rows is None or row.value is None or not row.key or row.run is None:
            return ""
        if self.by_level is None:
            self.by_level = {}
            for record in self.store.list():
                if not summary.in_study(record):
                    self.by_level.setdefault(record["level"], []).append(record)
        earlier = [r for r in self.by_level.get(level, []) if r["id"] < row.run]
        before = None
        while earlier and before is None:
            try:
                got = level_rows(earlier)
            except (KeyError, TypeError, ValueError):  # older records: no comparison
                return ""
            before = next((b for b in got if b.key == row.key), None)
            # a level shows its newest run of each cluster: a run of another kind (another
            # N, size, BLAS) may hide the newest of this row's kind, so look behind it
            shown = {b.run for b in got}
            if before is None and not shown & {r["id"] for r in earlier}:
                return ""
            earlier = [r for r in earlier if r["id"] not in shown]
        if before is None or not before.value or before.run is None:
            return ""
        pct = round(100.0 * (row.value / before.value - 1.0))  # an int: no "-0 %"
        return f"{row.unit or row.measure} {pct:+d} % since run {before.run}"


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
        f"<style>{render.CSS}</style></head><body><h1>clustertune report</h1>",
        f"<p>Generated {esc(now_iso())} by clustertune {esc(__version__)} from "
        f"{esc(store.path)}: {len(records)} run(s). Each row is read from the newest "
        "run of its kind; its level links to the section with every run.</p>",
        summary.html_table(summary_rows(store, records)),
    ]
    for level in catalog.all_levels():
        level_records = by_level.pop(level.name, [])
        if level_records and level.section is not None:
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
