"""The report section of the network and message-passing levels, rendered from records."""

from __future__ import annotations

import re
from collections import defaultdict

import numpy as np

from ...ceiling import above_ceiling, slowest_link_bps, wire
from ...render import esc, fold, folded_table, table
from ...runner import ENV_KNOB_PREFIXES, STARVED_LOAD_PER_CPU
from ...units import format_rate
from . import analysis
from .diagnosis.overhead import (
    MPI_MAX_BANDWIDTH_LOSS_PCT,
    MPI_MAX_LATENCY_RATIO,
    overhead,
    overhead_out_of_line,
)

MAX_CURVES = 8  # per graph; the newest runs win


def _layer(record: dict) -> str:
    p = record["params"]
    wait = " poll" if p.get("wait") == "poll" else ""  # TCP busy-polling; older runs: block
    return p["layer"].upper() + wait + (f" {p['mpi']}" if p.get("mpi") else "")


# The TCP baseline waiting for data the way the upper layer does: the MPI libraries
# busy-poll (strace: MPICH/UCX epoll_wait(0), OpenMPI poll(0)), so a blocking-recv TCP
# baseline pays a wake-up per message that MPI never pays (docs/network.md).
LIKE_FOR_LIKE = {"mpi": "TCP poll"}
TCP_BASELINES = {"TCP": "TCP, blocking recv", "TCP poll": "TCP, busy-poll"}


def _rate(record: dict) -> str:
    rate = slowest_link_bps(record)
    return format_rate(rate) if rate else "unshaped"


def _rate_title(rate: int | None) -> str:
    return f"{format_rate(rate)} links" if rate else "unshaped links"


def _pair(record: dict) -> str:
    return "-".join(record["params"]["between"])


def _label(record: dict, *, layer=True, pair=True, rate=True) -> str:
    p = record["params"]
    parts = [_layer(record)] if layer else []
    if p["mode"] != "pingpong":
        parts.append(p["mode"])
    if pair:
        parts.append(f"{_pair(record)} ({record['meta']['cluster']['name']})")
    if rate:
        parts.append(_rate(record))
    if p.get("sockbuf"):
        parts.append(f"sockbuf {p['sockbuf']} B")
    if p.get("nagle"):
        parts.append("Nagle")
    return " ".join(parts)


def _latest(records: list[dict]) -> list[dict]:
    """The newest usable run of each kind (same label): the newest complete one when there
    is one, else the newest cut-short one (interrupted or incomplete) with points."""
    newest: dict[str, dict] = {}
    for r in records:  # records come oldest first
        if r["status"] == "failed" or len({s["size"] for s in r["samples"]}) < 2:
            continue
        kept = newest.get(_label(r))
        if r["status"] == "ok" or kept is None or kept["status"] != "ok":
            newest[_label(r)] = r
    return list(newest.values())


def _cut_short(record: dict) -> bool:
    return record["status"] in ("interrupted", "incomplete")


def _curve_label(record: dict, **parts: bool) -> str:
    """A curve's legend entry; a cut-short run says so (its sweep stopped early)."""
    label = _label(record, **parts)
    return (
        f"{label} [run {record['id']} {record['status']}: cut short]"
        if _cut_short(record)
        else label
    )


def _curve(record: dict) -> analysis.Curve:
    return analysis.curve_from_points(record["samples"])


def _num(value, spec: str) -> str:
    return "" if value is None else f"{value:{spec}}"


def _figure(figures: dict, key: str, spec: str) -> str:
    """A headline figure and the range of the values it is read from; "not determined"
    where the curve did not support it (null), blank where the run has no such figure."""
    if key not in figures:
        return ""
    value, spread = figures[key], figures.get(f"{key}_spread")
    if value is None:
        return "not determined"
    if not spread:  # stored before figures carried their spread
        return f"{value:{spec}}"
    return f"{value:{spec}} ({spread['min']:{spec}}–{spread['max']:{spec}})"


FIGURE_NAMES = {
    "latency_us": "latency",
    "bandwidth_mbps": "bandwidth",
    "saturation_point_bytes": "saturation point",
    "n_half_bytes": "n½",
    "preferred_block_range_bytes": "preferred block range",
}
_NUMBER = re.compile(r"\d+(?:\.\d+)?(?:e[-+]?\d+)?")


