"""``net matrix``'s output: the record's figures as JSON and as text grids."""

from __future__ import annotations

from collections.abc import Callable


def matrix_json(record: dict) -> dict:
    f = record["figures"]
    return {
        "run_id": record["id"],
        "status": record["status"],
        "error": record["error"],
        "cluster": record["meta"]["cluster"]["name"],
        "layer": record["params"]["layer"],
        "mpi": record["params"]["mpi"],
        "size_bytes": f.get("size_bytes"),
        "hosts": f.get("hosts", record["params"]["hosts"]),
        "latency_us": f.get("latency_us"),
        "bandwidth_mbps": f.get("bandwidth_mbps"),
        "retransmissions": f.get("retransmissions"),
        "one_way_mbps": f.get("one_way_mbps"),
        "flagged": f.get("flagged", []),
        "not_judged": f.get("not_judged"),
        "wire_late_us": f.get("wire_late_us"),
        "notes": f.get("notes", []),
    }


def _grid(
    hosts: list[str], m: list[list[float | None]] | None, fmt: Callable[[float], str]
) -> list[str]:
    if m is None:
        return ["  (not measured)"]
    width = max(8, *(len(h) for h in hosts))
    lines = ["  " + " " * width + "".join(f"{h:>{width + 1}}" for h in hosts)]
    for h, row in zip(hosts, m, strict=True):
        cells = "".join(f"{'-' if v is None else fmt(v):>{width + 1}}" for v in row)
        lines.append(f"  {h:<{width}}{cells}")
    return lines


def matrix_text(record: dict) -> str:
    j = matrix_json(record)
    layer = j["layer"] + (f" ({j['mpi']})" if j["mpi"] else "")
    lines = [f"run {j['run_id']}: {layer} matrix on {j['cluster']} -> {j['status']}"]
    lines += ["  bandwidth (Mbit/s)", *_grid(j["hosts"], j["bandwidth_mbps"], lambda v: f"{v:.1f}")]
    lines += ["  latency (µs)", *_grid(j["hosts"], j["latency_us"], lambda v: f"{v:.1f}")]
    if j["retransmissions"] is not None:
        lines += ["  TCP retransmissions", *_grid(j["hosts"], j["retransmissions"], str)]
    if j["one_way_mbps"] is not None:
        lines += [
            "  one-way stream (Mbit/s, row host sending to column host)",
            *_grid(j["hosts"], j["one_way_mbps"], lambda v: f"{v:.1f}"),
        ]
    if j["not_judged"]:
        lines.append(f"  {j['not_judged']}")
    if j["flagged"]:
        lines += ["  flagged:"] + [f"    {f['reason']}" for f in j["flagged"]]
    elif not j["not_judged"]:
        lines.append("  flagged: nothing")
    lines += [f"  note: {n}" for n in j["notes"]]
    if record["error"]:
        lines.append(f"  error: {record['error']}")
    return "\n".join(lines)
