"""The report's first screen: "is it healthy, how fast is it, against what", one or more
rows per level, each with its headline figure, the reference it is read against, the
ratio, the change since the previous run of the same kind on the same cluster, and a
verdict.

Each level gives its own rows (``@LEVEL.summary`` beside its ``section.py``); this module
only collects them, says which levels were not run, and finds the earlier runs to compare
with. The HTML report (clustertune.report) and ``clustertune report --summary`` print the
same rows.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from . import levels
from .render import esc
from .results import Store
from .runner import wire_late

# verdict classes, worst last: the CSS class of the verdict cell
GOOD, WARN, BAD, NONE = "good", "warn", "bad", "none"


@dataclass
class Row:
    measure: str  # what is read: "TCP ping-pong host0-host1", "LU N=2016 2x2"
    figure: str  # the headline figure as shown: "1010 Mbit/s, 10.3 µs"
    reference: str = ""  # what it is read against: "1 Gbit/s nominal"
    ratio: float | None = None  # figure / reference
    verdict: str = ""  # one or two words: "in line", "below nominal", "check FAILED"
    state: str = GOOD  # GOOD, WARN, BAD or NONE (nothing to judge)
    value: float | None = None  # the headline number compared across runs
    unit: str = ""  # how the change is named: "Linpack", "TCP bandwidth"
    key: str = ""  # kind + cluster: rows of earlier runs with the same key are compared
    run: int | None = None  # the run the figure is read from
    level: str = ""  # set by the frame: the level, the anchor of its section
    change: str = ""  # set by the frame: "-12 % since run 41"
    linked: bool = True  # whether the report has a section to link to (not for "not run")


def ratio_text(ratio: float | None) -> str:
    return f"{ratio:.2f}" if ratio is not None else ""


def in_study(record: dict) -> bool:
    return isinstance(record["meta"].get("study"), dict)


def rows(store: Store, records: list[dict]) -> list[Row]:
    """The first screen of a report on ``records`` (earlier runs looked up in ``store``):
    every level that has a section or a summary, in report order, then the studies.
    A study's points are read on its own page, not in the levels' rows: its clusters and
    settings are the study's, not the user's cluster's."""
    by_level: dict[str, list[dict]] = {}
    for record in records:
        if not in_study(record):
            by_level.setdefault(record["level"], []).append(record)
    studied = [r for r in records if in_study(r)]
    history = _History(store)
    out: list[Row] = []
    for level in levels.all_levels():
        if level.render is None and level.summarize is None:
            continue  # a level with nothing of its own in the report (e.g. study)
        mine = by_level.get(level.name, [])
        if not mine:
            in_studies = any(r["level"] == level.name for r in studied)
            got = [
                Row(
                    level.title,
                    "in studies only" if in_studies else "not run",
                    state=NONE,
                    linked=in_studies,
                )
            ]
        elif level.summarize is None:
            got = [_counted(level.title, mine)]
        else:
            try:
                got = level.summarize(mine) or [_counted(level.title, mine)]
            except (KeyError, TypeError, ValueError) as exc:
                # a record of an older shape: the row says so, the report is still written
                got = [
                    Row(
                        level.title,
                        f"no summary: {exc!r}",
                        verdict="summary failed",
                        state=BAD,
                        run=mine[-1]["id"],
                    )
                ]
        by_id = {r["id"]: r for r in mine}
        for row in got:
            row.level = level.name
            row.change = history.change(level, row)
            late = wire_late(by_id[row.run]) if row.run in by_id else None
            if late and row.state != BAD:  # its figures may be the wire's: not judged
                row.verdict, row.state = late, WARN
        out += got
    return out + _studies(studied)


def _studies(records: list[dict]) -> list[Row]:
    """One row for the studies among the runs (their pages hold the findings)."""
    if not records:
        return []
    names = sorted({str(r["meta"]["study"].get("name")) for r in records})
    bad = sum(r["status"] != "ok" for r in records)
    return [
        Row(
            f"{len(names)} stud{'y' if len(names) == 1 else 'ies'}: {', '.join(names)}",
            f"{len(records)} run(s)",
            "each study's page",
            verdict=f"{bad} not ok" if bad else "all ok",
            state=BAD if bad else GOOD,
            level="studies",
        )
    ]


def _counted(title: str, records: list[dict]) -> Row:
    """A level without headline figures: how many of its runs succeeded."""
    ok = sum(r["status"] == "ok" for r in records)
    bad = len(records) - ok
    return Row(
        title,
        f"{len(records)} run(s)",
        verdict=f"{bad} not ok" if bad else "all ok",
        state=BAD if bad else GOOD,
        run=records[-1]["id"],
    )


class _History:
    """The store's runs of each level, read once, to find a row's previous value: the
    level's rows over its runs before the row's run, the one with the same key."""

    def __init__(self, store: Store):
        self.store = store
        self.by_level: dict[str, list[dict]] | None = None

    def change(self, level: levels.Level, row: Row) -> str:
        if level.summarize is None or row.value is None or not row.key or row.run is None:
            return ""
        if self.by_level is None:
            self.by_level = {}
            for record in self.store.list():
                if not in_study(record):
                    self.by_level.setdefault(record["level"], []).append(record)
        earlier = [r for r in self.by_level.get(level.name, []) if r["id"] < row.run]
        before = None
        while earlier and before is None:
            try:
                got = level.summarize(earlier)
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
        pct = 100.0 * (row.value / before.value - 1.0)
        return f"{row.unit or row.measure} {pct:+.0f} % since run {before.run}"


HEADERS = ("level", "measure", "run", "figure", "against", "ratio", "change", "verdict")


def cells(row: Row) -> list[str]:
    """A row's cells as text, in HEADERS' order (the HTML table and the terminal's)."""
    return [
        row.level,
        row.measure,
        "" if row.run is None else str(row.run),
        row.figure,
        row.reference,
        ratio_text(row.ratio),
        row.change,
        row.verdict,
    ]


def html_table(summary: list[Row]) -> str:
    """The first screen: a compact table, each row's level linking to its section."""
    body = []
    for row in summary:
        level, *rest = (esc(c) for c in cells(row))
        link = f"<a href='#{level}'>{level}</a>" if row.linked else level
        body.append(
            f"<tr class='{row.state}'><td>{link}</td>"
            + "".join(f"<td>{c}</td>" for c in rest[:-1])
            + f"<td class='v'>{rest[-1]}</td></tr>"
        )
    head = "".join(f"<th>{h}</th>" for h in HEADERS)
    return (
        f"<table id='summary'><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"
    )


def text_table(summary: list[Row]) -> str:
    """The same rows for the terminal, one line each, columns aligned."""
    lines = [list(HEADERS), *(cells(row) for row in summary)]
    widths = [max(len(line[i]) for line in lines) for i in range(len(HEADERS))]
    return "\n".join(
        "  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)).rstrip()
        for line in lines
    )


def as_json(summary: list[Row]) -> list[dict]:
    return [asdict(row) for row in summary]
