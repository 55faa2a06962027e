"""The papers' qualitative findings, each checked against the study's own records.

    [[finding]]
    id = "mpi-latency"
    text = "MPI's latency is 1.8x TCP's on the same pair (fig. 5: 0.123 vs 0.069 ms)"
    check = "ratio"                      # ratio | greater | flat | trend
    a = { step = "pingpong", where = { layer = "mpi" }, figure = "latency_us", agg = "min" }
    b = { step = "pingpong", where = { layer = "tcp" }, figure = "latency_us", agg = "min" }
    expect = [1.0, inf]                  # ratio a/b in this range: reproduced
    paper = 1.78                         # the paper's value of the same quantity

* ``ratio``: value(a) / value(b) within ``expect`` = [low, high]; ``b`` may be a number
  (a fixed reference, e.g. the time a link takes for the bytes).
* ``greater``: value(a) > value(b) (e.g. throughput dips on the faulty host vs a healthy one).
* ``flat``: the series ``a`` over ``x`` (a point value) varies by at most ``expect`` =
  max/min (EP's per-process rate vs the process count).
* ``trend``: the series ``a`` over ``x`` ends ``expect`` = "lower" or "higher" than it
  starts (more split directions: more communication).

A finding that reads a figure of mid-size messages (:data:`MID_SIZE_FIGURES`) is "not
judged" when any of its runs was on a tbf-shaped virtual link (or a virtual link whose wire
was not recorded: tbf was the default before): the token bucket lets messages smaller than
itself through at memory speed, so those figures are the bucket's, not the link's
(docs/network.md); on the paced wire or a real link it is judged.

A selector picks the study's ok records of one step whose point values match ``where``,
reads ``figure`` (``samples.K`` or ``samples.K.J``: field K (its J) of every sample,
those matching ``samples = {field = value}`` if given; ``F.KEY`` / ``F.*``: entries of a
figure that is a table, e.g. one per size; a list figure counts its entries) and aggregates them with ``agg`` (min, max, median, mean; default median).
"""

from __future__ import annotations

import math
import statistics

from ..runner import mid_size_not_judged

CHECKS = ("ratio", "greater", "flat", "trend")
STATUSES = ("reproduced", "not reproduced", "no data", "not judged")
MID_SIZE_FIGURES = ("saturation_point_bytes", "n_half_bytes", "preferred_block_range_bytes", "dips")
AGGS = {"min": min, "max": max, "median": statistics.median, "mean": statistics.fmean}
FINDING_KEYS = {"id", "text", "check", "a", "b", "x", "expect", "paper", "unit", "source"}
SELECTOR_KEYS = {"step", "where", "figure", "agg", "samples"}


def check_spec(f: dict, steps: set[str]) -> tuple[str, str] | None:
    """(field, problem) of a malformed finding, or None."""
    for key in f:
        if key not in FINDING_KEYS:
            return key, f"unknown field (known: {', '.join(sorted(FINDING_KEYS))})"
    for key in ("id", "text"):
        if not isinstance(f.get(key), str) or not f[key]:
            return key, "expected a non-empty string"
    if f.get("check") not in CHECKS:
        return "check", f"expected one of {', '.join(CHECKS)}, got {f.get('check')!r}"
    need = ("a", "b") if f["check"] in ("ratio", "greater") else ("a", "x")
    for key in need:
        if key not in f:
            return key, f"check {f['check']} needs {key}"
    for key in ("a", "b"):
        if key == "b" and f["check"] == "ratio" and _number(f.get("b")):
            continue  # a fixed reference: a / b against a known time or rate
        if key in f and (problem := check_selector(f[key], steps)):
            return key, problem
    expect = f.get("expect")
    if f["check"] == "ratio" and not (isinstance(expect, list) and len(expect) == 2):
        return "expect", "check ratio needs expect = [low, high]"
    if f["check"] == "flat" and not isinstance(expect, int | float):
        return "expect", "check flat needs expect = the largest max/min"
    if f["check"] == "trend" and expect not in ("lower", "higher"):
        return "expect", 'check trend needs expect = "lower" or "higher"'
    return None


def check_selector(sel: object, steps: set[str]) -> str | None:
    if not isinstance(sel, dict) or not isinstance(sel.get("figure"), str):
        return "expected { step = ..., figure = ..., where = {...}, agg = ... }"
    if bad := set(sel) - SELECTOR_KEYS:
        return f"unknown selector field {sorted(bad)[0]!r}"
    if sel.get("step") not in steps:
        return f"step {sel.get('step')!r} is not a [[step]] of this study"
    if sel.get("agg", "median") not in AGGS:
        return f"agg: expected one of {', '.join(AGGS)}"
    if not isinstance(sel.get("where", {}), dict):
        return "where: expected a table of point values"
    return None


def _matches(record: dict, sel: dict) -> bool:
    tag = record["meta"].get("study", {})
    if tag.get("step") != sel["step"] or record["status"] != "ok":
        return False
    values = {**tag.get("values", {}), "mpi": tag.get("mpi")}
    return all(values.get(k) == v for k, v in sel.get("where", {}).items())


