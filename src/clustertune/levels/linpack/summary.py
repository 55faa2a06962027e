"""The Linpack level's row of the report's first screen (clustertune.summary): per cluster,
the newest LU run's best verified Gflop/s against the best DGEMM of the same BLAS on as
many ranks (where the ranks shared CPUs: the SUMMA DGEMM of its grid and order). The
tuner's trials (params.tune) belong to the tune level's row."""

from __future__ import annotations

from ... import summary
from . import section


def lu_runs(records: list[dict]) -> list[dict]:
    return [
        r
        for r in records
        if r["kernel"] == "ct-linpack"
        and not r["params"].get("compare")
        and not r["params"].get("tune")
    ]


def comparable_key(record: dict, best: dict) -> str:
    """What makes two LU rows comparable (the change column): the same cluster, problem
    (N, NB, P x Q), ranks and BLAS; another N or library is another measure, not a change."""
    lib = record["detail"].get("blas", {})
    said = (record["params"].get("blas_choice") or {}).get("label")
    blas = " ".join(str(x) for x in (said, lib.get("library"), lib.get("core")) if x)
    return (
        f"lu {record['meta']['cluster']['name']} N={best['n']} nb={best['nb']} "
        f"{best['p']}x{best['q']} np={record['meta']['np']} {blas}"
    )


def blas_named(record: dict) -> tuple[str, str, str | None]:
    """The BLAS an LU ran with as the first screen names it: the OpenBLAS core that ran
    (the kernel's own record; the library where no core is known, "" when neither is),
    whose choice it was (the host's measured default, choice.py, or the user's), and the
    core the default named when another one ran."""
    lib = record["detail"].get("blas", {})
    said = record["params"].get("blas_choice") or {}
    name = said.get("name") or lib.get("library", "").rsplit("/", 2)[-2:][0]
    core = lib.get("core")
    text = f"{core} core" if core else name
    if said.get("how") == "named":
        return text, "BLAS named", None
    if said.get("how") not in ("measured", "stored"):
        return text, "", None
    wanted = said.get("coretype")
    if wanted and (core or "").lower() != wanted.lower():
        return text, "", wanted
    return text, "host default BLAS", None


def lu_row(record: dict, peaks: dict[tuple, float], summas: dict[tuple, float]) -> summary.Row:
    cluster = record["meta"]["cluster"]["name"]
    passed = [s for s in record["samples"] if "variant" in s and s["passed"] is True]
    row = summary.Row(f"LU ({cluster})", "", run=record["id"], unit="Linpack")
    if record["status"] != "ok" or not passed:
        row.figure = "no verified result"
        row.verdict, row.state = record["status"] + ", residual check not passed", summary.BAD
        return row
    best = max(passed, key=lambda s: s["gflops"])
    blas, whose, other_core = blas_named(record)
    # the BLAS beside the figure, briefly: the first screen's columns size to their text
    row.measure = f"LU N={best['n']} {best['p']}x{best['q']} ({cluster})"
    row.figure = f"{best['gflops']:.2f} Gflop/s" + (f", {blas}" if blas else "")
    row.value = best["gflops"]
    row.key = comparable_key(record, best)
    shared = section.shared_cpus(record)
    if shared:
        # ranks sharing CPUs wait for each other's messages a scheduler slice at a time
        # (the demo's 4 ranks on 2 CPUs: 0.05 of the local DGEMM, whose ranks never
        # wait): a DGEMM that communicates the same way is the reference, else none
        ranks, cpus = shared
        summa = section.summa_rate(record, best, summas)
        if summa is None:
            row.reference = f"no ratio: {ranks} ranks on {cpus} CPUs"
        else:
            row.ratio = best["gflops"] / summa
            row.reference = f"SUMMA DGEMM {summa:.2f} Gflop/s ({ranks} ranks, {cpus} CPUs)"
    elif (pct := section.percent_of_peak(record, best, peaks)) is None:
        row.reference = "no DGEMM run of this BLAS on as many ranks"
    else:
        row.ratio = pct / 100.0
        row.reference = f"best DGEMM {best['gflops'] / row.ratio:.2f} Gflop/s"
    row.verdict = "residual passed" + (f", {whose}" if whose else "")
    if other_core:  # the default run did not run the core the host's choice names
        row.verdict += f"; not the host default's core {other_core}"
        row.state = summary.WARN
    return row


def rows(records: list[dict]) -> list[summary.Row]:
    peaks, summas = section.dgemm_peaks(records), section.summa_rates(records)
    newest = {r["meta"]["cluster"]["name"]: r for r in lu_runs(records)}
    out = [lu_row(r, peaks, summas) for r in newest.values()]
    if not out and peaks:  # GEMM runs only
        (cluster, ranks, library, core), peak = max(peaks.items(), key=lambda kv: kv[1])
        measure = f"DGEMM {ranks} rank(s) {library or ''} ({cluster})".replace("  ", " ")
        key = f"dgemm {cluster} np={ranks} {library} {core}"  # comparable: section.blas_key
        out.append(
            summary.Row(
                measure,
                f"{peak:.2f} Gflop/s",
                verdict="verified",
                value=peak,
                unit="DGEMM",
                key=key,
                over_wire=False,
            )
        )
    return out
