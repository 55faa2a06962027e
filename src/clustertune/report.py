"""The HTML report: one self-contained file, one section per level present in the store.

A level adds its section by registering a renderer with :func:`section`; the report frame
never names a level. Plots are inline SVG (matplotlib's SVG backend), so the file needs
no network and no CDN.
"""

from __future__ import annotations

import html
import io
from collections.abc import Callable
from dataclasses import dataclass

from . import __version__, levels
from .results import Store
from .runner import now_iso

Renderer = Callable[[list[dict]], str]


@dataclass(frozen=True)
class Section:
    level: str
    title: str
    order: int
    render: Renderer


_SECTIONS: dict[str, Section] = {}


def section(level: str, title: str, order: int = 50) -> Callable[[Renderer], Renderer]:
    """Decorator: ``render(records) -> HTML fragment`` for the records of ``level``."""

    def register(render: Renderer) -> Renderer:
        _SECTIONS[level] = Section(level, title, order, render)
        return render

    return register


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


_CSS = """
body{font-family:system-ui,sans-serif;margin:2em auto;max-width:72em;color:#222}
h1{border-bottom:2px solid #345} h2{color:#345;margin-top:2em}
table{border-collapse:collapse;margin:1em 0;font-size:90%}
td,th{border:1px solid #ccc;padding:.25em .6em;text-align:left}
th{background:#eef} .failed{color:#b00;font-weight:bold} .ok{color:#070}
.incomplete{color:#a60} svg{max-width:100%;height:auto}
pre{background:#f6f6f6;padding:.5em;white-space:pre-wrap}
"""


def _run_table(records: list[dict]) -> str:
    rows = []
    for r in records:
        mpi = (r["meta"].get("mpi") or {}).get("flavour") or ""
        rows.append(
            [r["id"], r["started"], r["level"], r["kernel"], r["meta"]["cluster"]["name"],
             r["meta"].get("np") or "", mpi, r["status"], r["verification"]]
        )  # fmt: skip
    text = table(
        ["id", "started", "level", "kernel", "cluster", "np", "mpi", "status", "verification"], rows
    )
    for status in ("failed", "incomplete", "ok"):
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


def build(store: Store, run_ids: list[int] | None = None) -> str:
    levels.load_all()
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
        f"{esc(store.path)}: {len(records)} run(s).</p>",
    ]
    for sec in sorted(_SECTIONS.values(), key=lambda s: (s.order, s.level)):
        level_records = by_level.pop(sec.level, [])
        if level_records:
            parts.append(f"<h2 id='{esc(sec.level)}'>{esc(sec.title)}</h2>")
            parts.append(sec.render(level_records))
    for level, level_records in sorted(by_level.items()):  # levels without a renderer
        parts.append(f"<h2>{esc(level)}</h2><p>{len(level_records)} run(s); no renderer.</p>")
    parts.append("<h2>All runs</h2>" + _run_table(records))
    parts.append(_problems(records))
    parts.append("</body></html>")
    return "\n".join(parts)
