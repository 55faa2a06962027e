"""HTML and plot helpers that every level's report section uses.

Plots are inline SVG (matplotlib's SVG backend), so the report needs no network and no CDN.
"""

from __future__ import annotations

import html
import io


def pyplot():
    """matplotlib.pyplot on the Agg backend, imported only when a plot is drawn: the CLI
    loads every level (and so this module) at start-up and should stay quick."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


# Text stays text in the SVG (searchable, testable), and equal figures give equal files.
_SVG_RC = {"svg.fonttype": "none", "svg.hashsalt": "clustertune"}


def svg(fig) -> str:
    """A matplotlib figure as an inline SVG element (the figure is closed)."""
    import matplotlib

    plt = pyplot()
    buffer = io.StringIO()
    with matplotlib.rc_context(_SVG_RC):
        fig.savefig(buffer, format="svg", metadata={"Date": None}, bbox_inches="tight")
    plt.close(fig)
    text = buffer.getvalue()
    return text[text.index("<svg") :]


def esc(value: object) -> str:
    return html.escape("" if value is None else str(value))


def table(headers: list[str], rows: list[list[object]]) -> str:
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{esc(c)}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


# A table longer than this is folded (closed <details>, no script): the report's reader
# sees the summary and the best rows, and opens the rest when needed.
FOLD_ROWS = 12


def fold(label: str, body: str) -> str:
    """``body`` behind a closed disclosure whose summary line is ``label``."""
    return f"<details><summary>{esc(label)}</summary>{body}</details>"


def folded_table(
    headers: list[str], rows: list[list[object]], shown: list[int], what: str = "rows"
) -> str:
    """A table; past FOLD_ROWS rows, only the rows at the indices ``shown`` (the best,
    the failed) stay in view and the whole table goes in a fold."""
    if len(rows) <= FOLD_ROWS:
        return table(headers, rows)
    kept = [rows[i] for i in sorted(set(shown))]
    return (table(headers, kept) if kept else "") + fold(
        f"All {len(rows)} {what}", table(headers, rows)
    )


# The page style of the report and the study pages. Plots are capped at 18em tall, scaled with their aspect ratio kept: two wide plots
# share a line at 1400 px and the demo's page stays about half as tall as it was.
CSS = """
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
