"""The QCD level's study step kind (clustertune.studies): one decomposition."""

from __future__ import annotations

from collections import defaultdict

from ...cluster import Cluster
from ...results import Store
from ...studies import kinds


def _qcd(cluster: Cluster, store: Store, v: dict, mpi: str) -> list[dict]:
    from . import run, study

    np = kinds.integer(v, "np", 1)
    lattice = run.parse_dims(str(v.get("lattice", "8x8x8x8")), "lattice")
    if "dims" in v:
        dims = kinds.integer(v, "dims", 1)
        grid = study.decompositions(np, lattice, [dims]).get(dims)
    else:
        grid = run.default_grid(lattice, np)
    spec = run.QcdSpec(
        lattice=lattice,
        grid=grid,
        sweeps=kinds.integer(v, "sweeps", 4),
        or_steps=kinds.integer(v, "or_steps", 4),
        start="hot",
        seed=kinds.integer(v, "seed", 1),
    )
    extra = {"oversubscribed": study.oversubscribed(cluster, np)}
    return [run.run_qcd(cluster, store, spec, np=np, mpi=mpi, extra=extra)]


def _split_plots(step_records: list[dict]) -> str:
    """seeds/003 figs. 7-9: each decomposition's run time split into computation and
    communication, and its rate with and without communication (the qcd level's figure),
    one per lattice and rank count."""
    from . import section

    groups = defaultdict(list)
    for r in step_records:
        groups[(tuple(r["params"]["lattice"]), r["params"]["np"])].append(r)
    return "\n".join(
        section.study_figure(sorted(g, key=lambda r: r["params"]["split_dims"]))
        for g in groups.values()
    )


KINDS = (
    kinds.Kind(
        "qcd",
        "qcd",
        frozenset({"np", "lattice", "dims", "sweeps", "or_steps", "seed"}),
        _qcd,
        "qcd: ct-qcd, the decomposition of `dims` split directions",
        figure="qcdflops_gflops",
        plots=_split_plots,
    ),
)