def _not_determined(records: list[dict]) -> str:
    """The runs' figures not determined, one line per cause (the same reason with other
    numbers is the same cause): which figures, of which runs, and the first run's words."""
    causes: dict[str, dict] = {}
    for r in records:
        for part in filter(None, (r["figures"].get("unavailable") or "").split("; ")):
            name, _, why = part.partition(" not determined: ")
            figure = FIGURE_NAMES.get(name, name) if why else "every figure"
            why = why or part
            cause = causes.setdefault(
                _NUMBER.sub("#", why), {"why": why, "figures": {}, "runs": {}}
            )
            cause["figures"][figure] = None
            cause["runs"][r["id"]] = None
    items = [
        f"<li><i>{esc(', '.join(c['figures']))}</i> of run(s) "
        f"{', '.join(map(str, c['runs']))}: {esc(c['why'])}"
        + (f" (run {next(iter(c['runs']))}'s numbers)" if len(c["runs"]) > 1 else "")
        + "</li>"
        for c in causes.values()
    ]
    return fold("Not determined: why", f"<ul>{''.join(items)}</ul>") if items else ""


def _listed(heading: str, by_reason: dict[tuple[str, str], list[str]]) -> str:
    """One line per (what, reason), naming all it holds for: not a line per run."""
    items = "".join(
        f"<li><b>{esc(what)} {esc(', '.join(found))}: {esc(why)}</b></li>"
        for (what, why), found in by_reason.items()
    )
    return f"<p>{esc(heading)}:</p><ul>{items}</ul>" if items else ""


def _pingpong_table(records: list[dict]) -> str:
    rows, above = [], defaultdict(list)  # (what, why) -> the runs above the ceiling
    for r in records:
        f = r["figures"]
        low, high = f.get("preferred_block_range_bytes") or (None, None)
        why = above_ceiling(r, f.get("bandwidth_mbps"))
        if why:
            above[("bandwidth of run(s)", why)].append(
                f"{r['id']} ({f['bandwidth_mbps']:.0f} Mbit/s)"
            )
        rows.append(
            [
                r["id"],
                r["meta"]["cluster"]["name"],
                _rate(r),
                wire(r),
                _layer(r),
                r["params"]["mode"],
                _pair(r),
                r["params"].get("sockbuf") or "",
                _figure(f, "latency_us", ".1f"),
                _figure(f, "bandwidth_mbps", ".1f")
                + (" (above the payload ceiling)" if why else ""),
                _figure(f, "saturation_point_bytes", ".0f"),
                _figure(f, "n_half_bytes", ".0f"),
                f"{low:.0f} .. {high:.0f}" if low is not None else "",
                len(f.get("dips") or []),
                r["status"],
            ]
        )
    newest = {
        (r["meta"]["cluster"]["name"], _layer(r), _pair(r), r["params"]["mode"]): i
        for i, r in enumerate(records)
    }
    table = folded_table(
        [
            "run",
            "cluster",
            "link",
            "wire",
            "layer",
            "mode",
            "pair",
            "sockbuf (B)",
            "latency (µs)",
            "bandwidth (Mbit/s)",
            "saturation point (B)",
            "n½ (B)",
            "preferred blocks (B)",
            "dips",
            "status",
        ],
        rows,
        [*newest.values(), *(i for i, r in enumerate(records) if r["status"] != "ok")],
        "ping-pong runs",
    )
    return (
        "<p>Each figure is followed by the range (min–max) of the values it is read from: "
        "the per-size latencies of the messages ≤ 64 B, the throughputs of the bandwidth "
        "region, the sizes at which the curve crosses the saturation threshold or half the "
        "bandwidth (docs/figures.md; the record also holds their median). "
        "<i>not determined</i>: the run's curve does not support the figure (why: below the "
        "table).</p>"
        + table
        + _listed("Above the link's TCP payload rate", above)
        + _not_determined(records)
    )


