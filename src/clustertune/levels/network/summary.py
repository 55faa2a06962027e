"""The network level's rows of the report's first screen (clustertune.summary): the newest
plain ping-pong of each layer against the link's nominal rate and payload ceiling, with the
dips of its curve (the shape NetPIPE's signature graph shows), and the all-pairs matrix's
diagnosis (every link in line, or the culprit with its evidence)."""

from __future__ import annotations

from statistics import median

from ... import summary
from ...ceiling import slowest_link_bps
from ...runner import mid_size_not_judged
from ...units import above_payload_ceiling, format_rate, payload_rate_bps

# Bandwidth is judged against the most TCP payload the link's frames carry
# (units.payload_rate_bps, 941 Mbit/s on 1 Gbit/s): below 90 % of it a link loses more
# than a loaded 2-core host's timing explains; above it (units.above_payload_ceiling, the
# rule the sections use) the link carried more than it can: a shaper's burst, not a rate.
IN_LINE_SHARE = 0.9


def judge_bandwidth(row: summary.Row, mbps: float, nominal_bps: float, what: str = "") -> None:
    """The row's reference (``what`` names the link when it is not the hosts' own), ratio
    (against the nominal rate) and verdict for a bandwidth measured over ``nominal_bps``."""
    ceiling = payload_rate_bps(nominal_bps)
    row.reference = f"{what} {format_rate(nominal_bps)} (payload {ceiling / 1e6:.0f})".lstrip()
    row.ratio = mbps * 1e6 / nominal_bps
    if above_payload_ceiling(mbps, nominal_bps):
        row.verdict, row.state = "above payload ceiling", summary.WARN
    elif mbps * 1e6 >= IN_LINE_SHARE * ceiling:
        row.verdict, row.state = "in line", summary.GOOD
    else:
        row.verdict, row.state = f"below {IN_LINE_SHARE:.0%} of payload", summary.WARN


def layer(record: dict) -> str:
    p = record["params"]
    return p["layer"].upper() + (f" {p['mpi']}" if p.get("mpi") else "")


def plain_pingpongs(records: list[dict]) -> dict[tuple[str, str, str], dict]:
    """(cluster, layer, pair) -> its newest complete plain ping-pong (no socket buffer or
    Nagle experiment and no tuner's trial, which measure a setting rather than the link)."""
    newest = {}
    for r in records:
        p = r["params"]
        if (
            p.get("command") == "pingpong"
            and p.get("mode") == "pingpong"
            and r["status"] == "ok"
            and not p.get("sockbuf")
            and not p.get("nagle")
            and not p.get("tune")
        ):
            newest[(r["meta"]["cluster"]["name"], layer(r), "-".join(p["between"]))] = r
    return newest


def pingpong_row(cluster: str, name: str, pair: str, r: dict) -> summary.Row:
    f = r["figures"]
    bandwidth, latency = f.get("bandwidth_mbps"), f.get("latency_us")
    shown = [
        f"{bandwidth:.0f} Mbit/s" if bandwidth else "bandwidth not determined",
        f"{latency:.1f} µs" if latency else "latency not determined",
    ]
    row = summary.Row(
        f"{name} ping-pong {pair} ({cluster})",
        ", ".join(shown),
        run=r["id"],
        value=bandwidth,
        unit=f"{name} bandwidth",
        key=f"pp {cluster} {name} {pair}",
    )
    nominal = slowest_link_bps(r)
    if nominal is None:
        row.reference, row.verdict, row.state = "unshaped: no nominal rate", "", summary.NONE
    elif bandwidth is None:
        row.reference, row.verdict, row.state = f"{format_rate(nominal)} nominal", "", summary.WARN
    else:
        judge_bandwidth(row, bandwidth, nominal)
    if dips := f.get("dips"):  # the curve's shape: seeds/002's faulty-NIC signature
        if why := mid_size_not_judged(r):  # mid-size shape is the bucket's, not the link's
            row.verdict = ", ".join(filter(None, [row.verdict, f"dips not judged ({why})"]))
        else:
            row.verdict = ", ".join(filter(None, [row.verdict, f"{len(dips)} dip(s) in the curve"]))
            row.state = summary.BAD if row.state == summary.BAD else summary.WARN
    return row


def culprit(flag: dict) -> str:
    if flag.get("host"):
        return str(flag["host"])
    if flag.get("pair"):
        return "-".join(map(str, flag["pair"]))
    return str(flag.get("reason", "?")).split(":")[0]


def diagnosis_row(r: dict) -> summary.Row:
    f = r["figures"]
    cluster, hosts = r["meta"]["cluster"]["name"], f.get("hosts") or []
    row = summary.Row(f"all-pairs diagnosis ({cluster})", "", run=r["id"])
    matrix = f.get("bandwidth_mbps")
    if not hosts or matrix is None:
        row.figure = "no matrix: " + (r["error"] or r["status"]).splitlines()[0]
        row.verdict, row.state = r["status"], summary.BAD
        return row
    links = [v for line in matrix for v in line if v is not None]
    row.reference = f"median link {median(links):.0f} Mbit/s" if links else ""
    flagged = f.get("flagged") or []
    if not flagged:
        row.figure, row.verdict = f"{len(hosts)} hosts, every link in line", "healthy"
        return row
    # the culprit and the evidence that blamed it; the other flags are in the section
    more = f" (+{len(flagged) - 1} more)" if len(flagged) > 1 else ""
    row.figure = str(flagged[0].get("reason", "")) + more
    row.verdict = "culprit: " + ", ".join(dict.fromkeys(culprit(x) for x in flagged))
    row.state = summary.BAD
    return row


def rows(records: list[dict]) -> list[summary.Row]:
    out = [
        pingpong_row(c, name, pair, r) for (c, name, pair), r in plain_pingpongs(records).items()
    ]
    matrices: dict[str, dict] = {}
    for r in records:
        if r["params"].get("command") == "matrix":
            matrices[r["meta"]["cluster"]["name"]] = r  # the newest per cluster
    return out + [diagnosis_row(r) for r in matrices.values()]
