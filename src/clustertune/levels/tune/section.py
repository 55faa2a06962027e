"""The report section of ``tune``: per session, its choices one line each."""

from __future__ import annotations

from ...render import esc, fold, table
from .cli import ORDER


def render(records: list[dict]) -> str:
    parts = []
    for r in reversed(records[-5:]):
        d = r["detail"]
        if r["params"].get("what") == "tcp" and d.get("lines"):
            pair = " - ".join(d["pair"])
            parts.append(f"<h3>TCP socket buffer, {esc(pair)}, session {esc(d['session'])}</h3>")
            parts.append("<pre>" + esc("\n".join(d["lines"] + d["sysctl"])) + "</pre>")
            continue
        if r["params"].get("what") == "qcd" and d.get("lines"):
            lattice = "x".join(map(str, d["lattice"]))
            parts.append(
                f"<h3>QCD decomposition, lattice {esc(lattice)} on {d['np']} rank(s), "
                f"session {esc(d['session'])}</h3>"
            )
            parts.append("<pre>" + esc("\n".join([*d["lines"], d["command"]])) + "</pre>")
            continue
        if not d.get("why"):
            continue
        parts.append(
            f"<h3>Linpack, session {esc(d['session'])} ({esc(r['started'])}): "
            f"{d['gflops_confirm']:.1f} Gflop/s at N={d['n_confirm']}, "
            f"DGEMM {d['dgemm_gflops']:.1f}</h3>"
        )
        rows = [[k, d["why"][k]] for k in ORDER if k in d["why"]]
        parts.append(fold("why each choice", table(["choice", "why"], rows)))
        parts.append(fold("HPL.dat", f"<pre>{esc(d['hpl_dat'])}</pre>"))
        parts.append(
            f"<p>Evidence: {len(d['runs'])} stored runs, params.tune = {esc(d['session'])}.</p>"
        )
    return "\n".join(parts)
