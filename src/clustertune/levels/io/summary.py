"""The I/O level's rows of the report's first screen (clustertune.summary): per cluster,
the newest local run's collective netCDF write at its largest size against raw MPI-IO of
the same bytes in the format's byte order, and the newest remote run's throughput as a
share of the nominal inter-site link (target 80 %, docs/io.md)."""

from __future__ import annotations

from ... import summary
from ...units import above_payload_ceiling, format_rate
from . import netcdf

LINK_SHARE_TARGET = 0.8


def largest(results: list[dict], variant: str, op: str) -> dict | None:
    """The valid collective result of ``variant`` and ``op`` at the largest size."""
    found = [
        x
        for x in results
        if x["valid"] and x["variant"] == variant and x["op"] == op and x["mode"] == "collective"
    ]
    return max(found, key=lambda x: (x["size"], x["np"])) if found else None


def checks_passed(record: dict) -> bool:
    files = record["figures"].get("files") or {}
    return record["status"] == "ok" and all(all(c.values()) for c in files.values())


def base_row(record: dict, what: str) -> summary.Row:
    cluster = record["meta"]["cluster"]["name"]
    return summary.Row(
        f"{what} ({cluster})",
        "no valid collective write",
        run=record["id"],
        unit=f"{what} write",
        verdict=record["status"],
        state=summary.BAD,
    )


def comparable_key(record: dict, what: str, result: dict) -> str:
    """What makes two runs' rows comparable (the change column): the same cluster, what
    was written, and the size, ranks and mode of the result read (a run's largest size
    may differ from the previous run's)."""
    cluster = record["meta"]["cluster"]["name"]
    return f"io {what} {cluster} {result['size']}^3 np {result['np']} {result['mode']}"


def local_row(record: dict) -> summary.Row:
    row = base_row(record, "netCDF local")
    results = netcdf.results(record)
    ours = largest(results, "netcdf", "write")
    if ours is None:
        return row
    raw = next(
        (
            x
            for x in results
            if x["valid"]
            and x["variant"] == "rawswap"
            and x["op"] == "write"
            and x["mode"] == "collective"
            and x["size"] == ours["size"]
            and x["np"] == ours["np"]
        ),
        None,
    )
    row.measure = (
        f"netCDF write {ours['size']}^3 np {ours['np']} ({record['meta']['cluster']['name']})"
    )
    row.figure, row.value = f"{ours['mbps']:.0f} MB/s", ours["mbps"]
    row.key = comparable_key(record, "netCDF local", ours)
    if raw:
        row.reference, row.ratio = f"raw MPI-IO {raw['mbps']:.0f} MB/s", ours["mbps"] / raw["mbps"]
    else:
        row.reference = "no raw MPI-IO run of the same bytes"
    ok = checks_passed(record)
    row.verdict = "files valid" if ok else "file check FAILED"
    row.state = summary.GOOD if ok else summary.BAD
    return row


def remote_row(record: dict) -> summary.Row:
    row = base_row(record, f"remote netCDF to {record['params']['remote']}")
    results = netcdf.results(record)
    write, read = largest(results, "netcdf", "write"), largest(results, "netcdf", "read")
    wan = record["figures"].get("wan_bps")
    if write is None:
        return row
    size = write["size"]
    shares = record["figures"].get("link_share", {}).get(str(size), {})
    row.measure = f"remote write {size}^3 to {record['params']['remote']} ({record['meta']['cluster']['name']})"
    row.figure, row.value = f"{write['mbps']:.0f} MB/s", write["mbps"]
    row.key = comparable_key(record, f"remote netCDF to {record['params']['remote']}", write)
    if read is not None and read["size"] == size:
        row.figure += f", read {read['mbps']:.0f} MB/s"
    if wan and shares.get("write") is not None:
        row.reference, row.ratio = f"{format_rate(wan)} link", shares["write"]
        in_line = row.ratio >= LINK_SHARE_TARGET and checks_passed(record)
        if above_payload_ceiling(row.ratio * wan / 1e6, wan):  # the sections' rule
            row.verdict, row.state = "above payload ceiling", summary.WARN
        else:
            row.verdict = ("at least" if in_line else "below") + f" {LINK_SHARE_TARGET:.0%} of link"
            row.state = summary.GOOD if in_line else summary.WARN
    else:
        row.reference, row.verdict, row.state = "no nominal link", "", summary.NONE
    if not checks_passed(record):
        row.verdict, row.state = "file check FAILED", summary.BAD
    return row


def rows(records: list[dict]) -> list[summary.Row]:
    newest: dict[tuple, dict] = {}
    for r in records:
        newest[(r["meta"]["cluster"]["name"], bool(r["params"].get("remote")))] = r
    return [remote_row(r) if remote else local_row(r) for (_, remote), r in sorted(newest.items())]
