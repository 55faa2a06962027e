"""The tune level's rows of the report's first screen (clustertune.summary): per cluster,
the newest session of each kind: tuned Linpack against the best DGEMM the search
measured, the QCD decomposition chosen, the TCP socket buffer against the link's payload."""

from __future__ import annotations

from ... import summary
from ..network.api import judge_bandwidth
from ..qcd import api as qcd


def host_default_text(d: dict) -> str:
    """The tuner's BLAS set beside the host's measured default (linpack/choice.py): the
    tuner judges the BLAS by its own runs, at its N."""
    host = d.get("host_blas") or {}
    if not host.get("directory"):
        return ""
    same = host["directory"] == d.get("blas_directory") and (
        (host.get("coretype") or "").lower() == (d.get("blas_coretype") or "").lower()
    )
    return "; BLAS = host default" if same else f"; host default BLAS {host['label']}"


def linpack_row(d: dict, cluster: str) -> summary.Row:
    # the configuration its figure was measured with (the HPL.dat's may differ: the scale
    # stage, the NB for the HPL.dat's N); sessions before config_confirmed have one
    c = d.get("config_confirmed") or d["config"]
    return summary.Row(
        f"tuned Linpack N={d['n_confirm']} {c['p']}x{c['q']} NB {c['nb']} ({cluster})",
        f"{d['gflops_confirm']:.1f} Gflop/s, "
        + (f"{d['blas_coretype']} core" if d.get("blas_coretype") else d["blas"]),
        f"best DGEMM {d['dgemm_gflops']:.1f} Gflop/s",
        ratio=d["gflops_confirm"] / d["dgemm_gflops"] if d.get("dgemm_gflops") else None,
        verdict=f"HPL.dat written, {len(d['runs'])} runs" + host_default_text(d),
        value=d["gflops_confirm"],
        unit="tuned Linpack",
        key=f"tune linpack {cluster}",
    )


def qcd_row(d: dict, cluster: str) -> summary.Row:
    grid = "x".join(map(str, d["grid"]))
    lattice = "x".join(map(str, d["lattice"]))
    # sessions before the tuner kept hb_link_updates_per_s hold gflops of ct-qcd's old
    # QCDFlops (5700 x every link update): shown as such, never compared with the new
    rate = qcd.gflops(d)
    return summary.Row(
        f"QCD decomposition, lattice {lattice} np {d['np']} ({cluster})",
        f"grid {grid}: {rate:.2f} QCDFlops G"
        if rate is not None
        else f"grid {grid} (its QCDFlops of the old definition, 5700 x all link updates)",
        f"{len(d['candidates'])} grids tried",
        verdict="chosen",
        value=rate,
        unit="tuned QCD",
        key=f"tune qcd {cluster} {lattice}",
    )


def tcp_row(d: dict, cluster: str) -> summary.Row:
    row = summary.Row(
        f"TCP socket buffer {'-'.join(d['pair'])} ({cluster})",
        f"{d['sockbuf'] or 'default'}: {d['mbps']:.0f} Mbit/s",
        verdict="chosen",
        value=d["mbps"],
        unit="TCP tuned",
        key=f"tune tcp {cluster}",
    )
    if d.get("rate_bps"):  # read as the network level reads a ping-pong: against the payload
        judge_bandwidth(row, d["mbps"], d["rate_bps"])
    return row


ROWS = {"linpack": linpack_row, "qcd": qcd_row, "tcp": tcp_row}


def rows(records: list[dict]) -> list[summary.Row]:
    newest: dict[tuple[str, str], dict] = {}
    for r in records:
        what = r["params"].get("what")
        if what in ROWS and r["status"] == "ok":
            newest[(what, r["meta"]["cluster"]["name"])] = r
    out = []
    for (what, cluster), r in newest.items():
        row = ROWS[what](r["detail"], cluster)
        row.run = r["id"]
        out.append(row)
    return out
