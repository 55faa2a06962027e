"""Running a study: its virtual clusters built (and removed at the end), every point run
through its kind, each record tagged ``meta.study`` = {name, variant, point, ...}, and the
points whose record is already in the store skipped: a study killed mid-way and run
again finishes without redoing finished points.

A point is finished when the store holds its records with a status other than
``interrupted`` (a failed point is finished: its failure is the result; ``redo_failed``
runs it again).
"""

from __future__ import annotations

import hashlib
import json
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from .. import vcluster
from ..cluster import Cluster
from ..errors import UserError
from ..grid import virtual
from ..grid.source import cluster_from_grid
from ..results import Store
from ..sources import resolve_cluster
from ..units import parse_rate
from .catalog import kinds
from .kinds import Kind
from .spec import ClusterSpec, Point, Study


def variant(quick: bool) -> str:
    return "quick" if quick else "full"


def rundir(store: Store, study: Study) -> Path:
    """The study's own directory beside the results database: what its points make once and
    reuse (the remote I/O's CA, certificates and grid-mapfile)."""
    # absolute: the client and server find their certificates from other working directories
    return store.path.resolve().parent / "studies" / f"{study.name}-{variant(study.quick)}"


def stored(store: Store, name: str, quick: bool) -> dict[str, list[dict]]:
    """The study's records in the store, by point key, oldest first."""
    rows = store.conn.execute(
        "SELECT record FROM runs WHERE json_extract(record, '$.meta.study.name') = ? "
        "AND json_extract(record, '$.meta.study.variant') = ? ORDER BY id",
        (name, variant(quick)),
    )
    out: dict[str, list[dict]] = {}
    for (text,) in rows:
        record = json.loads(text)
        out.setdefault(record["meta"]["study"]["point"], []).append(record)
    return out


def finished(records: list[dict], expected: int, redo_failed: bool = False) -> bool:
    """The point's last attempt stored all its records, none interrupted (nor failed, with
    ``redo_failed``)."""
    if not records:
        return False
    attempt = records[-1]["meta"]["study"].get("attempt")
    last = [r for r in records if r["meta"]["study"].get("attempt") == attempt]
    bad = {"interrupted"} | ({"failed", "incomplete"} if redo_failed else set())
    return len(last) >= expected and not any(r["status"] in bad for r in last)


@dataclass
class Outcome:
    """What one ``study run`` did."""

    study: str
    variant: str
    points: int = 0
    ran: list[dict] = field(default_factory=list)  # {point, runs, status}
    skipped: list[str] = field(default_factory=list)
    errors: list[dict] = field(default_factory=list)  # {point, error}: nothing stored
    not_run: list[dict] = field(default_factory=list)  # {point, reason}
    stopped_after: int | None = None

    @property
    def ok(self) -> bool:
        return not self.errors and all(p["status"] == "ok" for p in self.ran)


def summary(record: dict) -> str:
    keys = (
        "latency_us",
        "bandwidth_mbps",
        "mops_per_process",
        "qcdflops_gflops",
        "gflops",
        "write_mbps",
        "read_mbps",
    )
    figures = record.get("figures", {})
    shown = [f"{k}={figures[k]:.4g}" for k in keys if isinstance(figures.get(k), int | float)]
    return " ".join(shown)


class Clusters:
    """The study's clusters: the user's (``--cluster``) or virtual ones built on first use
    and removed at the end."""

    def __init__(self, study: Study, override: str | Cluster | None, log: Callable[[str], None]):
        self.study, self.override, self.log = study, override, log
        self.built: dict[str, Cluster] = {}
        self.names: list[str] = []

    def unavailable(self, spec: ClusterSpec, kind: Kind) -> str | None:
        if self.override and spec.faults:
            return (
                f"cluster {spec.name!r} injects faults ({spec.faults}): it runs on a "
                "virtual cluster only, not on --cluster"
            )
        if self.override and kind.sites > len(self.given().sites):
            return (
                f"a {kind.name} step needs {kind.sites} sites: --cluster "
                f"{self.given().name!r} has {len(self.given().sites)}"
            )
        if self.override and spec.scheduler and self.given().launcher != "grid":
            return (
                f"cluster {spec.name!r} is a grid of {spec.scheduler} sites (jobs through "
                f"the grid launcher): --cluster {self.given().name!r} is not a grid"
            )
        return None

    def given(self) -> Cluster:
        """The ``--cluster`` one (read once)."""
        if not isinstance(self.override, Cluster):
            self.override = resolve_cluster(self.override)
        return self.override

    def get(self, spec: ClusterSpec) -> Cluster:
        if spec.name in self.built:
            return self.built[spec.name]
        if self.override:
            cluster = self.given()
        else:
            vcluster.require_root()
            # one name per study, cluster and variant: a run killed with SIGKILL left its
            # cluster up; the next run of the study removes it before building its own
            digest = hashlib.sha1(
                f"{self.study.name}/{spec.name}/{self.study.quick}".encode()
            ).hexdigest()
            name = f"st{digest[:8]}"
            if vcluster.load_state(name) is not None or virtual.load(name) is not None:
                self.log(f"removing virtual cluster {name} left by an earlier run")
                virtual.down(name)  # a grid's daemons, then its virtual cluster
            faults = {
                h: vcluster.parse_faults(f.split(","), f"faults.{h}")
                for h, f in spec.faults.items()
            }
            link = parse_rate(spec.link) if spec.link else None
            wan = parse_rate(spec.wan_link) if spec.wan_link else None
            self.names.append(name)
            self.log(
                f"building virtual cluster {name} for {spec.name!r}: {spec.hosts} hosts, "
                f"link {spec.link or 'unlimited'}, {vcluster.DEFAULT_WIRE} wire"
                + (f", faults {spec.faults}" if spec.faults else "")
                + (f", a grid of {spec.scheduler} sites" if spec.scheduler else "")
            )
            if spec.scheduler:  # seeds/000's grid: jobs co-allocated through each site's scheduler
                cplan, grid = virtual.plan(
                    name,
                    spec.sites,
                    spec.hosts // spec.sites,
                    [spec.scheduler] * spec.sites,
                    link,
                    wan,
                )
                cluster = cluster_from_grid(virtual.up(cplan, grid))
            else:
                state = vcluster.plan(
                    name,
                    spec.hosts,
                    link,
                    sites=spec.sites,
                    wan_bps=wan,
                    cores=spec.cores,
                    host_faults=faults,
                )
                cluster = vcluster.cluster_from_state(vcluster.up(state))
        self.built[spec.name] = cluster
        return cluster

    def close(self) -> None:
        for name in self.names:
            virtual.down(name)  # a grid's daemons too; a plain virtual cluster otherwise


