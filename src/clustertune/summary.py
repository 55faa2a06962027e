"""The report's first screen: "is it healthy, how fast is it, against what", one or more
rows per level, each with its headline figure, the reference it is read against, the
ratio, the change since the previous run of the same kind on the same cluster, and a
verdict.

Each level gives its own rows (the ``summary`` part of its manifest, beside its section)
as :class:`Row`; this module holds what a row is and how the rows are shown.
clustertune.report collects them over the levels, says which levels were not run and
finds the earlier runs to compare with; the HTML report and ``clustertune report
--summary`` print the same rows.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from .render import esc

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
    # whether the figure crossed the links, so that a late emulated wire could distort it
    # (False: a launch, an inventory, a rank's own DGEMM or memory rate)
    over_wire: bool = True


def ratio_text(ratio: float | None) -> str:
    return f"{ratio:.2f}" if ratio is not None else ""


def in_study(record: dict) -> bool:
    return isinstance(record["meta"].get("study"), dict)


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
