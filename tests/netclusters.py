"""Virtual clusters shared by the tests of one module, and faults set on them for one test.

Building and removing a 4-host cluster took 5-6 s at load 19 (53 ``ip``/``tc`` commands,
each a fork of this process), often more than the test that used it. A test that leaves
its cluster as it found it takes one from :class:`SharedClusters` (a module-scoped
fixture) and sets its faults with :func:`faulted`, as ``vcluster set`` does, which
clears them afterwards whatever happened."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Callable, Iterator

from clustertune import netns, runner, vcluster
from clustertune.cluster import Cluster
from clustertune.levels.network import matrix_output


class SharedClusters:
    """Clusters by shape (hosts, link, plan options), each built once and kept until
    :meth:`down`; the same names as conftest's ``make_vcluster`` gives ("t" + 6 hex)."""

    def __init__(self) -> None:
        self.names: dict[tuple, str] = {}

    def get(self, hosts: int = 2, link_bps: int | None = None, **options) -> Cluster:
        key = (hosts, link_bps, tuple(sorted(options.items())))
        if key not in self.names:
            name = f"t{uuid.uuid4().hex[:6]}"
            vcluster.up(vcluster.plan(name, hosts, link_bps, **options))
            self.names[key] = name
        return vcluster.cluster_from_state(vcluster.load_state(self.names[key]))

    def down(self) -> None:
        for name in self.names.values():
            vcluster.down(name)
            leftovers = [ns for ns in netns.listed() if ns.startswith(vcluster.prefix(name))]
            assert not leftovers, f"namespaces left behind: {leftovers}"


@contextlib.contextmanager
def faulted(
    cluster: Cluster, host_faults: dict | None = None, link_faults: dict | None = None
) -> Iterator[Cluster]:
    """``cluster`` with these faults (as ``plan`` takes them: ``{"host2": {"loss":
    0.001}}``, ``{"host2-host1": {"delay_us": 500}}``) set for the block, then cleared."""
    hosts, links = dict(host_faults or {}), dict(link_faults or {})
    try:
        for host, faults in hosts.items():
            vcluster.set_faults(cluster.name, host, vcluster.format_faults(faults).split(","))
        for pair, faults in links.items():
            vcluster.set_link_faults(cluster.name, pair, vcluster.format_faults(faults).split(","))
        yield vcluster.cluster_from_state(vcluster.load_state(cluster.name))
    finally:
        for host in hosts:
            vcluster.set_faults(cluster.name, host, ["clear"])
        for pair in links:
            vcluster.set_link_faults(cluster.name, pair, ["clear"])


# Matrices a faulty cluster gets to judge in: a pacer holding a host's packets 500 µs
# released late enough (p99 100-330 µs over six idle matrices, 2026-11-28) that the
# diagnosis withheld that host's +250 µs twice in a row once in eight runs of
# test_network_diagnosis.py
JUDGED_MATRIX_TRIES = 3


def judged_matrix(run: Callable[[], dict]) -> tuple[dict, dict]:
    """A faulty cluster's matrix record (``run()``) and its document, from a run that judged.
    A matrix may say "not judged: the emulated wire was late" when its pacers released
    late during the re-tests (the diagnosis withholds what lateness could explain); each
    such run must be backed by the pacers' own lateness, and one of JUDGED_MATRIX_TRIES
    must judge: a fault is never hidden run after run."""
    for _ in range(JUDGED_MATRIX_TRIES):
        record = run()
        doc = matrix_output.matrix_json(record)
        if doc["not_judged"] is None:
            return record, doc
        assert doc["wire_late_us"]["retests"]["p99_us"] > runner.WIRE_LATE_P99_US, doc
    raise AssertionError(f"not judged in {JUDGED_MATRIX_TRIES} runs: {doc['not_judged']}")
