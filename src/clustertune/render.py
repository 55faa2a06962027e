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