def _graphs(records: list[dict]) -> list[str]:
    """The curves of each link rate (and wire) on axes of their own, its nominal rate
    drawn: a 100 Mbit curve beside a 25 Gbit/s one is a flat line at the bottom."""
    from . import plots  # matplotlib only when a report is drawn

    latest = _latest(records)
    if not latest:
        return ["<p>No run has enough points to draw.</p>"]
    by_rate = defaultdict(list)  # and by wire: a tbf curve's bump would squash a paced one
    for r in latest:
        by_rate[(slowest_link_bps(r), wire(r))].append(r)
    parts = []
    for (rate, model), group in sorted(by_rate.items(), key=lambda i: (i[0][0] or 1e99, i[0][1])):
        group = group[-MAX_CURVES:]  # the newest runs win
        curves = {_curve_label(r, rate=False): _curve(r) for r in group}
        dashed = {_curve_label(r, rate=False) for r in group if _cut_short(r)}
        # Only runs whose time has a latency floor (not a stream's) have a saturation point.
        floored = {
            label: curves[label]
            for label, r in zip(curves, group, strict=True)
            if "latency_us" in r["figures"]
        }
        name = f"{_rate_title(rate)}, {model}"
        parts += [
            f"<h3>Throughput, signature and saturation graphs: {esc(name)}</h3>",
            plots.throughput_svg(curves, f"Throughput graph, {name}", rate, dashed),
            plots.signature_svg(curves, f"Signature graph, {name}", rate, dashed),
            plots.saturation_svg(floored, f"Saturation graph, {name}", rate, dashed)
            if floored
            else "",
        ]
    plain = [r for r in latest if not r["params"].get("sockbuf") and not r["params"].get("nagle")]
    by_pair = defaultdict(list)  # same pair, same network: the layers side by side
    for r in plain:
        by_pair[(r["meta"]["cluster"]["name"], _pair(r), _rate(r), r["params"]["mode"])].append(r)
    for (cluster, pair, rate, mode), group in sorted(by_pair.items()):
        if len({_layer(r) for r in group}) > 1:
            title = f"{' vs '.join(_layer(r) for r in group)} {mode}: {pair} on {cluster} ({rate})"
            curves = {_curve_label(r, pair=False, rate=False): _curve(r) for r in group}
            dashed = {_curve_label(r, pair=False, rate=False) for r in group if _cut_short(r)}
            parts.append(plots.throughput_svg(curves, title, slowest_link_bps(group[0]), dashed))
    return parts


# Environment prefixes that configure an MPI or PVM library (runner.ENV_KNOB_PREFIXES but
# clustertune's own CT_): runs that differ in them are different configurations.
LIBRARY_KNOB_PREFIXES = tuple(p for p in ENV_KNOB_PREFIXES if p != "CT_")


def _config(record: dict) -> str:
    """The layer, and for MPI and PVM the library settings the run had in its environment:
    a run with OpenMPI's socket buffers cut must not hide behind a default run's best."""
    if record["params"]["layer"] == "tcp":
        return _layer(record)
    env = record["meta"].get("env") or {}
    knobs = [f"{k}={v}" for k, v in sorted(env.items()) if k.startswith(LIBRARY_KNOB_PREFIXES)]
    return " ".join([_layer(record), *knobs])


def _group(record: dict) -> tuple[str, str, str]:
    return record["meta"]["cluster"]["name"], _pair(record), _rate(record)


def overhead_groups(records: list[dict]) -> dict[tuple, dict[str, list[dict]]]:
    """(cluster, pair, link) -> configuration -> its complete plain ping-pong runs."""
    runs = defaultdict(lambda: defaultdict(list))
    for r in records:
        p = r["params"]
        complete = r["status"] == "ok"  # a cut-off sweep has no trustworthy bandwidth
        if (
            p.get("command") == "pingpong"
            and complete
            and p["mode"] == "pingpong"
            and not p.get("sockbuf")
            and not p.get("nagle")
        ):
            runs[_group(r)][_config(r)].append(r)
    return runs


def _compare(uppers: list[dict], tcps: list[dict]) -> dict:
    """diagnosis.overhead of two sets of runs, bandwidth from sizes valid for all of them."""
    min_size = max(r["figures"].get("bandwidth_min_size_bytes", 0) for r in (*uppers, *tcps))
    return overhead([_curve(r) for r in uppers], [_curve(r) for r in tcps], min_size)


def _where(group: tuple, name: str) -> str:
    cluster, pair, rate = group
    return f"{name} on {pair} ({cluster}, {rate})"


def _flags(group: tuple, name: str, o: dict) -> list[str]:
    """MPI out of line with its like-for-like TCP baseline: one line per figure."""
    where = _where(group, name)
    (lu, lt), (bu, bt) = o["latency_floor_us"], o["bandwidth_mbps"]
    text = {
        "latency": f"latency {lu:.1f} vs {lt:.1f} µs (fastest small message), {lu / lt:.1f}× "
        f"(in line up to {MPI_MAX_LATENCY_RATIO:.0f}×; seeds/002 1.8×)",
        "bandwidth": f"bandwidth {bu:.1f} vs {bt:.1f} Mbit/s, {bu / bt:.2f}×, "
        f"{o['bandwidth_loss_pct']:.0f} % lost (in line up to "
        f"{MPI_MAX_BANDWIDTH_LOSS_PCT:.0f} %; seeds/002 8 %)",
    }
    return [
        f"{where}: MPI overhead out of line with TCP (busy-poll): {text[what]}"
        for what in overhead_out_of_line(o)
    ]


