"""The report section of the network and message-passing levels, rendered from records."""

from __future__ import annotations

from collections import defaultdict

from ... import render as html
from ...runner import ENV_KNOB_PREFIXES
from ...units import format_rate
from . import LEVEL, analysis

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
    """Nominal rate of the slowest link of the run's hosts."""
    links = record["meta"]["cluster"].get("link_bps", {})
    rates = [links.get(h) for h in record["meta"]["hosts"] if links.get(h)]
    return format_rate(min(rates)) if rates else "unshaped"


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
    """The newest usable run of each kind (same label): ok, or incomplete with points."""
    newest: dict[str, dict] = {}
    for r in records:
        if r["status"] == "failed" or len({s["size"] for s in r["samples"]}) < 2:
            continue
        newest[_label(r)] = r  # records come oldest first
    return list(newest.values())


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


def _pingpong_table(records: list[dict]) -> str:
    rows = []
    for r in records:
        f = r["figures"]
        low, high = f.get("preferred_block_range_bytes") or (None, None)
        rows.append(
            [r["id"], r["meta"]["cluster"]["name"], _rate(r), _layer(r), r["params"]["mode"],
             _pair(r), r["params"].get("sockbuf") or "", _figure(f, "latency_us", ".1f"),
             _figure(f, "bandwidth_mbps", ".1f"), _figure(f, "saturation_point_bytes", ".0f"),
             _figure(f, "n_half_bytes", ".0f"),
             f"{low:.0f} .. {high:.0f}" if low is not None else "",
             len(f.get("dips") or []), r["status"]]
        )  # fmt: skip
    notes = [
        f"<li>run {r['id']}: {html.esc(r['figures']['unavailable'])}</li>"
        for r in records
        if r["figures"].get("unavailable")
    ]
    table = html.table(
        ["run", "cluster", "link", "layer", "mode", "pair", "sockbuf (B)", "latency (µs)",
         "bandwidth (Mbit/s)", "saturation point (B)", "n½ (B)", "preferred blocks (B)",
         "dips", "status"],
        rows,
    )  # fmt: skip
    return (
        "<p>Each figure is followed by the range (min–max) of the values it is read from: "
        "the per-size latencies of the messages ≤ 64 B, the throughputs of the bandwidth "
        "region, the sizes at which the curve crosses the saturation threshold or half the "
        "bandwidth (docs/figures.md; the record also holds their median). "
        "<i>not determined</i>: the run's curve does not support the figure (why: below the "
        "table).</p>"
        + table
        + (f"<p>Not determined:</p><ul>{''.join(notes)}</ul>" if notes else "")
    )


def _graphs(records: list[dict]) -> list[str]:
    from . import plots  # matplotlib only when a report is drawn

    latest = _latest(records)[-MAX_CURVES:]
    if not latest:
        return ["<p>No run has enough points to draw.</p>"]
    curves = {_label(r): _curve(r) for r in latest}
    # Only runs whose time has a latency floor (not a stream's) have a saturation point.
    floored = {_label(r): curves[_label(r)] for r in latest if "latency_us" in r["figures"]}
    parts = [
        "<h3>Throughput, signature and saturation graphs</h3>",
        plots.throughput_svg(curves),
        plots.signature_svg(curves),
        plots.saturation_svg(floored) if floored else "",
    ]
    plain = [r for r in latest if not r["params"].get("sockbuf") and not r["params"].get("nagle")]
    by_pair = defaultdict(list)  # same pair, same network: the layers side by side
    by_layer = defaultdict(list)  # same layer: the networks side by side
    for r in plain:
        by_pair[(r["meta"]["cluster"]["name"], _pair(r), _rate(r), r["params"]["mode"])].append(r)
        by_layer[(_layer(r), r["params"]["mode"])].append(r)
    for (cluster, pair, rate, mode), group in sorted(by_pair.items()):
        if len({_layer(r) for r in group}) > 1:
            title = f"{' vs '.join(_layer(r) for r in group)} {mode}: {pair} on {cluster} ({rate})"
            curves = {_label(r, pair=False, rate=False): _curve(r) for r in group}
            parts.append(plots.throughput_svg(curves, title=title))
    for (layer, mode), group in sorted(by_layer.items()):
        if len({_rate(r) for r in group}) > 1:
            title = f"{layer} {mode}: {' vs '.join(sorted({_rate(r) for r in group}))}"
            curves = {_label(r, layer=False): _curve(r) for r in group}
            parts.append(plots.throughput_svg(curves, title=title))
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
        if (p.get("command") == "pingpong" and complete and p["mode"] == "pingpong"
                and not p.get("sockbuf") and not p.get("nagle")):  # fmt: skip
            runs[_group(r)][_config(r)].append(r)
    return runs


def _compare(uppers: list[dict], tcps: list[dict]) -> dict:
    """analysis.overhead of two sets of runs, bandwidth from sizes valid for all of them."""
    min_size = max(r["figures"].get("bandwidth_min_size_bytes", 0) for r in (*uppers, *tcps))
    return analysis.overhead([_curve(r) for r in uppers], [_curve(r) for r in tcps], min_size)