def run(
    study: Study,
    store: Store,
    *,
    cluster: str | Cluster | None = None,
    max_points: int | None = None,
    redo_failed: bool = False,
    log: Callable[[str], None] | None = None,
) -> Outcome:
    """Run the study's unfinished points; ``max_points`` stops after that many new points
    (tests: a study cut off mid-way)."""
    log = log or (lambda line: print(line, file=sys.stderr, flush=True))
    points = study.points()
    done = stored(store, study.name, study.quick)
    out = Outcome(study.name, variant(study.quick), len(points))
    clusters = Clusters(study, cluster, log)
    attempt = uuid.uuid4().hex[:12]
    try:
        for index, point in enumerate(points, start=1):
            where = f"[{index}/{len(points)}] {study.name} {point.key}"
            kind = kinds()[point.step.kind]
            if finished(done.get(point.key, []), kind.expected(point.values), redo_failed):
                runs = ", ".join(str(r["id"]) for r in done[point.key])
                log(f"{where}: done before (run {runs}), skipped")
                out.skipped.append(point.key)
                continue
            spec = study.clusters[point.step.cluster]
            if reason := clusters.unavailable(spec, kind):
                log(f"{where}: not run: {reason}")
                out.not_run.append({"point": point.key, "reason": reason})
                continue
            if max_points is not None and len(out.ran) + len(out.errors) >= max_points:
                out.stopped_after = max_points
                log(f"{where}: stopped: --max-points {max_points} reached")
                break
            out.ran.append(run_point(study, store, point, clusters.get(spec), attempt, where, log))
            if out.ran[-1]["status"] == "error":
                out.errors.append({"point": point.key, "error": out.ran.pop()["error"]})
    finally:
        clusters.close()
    return out


def run_point(
    study: Study,
    store: Store,
    point: Point,
    cluster: Cluster,
    attempt: str,
    where: str,
    log: Callable[[str], None],
) -> dict:
    kind = kinds()[point.step.kind]
    tag = {
        "name": study.name,
        "variant": variant(study.quick),
        "point": point.key,
        "step": point.step.name,
        "kind": kind.name,
        "values": point.values,
        "mpi": point.mpi,
        "rep": point.rep,
        "cluster": point.step.cluster,
        "swept": [*point.step.sweep, *dict.fromkeys(k for c in point.step.cases for k in c)],
        "attempt": attempt,
    }
    tagged = store.tagged(study=tag)  # the runner puts the tag in each record's meta
    log(f"{where}: running on {cluster.name} ...")
    begin = time.monotonic()
    try:
        extra = {"rundir": rundir(store, study)} if kind.rundir else {}
        kind.run(cluster, tagged, dict(point.values), point.mpi, **extra)
    except UserError as exc:
        if not tagged.saved:  # refused before anything ran: nothing stored
            log(f"{where}: error: {exc}")
            return {"point": point.key, "status": "error", "error": str(exc)}
    records = [store.get(run_id) for run_id in tagged.saved]
    status = (
        "ok"
        if records and all(r["status"] == "ok" for r in records)
        else (records[-1]["status"] if records else "failed")
    )
    ids = ", ".join(str(r["id"]) for r in records)
    figures = "; ".join(s for s in (summary(r) for r in records) if s)
    log(f"{where}: {status} (run {ids}, {time.monotonic() - begin:.1f} s) {figures}".rstrip())
    return {"point": point.key, "runs": [r["id"] for r in records], "status": status}