def overhead_check(uppers: list[dict], records: list[dict]) -> tuple[str, list[str]] | None:
    """``net pingpong``'s reading of the MPI run(s) just made (one configuration, one pair)
    against the like-for-like TCP runs stored for their pair and network, each side its
    best: a summary line and the flags. None when there is nothing to compare."""
    first = uppers[0]
    like = LIKE_FOR_LIKE.get(first["params"]["layer"])
    uppers = [r for r in uppers if r["status"] == "ok"]
    if not like or not uppers or first["params"]["mode"] != "pingpong":
        return None
    cluster, pair, _ = group = _group(first)
    tcps = overhead_groups(records).get(group, {}).get(like)
    if not tcps:
        a, b = first["params"]["between"]
        return (
            f"no {like} run on {pair} ({cluster}) to compare with: run net pingpong "
            f"--cluster {cluster} --between {a},{b} --layer tcp --wait poll",
            [],
        )
    try:
        o = _compare(uppers, tcps)
    except ValueError as exc:
        return f"not compared with {like}: {exc}", []
    flags = _flags(group, _config(first), o)
    runs = ", ".join(str(r["id"]) for r in uppers)
    floor_up, floor_tcp = o["latency_floor_us"]
    summary = (
        f"latency floor {floor_up / floor_tcp:.2f}× (figure {o['latency_ratio']:.2f}×), "
        f"bandwidth loss {o['bandwidth_loss_pct']:.1f} % "
        f"(best of run(s) {runs} / of {len(tcps)} {like} run(s))" + ("" if flags else ": in line")
    )
    return summary, flags


def starved(record: dict, load_per_cpu: float = STARVED_LOAD_PER_CPU) -> str | None:
    """The CLI's rule on a stored run: on hosts sharing this machine's CPUs, a load above
    ``load_per_cpu`` per CPU (runner.STARVED_LOAD_PER_CPU; at the run's start or end)
    starves busy-polling MPI ranks, so its overhead is not judged; None when it can be (or
    the record, made before records carried the load, cannot say). Hosts share the
    machine's CPUs when they are virtual (an emulated wire) or this host alone (the local
    launcher)."""
    meta, cluster = record["meta"], record["meta"]["cluster"]
    load, cpus = meta.get("load") or {}, (meta.get("cpus") or {}).get("online")
    peak = max((x[0] for x in (load.get("start"), load.get("end")) if x), default=None)
    if peak is None or not cpus or peak <= load_per_cpu * cpus:
        return None
    if cluster.get("wire") is None and cluster.get("launcher") != "local":
        return None
    return (
        f"not judged: run {record['id']} had load {peak:.1f} on the {cpus} CPUs its hosts "
        f"share (above {load_per_cpu:g} per CPU a busy-polling MPI is starved)"
    )