def _flags(group: tuple, name: str, o: dict) -> list[str]:
    """MPI out of line with its like-for-like TCP baseline: one line per figure."""
    cluster, pair, rate = group
    where = f"{name} on {pair} ({cluster}, {rate})"
    (lu, lt), (bu, bt) = o["latency_floor_us"], o["bandwidth_mbps"]
    text = {
        "latency": f"latency {lu:.1f} vs {lt:.1f} µs (fastest small message), {lu / lt:.1f}× "
        f"(in line up to {analysis.MPI_MAX_LATENCY_RATIO:.0f}×; seeds/002 1.8×)",
        "bandwidth": f"bandwidth {bu:.1f} vs {bt:.1f} Mbit/s, {bu / bt:.2f}×, "
        f"{o['bandwidth_loss_pct']:.0f} % lost (in line up to "
        f"{analysis.MPI_MAX_BANDWIDTH_LOSS_PCT:.0f} %; seeds/002 8 %)",
    }
    return [
        f"{where}: MPI overhead out of line with TCP (busy-poll): {text[what]}"
        for what in analysis.overhead_out_of_line(o)
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
                if tcp_name == like:
                    flags += _flags(group, name, o)
                floor_up, floor_tcp = o["latency_floor_us"]
                (lu, ll), (bu, bl) = o["latency_runs"], o["bandwidth_runs"]
                used = f"runs {uppers[lu]['id']} / {tcps[ll]['id']}"
                if (lu, ll) != (bu, bl):
                    bandwidth_runs = f"runs {uppers[bu]['id']} / {tcps[bl]['id']}"
                    used = f"latency: {used}; bandwidth: {bandwidth_runs}"
                rows.append(
                    [cluster, rate, pair, name, label, f"{o['bandwidth_loss_pct']:.1f}",
                     f"{o['latency_ratio']:.2f}", f"{floor_up / floor_tcp:.2f}",
                     f"{used} (of {len(uppers)} / {len(tcps)})"]
                )  # fmt: skip
    if not rows:
        return ""
    items = "".join(f"<li><b>{html.esc(f)}</b></li>" for f in flags)
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
        f"{analysis.MPI_MAX_LATENCY_RATIO:.0f}× the latency or "
        f"{analysis.MPI_MAX_BANDWIDTH_LOSS_PCT:.0f} % bandwidth lost, latency read on "
        "each side's fastest small message (docs/network.md). Records carry no load "
        "figure: on a virtual cluster, whose ranks share one machine's CPUs, a flag can be "
        "that machine's load (healthy MPICH lost 58-71 % at load 15-29; "
        "<code>net pingpong</code> withholds its flags there): run again on a quiet one.</p>"
        + (f"<p>Out of line:</p><ul>{items}</ul>" if items else "")
        + html.table(
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
        )  # fmt: skip
    )


def _sockbuf(records: list[dict]) -> str:
    rows = [
        [r["id"], r["meta"]["cluster"]["name"], _rate(r), _pair(r), r["params"]["sockbuf"],
         (r["detail"] or {}).get("sockbuf_effective_snd", ""),
         _num(r["figures"].get("bandwidth_mbps"), ".1f"), _num(r["figures"].get("latency_us"), ".1f")]
        for r in records if r["params"].get("sockbuf")
    ]  # fmt: skip
    if not rows:
        return ""
    return "<h3>Socket buffer size</h3>" + html.table(
        ["run", "cluster", "link", "pair", "requested (B)", "effective SO_SNDBUF (B)",
         "bandwidth (Mbit/s)", "latency (µs)"],
        rows,
    )  # fmt: skip


def _matrices(records: list[dict]) -> list[str]:
    from . import plots

    newest: dict[tuple, dict] = {}
    for r in records:
        newest[(r["meta"]["cluster"]["name"], _layer(r))] = r
    parts = []
    for (cluster, layer), r in sorted(newest.items()):
        f = r["figures"]
        parts.append(
            f"<h3>All pairs: {html.esc(layer)} on {html.esc(cluster)} (run {r['id']}, "
            f"{f.get('size_bytes')} B messages, {html.esc(r['status'])})</h3>"
        )
        hosts = f.get("hosts")
        if not hosts or f.get("bandwidth_mbps") is None:
            parts.append(f"<p>No matrix: {html.esc(r['error'])}</p>")
            continue
        for key, title, unit in (
            ("bandwidth_mbps", "Bandwidth per pair", "Mbit/s"),
            ("latency_us", "Latency per pair", "µs"),
            ("retransmissions", "TCP retransmissions per pair", "segments"),
            ("one_way_mbps", "One-way stream, row host sending to column host", "Mbit/s"),
        ):
            if f.get(key) is None:  # MPI matrices and older runs have no retransmissions
                continue
            m = [[float("nan") if v is None else v for v in row] for row in f[key]]
            parts.append(plots.heatmap_svg(m, hosts, f"{title} ({layer}, {cluster})", unit))
        flagged = f.get("flagged") or []
        items = [f"<li><b>{html.esc(x['reason'])}</b></li>" for x in flagged] or [
            "<li>Every link is in line with the others: nothing to blame.</li>"
        ]
        items += [f"<li>{html.esc(n)}</li>" for n in f.get("notes") or []]
        parts.append(
            f"<p>Diagnosis (suspects re-tested before blaming):</p><ul>{''.join(items)}</ul>"
        )
    return parts


@LEVEL.section
def render(records: list[dict]) -> str:
    sweeps = [r for r in records if r["params"].get("command") == "pingpong"]
    matrices = [r for r in records if r["params"].get("command") == "matrix"]
    parts = []
    if sweeps:
        parts += [
            "<p>Figures as defined in docs/figures.md; bandwidth on a shaped virtual cluster "
            "only from messages many tbf buckets long (docs/network.md).</p>",
            _pingpong_table(sweeps),
            *_graphs(sweeps),
            _overhead(sweeps),
            _sockbuf(sweeps),
        ]
    parts += _matrices(matrices)
    return "\n".join(p for p in parts if p)