def _figure(record: dict, name: str, only: dict | None = None) -> list[float]:
    if name.startswith("samples."):  # every sample's field (a.b: nested), agg over them all
        path = name.split(".")[1:]
        found = []
        for sample in record["samples"]:
            if not all(sample.get(k) == v for k, v in (only or {}).items()):
                continue
            value: object = sample
            for key in path:
                value = value.get(key) if isinstance(value, dict) else None
            if isinstance(value, int | float) and not isinstance(value, bool):
                found.append(float(value))
        return found
    value = record["figures"].get(name)
    if value is None and "." in name:  # a figure per size: "name.KEY", "name.*" all of them
        head, key = name.split(".", 1)
        table = record["figures"].get(head)
        if isinstance(table, dict):
            found = table.values() if key == "*" else [table.get(key)]
            return [float(v) for v in found if isinstance(v, int | float) and math.isfinite(v)]
    if isinstance(value, list):
        return [float(len(value))]
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return [float(value)]
    return []


def select(records: list[dict], sel: dict) -> tuple[float | None, list[int]]:
    """The aggregated value of a selector and the runs it was read from."""
    chosen = [r for r in records if _matches(r, sel)]
    values = [v for r in chosen for v in _figure(r, sel["figure"], sel.get("samples"))]
    if not values:
        return None, []
    return AGGS[sel.get("agg", "median")](values), [r["id"] for r in chosen]


def series(records: list[dict], sel: dict, x: str) -> list[tuple[object, float, list[int]]]:
    xs = []  # in the order the points ran (the study's order): "4K" before "256K"
    for r in sorted((r for r in records if _matches(r, sel)), key=lambda r: r["id"]):
        if (value := r["meta"]["study"]["values"].get(x)) not in xs:
            xs.append(value)
    out = []
    for value in xs:
        got, runs = select(records, {**sel, "where": {**sel.get("where", {}), x: value}})
        if got is not None:
            out.append((value, got, runs))
    return out


def _number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _describe(sel: dict, value: float) -> str:
    where = {**sel.get("where", {}), **sel.get("samples", {})}
    return f"{sel['step']} {sel['figure']} {fmt(value)}" + (f" ({where})" if where else "")


def values_of(record: dict, figure: str) -> list[float]:
    """A record's values of ``figure`` (the same reading as a selector's)."""
    return _figure(record, figure)


def text_of(value: object) -> object:
    """A point value as a plot or key shows it: lists joined with '+'."""
    return "+".join(map(str, value)) if isinstance(value, list) else value


def fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.3g}"


def evaluate(f: dict, records: list[dict]) -> dict:
    """{id, text, status: one of STATUSES, measured, evidence, runs}."""
    out = _evaluate(f, records)
    figures = [sel["figure"] for sel in (f["a"], f.get("b")) if isinstance(sel, dict)]
    if not any(name in MID_SIZE_FIGURES for name in figures) or out["status"] == "no data":
        return out
    why = {r["id"]: mid_size_not_judged(r) for r in records}
    unjudged = [run for run in out["runs"] if why.get(run)]
    if not unjudged:
        return out
    causes = ", ".join(sorted({why[run] for run in unjudged}))
    runs = ", ".join(map(str, unjudged))
    evidence = (
        f"not judged: {causes} (runs {runs}): a mid-size figure is the link's only on a paced"
        " wire or a real link (a tbf bucket lets smaller messages outrun the link)"
    )
    return out | {"status": "not judged", "measured": None, "evidence": evidence}


def _evaluate(f: dict, records: list[dict]) -> dict:
    out = {
        "id": f["id"],
        "text": f["text"],
        "paper": f.get("paper"),
        "unit": f.get("unit", ""),
        "measured": None,
        "runs": [],
    }
    if f["check"] in ("ratio", "greater"):
        a, runs_a = select(records, f["a"])
        b, runs_b = (f["b"], []) if _number(f["b"]) else select(records, f["b"])
        out["runs"] = runs_a + runs_b
        if a is None or b is None or (f["check"] == "ratio" and not b):
            missing = "a" if a is None else "b"
            return out | {
                "status": "no data",
                "evidence": f"no ok run of {f[missing]['step']} {f[missing].get('where', {})}",
            }
        a_text = _describe(f["a"], a)
        b_text = fmt(b) if _number(f["b"]) else _describe(f["b"], b)
        if f["check"] == "ratio":
            low, high = f["expect"]
            ratio = a / b
            ok = low <= ratio <= high
            out["measured"] = ratio
            evidence = f"here {ratio:.2f}x: {a_text} / {b_text}"
        else:
            ok = a > b
            out["measured"] = a
            evidence = f"here {a_text} {'>' if ok else '<='} {b_text}"
        return out | {"status": "reproduced" if ok else "not reproduced", "evidence": evidence}
    points = series(records, f["a"], f["x"])
    out["runs"] = [run for _, _, runs in points for run in runs]
    if len(points) < 2:
        return out | {
            "status": "no data",
            "evidence": f"fewer than two values of {f['x']} with an ok run",
        }
    values = [v for _, v, _ in points]
    text = ", ".join(f"{f['x']}={x}: {fmt(v)}" for x, v, _ in points)
    if f["check"] == "flat":
        spread = max(values) / min(values) if min(values) > 0 else math.inf
        ok = spread <= f["expect"]
        out["measured"] = spread
        evidence = f"here max/min {spread:.2f} (at most {f['expect']}): {f['a']['figure']} {text}"
    else:
        ok = values[-1] < values[0] if f["expect"] == "lower" else values[-1] > values[0]
        out["measured"] = values[-1] / values[0] if values[0] else None
        evidence = f"here {f['a']['figure']} {text}"
    return out | {"status": "reproduced" if ok else "not reproduced", "evidence": evidence}