def _overhead(records: list[dict]) -> str:
    """MPI (and PVM) over TCP on the same pair and network: seeds/002's table, and the
    flags of MPI out of line with its like-for-like baseline."""
    rows, flags = [], []
    for group, layers in sorted(overhead_groups(records).items()):
        cluster, pair, rate = group
        for name, uppers in sorted(layers.items()):
            if name in TCP_BASELINES:
                continue
            like = LIKE_FOR_LIKE.get(uppers[0]["params"]["layer"])
            for tcp_name, tcp_label in TCP_BASELINES.items():
                tcps = layers.get(tcp_name)
                if not tcps:
                    continue
                label = tcp_label + (" (like for like)" if tcp_name == like else "")
                try:
                    o = _compare(uppers, tcps)
                except ValueError as exc:
                    rows.append([cluster, rate, pair, name, label, "", "", "", str(exc)])
                    continue
                (lu, ll), (bu, bl) = o["latency_runs"], o["bandwidth_runs"]
                if tcp_name == like:
                    found = _flags(group, name, o)
                    why = starved(uppers[lu]) or starved(uppers[bu])
                    flags += [f"{_where(group, name)}: {why}"] if found and why else found
                floor_up, floor_tcp = o["latency_floor_us"]
                used = f"runs {uppers[lu]['id']} / {tcps[ll]['id']}"
                if (lu, ll) != (bu, bl):
                    bandwidth_runs = f"runs {uppers[bu]['id']} / {tcps[bl]['id']}"
                    used = f"latency: {used}; bandwidth: {bandwidth_runs}"
                rows.append(
                    [
                        cluster,
                        rate,
                        pair,
                        name,
                        label,
                        f"{o['bandwidth_loss_pct']:.1f}",
                        f"{o['latency_ratio']:.2f}",
                        f"{floor_up / floor_tcp:.2f}",
                        f"{used} (of {len(uppers)} / {len(tcps)})",
                    ]
                )
    if not rows:
        return ""
    items = "".join(f"<li><b>{esc(f)}</b></li>" for f in flags)
    return (
        "<h3>Message-passing overhead over TCP</h3><p>Same host pair and network; "
        "seeds/002 measured 8 % / 1.8× for MPI and 16 % / 2.0× for PVM. Two TCP baselines "
        "when both were run: the kernel sleeping in a blocking recv (NetPIPE's way, "
        "<code>--wait block</code>) and busy-polling (<code>--wait poll</code>). The MPI "
        "libraries busy-poll, so their like-for-like baseline is the busy-polling one; "
        "against the blocking one MPI saves the wake-up of every message and can come out "
        "below 1×. <b>Both sides are their best run</b> on the pair, figure by figure: the "
        "lowest latency and the highest bandwidth among the complete runs of that layer "
        "(a run whose ends the scheduler put on one core pays a tick per message, and the "
        "same statistic on both sides keeps the ratio fair). Runs with other MPI settings "
        "in their environment (<code>OMPI_MCA_*</code>, <code>UCX_*</code>, ...) are a "
        "layer of their own. <i>from</i> names the runs read, upper / TCP, out of how "
        f"many. MPI is flagged against its like-for-like baseline above "
        f"{MPI_MAX_LATENCY_RATIO:.0f}× the latency or "
        f"{MPI_MAX_BANDWIDTH_LOSS_PCT:.0f} % bandwidth lost, latency read on "
        "each side's fastest small message (docs/network.md), and <i>not judged</i> as "
        "<code>net pingpong</code> does where the run read was made at a load above "
        "the limit per CPU on hosts sharing the machine's CPUs (healthy MPICH lost 58-71 % "
        "at load 15-29). Records made before they carried the load cannot be checked: "
        "there a flag can be that machine's load.</p>"
        + (f"<p>Out of line:</p><ul>{items}</ul>" if items else "")
        + table(
            [
                "cluster",
                "link",
                "pair",
                "layer",
                "TCP baseline",
                "bandwidth loss (%)",
                "latency ratio",
                "fastest small message ratio",
                "from",
            ],
            rows,
        )
    )


def _sockbuf(records: list[dict]) -> str:
    rows = [
        [
            r["id"],
            r["meta"]["cluster"]["name"],
            _rate(r),
            _pair(r),
            r["params"]["sockbuf"],
            (r["detail"] or {}).get("sockbuf_effective_snd", ""),
            _num(r["figures"].get("bandwidth_mbps"), ".1f"),
            _num(r["figures"].get("latency_us"), ".1f"),
        ]
        for r in records
        if r["params"].get("sockbuf")
    ]
    if not rows:
        return ""
    return "<h3>Socket buffer size</h3>" + table(
        [
            "run",
            "cluster",
            "link",
            "pair",
            "requested (B)",
            "effective SO_SNDBUF (B)",
            "bandwidth (Mbit/s)",
            "latency (µs)",
        ],
        rows,
    )


def _pair_nominal_bps(record: dict, hosts: list[str]) -> np.ndarray | None:
    """Host x host: the nominal rate of each pair (its slower host's link); None when a
    host's link is unshaped or unknown."""
    links = record["meta"]["cluster"].get("link_bps", {})
    rates = [links.get(h) for h in hosts]
    if not all(rates):
        return None
    return np.minimum.outer(np.array(rates, dtype=float), np.array(rates, dtype=float))


