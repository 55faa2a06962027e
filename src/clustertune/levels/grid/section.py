"""The grid level's report section: the grids' sites (scheduler, contact, hosts) and
links, the co-allocated jobs' timelines (per site: allocation, requested -> granted ->
started -> ended, the heartbeat's verdict), and seeds/000's comparison: Linpack Gflops
and ping-pong latency / bandwidth inside one site vs across sites, side by side."""

from __future__ import annotations

from ...ceiling import above_ceiling
from ...render import esc, folded_table, table
from ...units import format_rate
from .compare import pairs


def _rate(bps: object) -> str:
    return format_rate(bps) if isinstance(bps, int | float) and bps else "-"


def _num(value: object, spec: str) -> str:
    return f"{value:{spec}}" if isinstance(value, int | float) else "-"


def sites_table(records: list[dict]) -> str:
    grids: dict[str, dict] = {}
    for r in records:  # the latest description of each grid
        g = r["params"].get("grid")
        if isinstance(g, dict) and "sites" in g:
            grids[g["name"]] = g
    rows = [
        [
            g["name"],
            s["name"],
            s["scheduler"],
            s["contact"],
            ", ".join(s["hosts"]),
            _rate(g.get("link_bps")),
            _rate(g.get("wan_bps")) if len(g["sites"]) > 1 else "-",
        ]
        for g in grids.values()
        for s in g["sites"]
    ]
    if not rows:
        return ""
    return "<h3>Sites</h3>" + table(
        ["grid", "site", "scheduler", "contact", "hosts", "link in site", "WAN"], rows
    )


def _since(t: object, t0: float) -> str:
    return f"{t - t0:+.2f}" if isinstance(t, int | float) else "-"


def jobs_table(records: list[dict]) -> str:
    """One row per site of every co-allocated run: the DUROC-style timeline, in seconds
    from the first request."""
    rows = []
    for r in records:
        report = r["meta"].get("coalloc")
        if not report:
            continue
        sites = report.get("sites", {})
        t0 = min((s["requested"] for s in sites.values() if "requested" in s), default=0.0)
        verdict = report.get("heartbeat") or report.get("error") or "ok"
        for name, s in sites.items():
            rows.append(
                [
                    r["id"],
                    r["kernel"],
                    r["params"].get("placement", "submitted"),
                    name,
                    s.get("scheduler", "-"),
                    s.get("allocation", "-"),
                    ", ".join(s.get("hosts", [])),
                    _since(s.get("granted"), t0),
                    _since(s.get("started"), t0),
                    _since(s.get("ended"), t0),
                    r["status"],
                    verdict,
                ]
            )
    if not rows:
        return ""
    return "<h3>Jobs and co-allocated runs (seconds from the request)</h3>" + folded_table(
        [
            "run",
            "kernel",
            "placement",
            "site",
            "scheduler",
            "allocation",
            "hosts",
            "granted",
            "started",
            "ended",
            "status",
            "co-allocation / heartbeat",
        ],
        rows,
        [i for i, row in enumerate(rows) if row[10] != "ok"],
        "site rows (not ok above)",
    )


def comparison_table(records: list[dict]) -> str:
    rows = []
    for p in pairs(records):
        if p["kernel"] == "linpack":
            w, a = p.get("within_gflops"), p.get("across_gflops")
            rows.append(
                [
                    p["grid"],
                    _rate(p["wan_bps"]),
                    f"Linpack N={p['n']} np={p['ranks']}",
                    p["mpi"],
                    _num(w, ".3f") + " Gflops",
                    _num(a, ".3f") + " Gflops",
                    _num(a / w, ".2f") if w and a else "-",
                ]
            )
        else:
            for what, unit, spec in (
                ("latency_us", "us", ".1f"),
                ("bandwidth_mbps", "Mbit/s", ".1f"),
            ):
                w, a = p.get(f"within_{what}"), p.get(f"across_{what}")
                rows.append(
                    [
                        p["grid"],
                        _rate(p["wan_bps"]),
                        f"MPI {p['mode']} {what.split('_')[0]}",
                        p["mpi"],
                        f"{_num(w, spec)} {unit}",
                        f"{_num(a, spec)} {unit}",
                        _num(a / w, ".2f") if w and a else "-",
                    ]
                )
    if not rows:
        return ""
    headers = ["grid", "WAN", "measure", "MPI", "within a site", "across sites", "across / within"]
    above = "".join(f"<li><b>{esc(n)}</b></li>" for n in above_payload(records))
    return (
        "<h3>Inside one site vs across sites (seeds/000)</h3>"
        "<p>Same kernel, same ranks (one per host): inside one site with the plain launcher, "
        "across two sites through the grid stack (co-allocated, ranks over the WAN).</p>"
        + table(headers, rows)
        + (f"<p>Above the link's TCP payload rate:</p><ul>{above}</ul>" if above else "")
    )


def above_payload(records: list[dict]) -> list[str]:
    """The ping-pong bandwidths above the TCP payload the link they crossed carries (the
    WAN across sites, the site's link within one), each with why it could be."""
    notes = []
    for r in records:
        p, bandwidth = r["params"], r["figures"].get("bandwidth_mbps")
        if p.get("comparison") != "pingpong" or "placement" not in p:
            continue
        link = p["grid"].get("wan_bps" if p["placement"] == "across" else "link_bps")
        why = above_ceiling(r, bandwidth, link)
        if why:
            notes.append(
                f"run {r['id']} ({p['placement']}): bandwidth {bandwidth:.1f} Mbit/s {why}"
            )
    return notes


def runs_table(records: list[dict]) -> str:
    rows = []
    for r in records:
        p, f = r["params"], r["figures"]
        if r["kernel"] == "grid-job":
            j = p["job"]
            shown = f"{j['jobtype']} x{j['count']} {j['executable']}: exit {f.get('exit_status')}"
        elif r["kernel"].endswith("linpack"):
            best = max((s["gflops"] for s in r["samples"] if s.get("passed")), default=None)
            shown = f"{_num(best, '.3f')} Gflops"
        else:
            shown = (
                f"{_num(f.get('latency_us'), '.1f')} us, "
                f"{_num(f.get('bandwidth_mbps'), '.1f')} Mbit/s"
            )
        rows.append(
            [
                r["id"],
                r["kernel"],
                p.get("placement", p.get("site", "-")),
                p.get("path", p.get("backend", "-")),
                ", ".join(r["meta"].get("hosts", [])),
                (r["meta"].get("mpi") or {}).get("flavour"),
                shown,
                _num(f.get("allocation_s"), ".2f"),
                _num(f.get("job_s"), ".2f"),
                r["status"],
            ]
        )
    return "<h3>Runs</h3>" + folded_table(
        [
            "run",
            "kernel",
            "placement / site",
            "path / backend",
            "hosts",
            "MPI",
            "result",
            "allocation s",
            "job s",
            "status",
        ],
        rows,
        [i for i, row in enumerate(rows) if row[-1] != "ok"],
        "grid runs (not ok above)",
    )


def render(records: list[dict]) -> str:
    parts = [
        sites_table(records),
        comparison_table(records),
        jobs_table(records),
        runs_table(records),
    ]
    return "\n".join(p for p in parts if p)