def _matrices(records: list[dict]) -> list[str]:
    from . import plots

    newest: dict[tuple, dict] = {}
    for r in records:
        newest[(r["meta"]["cluster"]["name"], _layer(r))] = r
    parts = []
    for (cluster, layer), r in sorted(newest.items()):
        f = r["figures"]
        parts.append(
            f"<h3>All pairs: {esc(layer)} on {esc(cluster)} (run {r['id']}, "
            f"{f.get('size_bytes')} B messages, {esc(wire(r))}, {esc(r['status'])})</h3>"
        )
        hosts = f.get("hosts")
        if not hosts or f.get("bandwidth_mbps") is None:
            parts.append(f"<p>No matrix: {esc(r['error'])}</p>")
            continue
        nominal = _pair_nominal_bps(r, hosts)
        above = defaultdict(list)
        for key, title, unit in (
            ("bandwidth_mbps", "Bandwidth per pair", "Mbit/s"),
            ("latency_us", "Latency per pair", "µs"),
            ("retransmissions", "TCP retransmissions per pair", "segments"),
            ("one_way_mbps", "One-way stream, row host sending to column host", "Mbit/s"),
        ):
            if f.get(key) is None:  # MPI matrices and older runs have no retransmissions
                continue
            m = np.array([[np.nan if v is None else v for v in row] for row in f[key]])
            title = f"{title} ({layer}, {cluster})"
            if unit == "Mbit/s" and nominal is not None:
                # coloured as a share of the pair's nominal rate, 0 to 1: a healthy
                # cluster is one colour, a slow pair stands out whatever the spread
                share = m * analysis.MBIT / nominal
                parts.append(
                    plots.heatmap_svg(
                        m,
                        hosts,
                        title,
                        unit,
                        colour=share,
                        scale=(0.0, 1.0),
                        colour_label="share of the nominal rate",
                    )
                )
                # a pair's figure is in both its cells; a one-way stream's cells differ
                listed = np.isfinite(m) & (key == "one_way_mbps" or np.triu(np.ones_like(m)) > 0)
                for i, j in zip(*np.nonzero(listed), strict=True):
                    why = above_ceiling(r, m[i, j], int(nominal[i, j]))
                    if why:
                        above[(f"{title} in Mbit/s:", why)].append(
                            f"{hosts[i]}-{hosts[j]} {m[i, j]:.0f}"
                        )
            else:  # absolute, from 0: a 0.1 µs spread is not painted as a fault
                parts.append(plots.heatmap_svg(m, hosts, title, unit, scale=(0.0, None)))
        parts.append(_listed("Above the pair's TCP payload ceiling", above))
        flagged = f.get("flagged") or []
        items = [f"<li><b>{esc(x['reason'])}</b></li>" for x in flagged] or [
            "<li>Every link is in line with the others: nothing to blame.</li>"
        ]
        notes = "".join(f"<li>{esc(n)}</li>" for n in f.get("notes") or [])
        parts.append(
            f"<p>Diagnosis (suspects re-tested before blaming):</p><ul>{''.join(items)}</ul>"
            + (fold("Notes of the diagnosis", f"<ul>{notes}</ul>") if notes else "")
        )
    return parts


def _wires(records: list[dict]) -> str:
    """The wire of each cluster the runs were made on (a name rebuilt with another wire
    lists both)."""
    wires: dict[str, dict[str, None]] = defaultdict(dict)
    for r in records:
        wires[r["meta"]["cluster"]["name"]][wire(r)] = None
    listed = "; ".join(f"{esc(c)}: {esc(', '.join(w))}" for c, w in sorted(wires.items()))
    return (
        f"<p>Wires: {listed}. A <i>paced wire</i> holds every frame its time on the wire, so "
        "no figure can exceed the link's TCP payload rate (1448/1538 of nominal); a "
        "<i>tbf wire</i> is a rate only: mid-size messages pass its bucket faster.</p>"
    )


def render(records: list[dict]) -> str:
    sweeps = [r for r in records if r["params"].get("command") == "pingpong"]
    matrices = [r for r in records if r["params"].get("command") == "matrix"]
    parts = [_wires(sweeps + matrices)] if sweeps or matrices else []
    if sweeps:
        parts += [
            "<p>Figures as defined in docs/figures.md; bandwidth on a tbf wire only from "
            "messages many tbf buckets long, on a paced wire from every size "
            "(docs/network.md).</p>",
            _pingpong_table(sweeps),
            *_graphs(sweeps),
            _overhead(sweeps),
            _sockbuf(sweeps),
        ]
    parts += _matrices(matrices)
    return "\n".join(p for p in parts if p)
