"""The STREAM level: ct-stream's four loops per rank, per host and for the whole job with
both MPIs, arrays sized from the last-level caches, the injected fault stored as failed with
no rate shown, bad input refused before launch, STREAM's text, the report section and first-
screen row, the demo step, the study step kind, and the hosts of a virtual cluster."""

from __future__ import annotations

import importlib
import json
import math
import os
import re
import socket
import uuid
from pathlib import Path

import pytest
from clirun import assert_refused_before_launch, cli

from clustertune import summary, vcluster
from clustertune.cluster import local_cluster
from clustertune.errors import UserError
from clustertune.levels.stream import demo, section, steps
from clustertune.levels.stream import run as streamrun
from clustertune.levels.stream import summary as streamsummary
from clustertune.results import Store
from clustertune.studies import execute, page, spec

MPIS = ("openmpi", "mpich")
SMALL = ["--n", "200000", "--ntimes", "3"]  # in cache, a few ms: the tests of the plumbing


def host_llc_bytes() -> int:
    """This host's last-level caches from sysfs, read independently of the kernel: the
    highest level holding data, each distinct set of sharing CPUs once."""
    found: dict[int, dict[str, int]] = {}
    for index in Path("/sys/devices/system/cpu").glob("cpu[0-9]*/cache/index[0-9]*"):
        if (index / "type").read_text().strip() == "Instruction":
            continue
        size = (index / "size").read_text().strip()
        units = {"K": 2**10, "M": 2**20, "G": 2**30}
        value = int(size[:-1]) * units[size[-1]] if size[-1] in units else int(size)
        level = found.setdefault(int((index / "level").read_text()), {})
        level[(index / "shared_cpu_list").read_text().strip()] = value
    return sum(found[max(found)].values()) if found else 0


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, dict]:
    """The runs the tests read: a CLI sweep over 1 and 2 ranks (Open MPI) and 2 ranks with
    MPICH, arrays in cache; the injected fault; the demo step (arrays of the default size);
    all in one store."""
    db = tmp_path_factory.mktemp("stream") / "stream.db"
    out = cli("stream", "--np", "2", "--sweep", *SMALL, "--json", "--db", str(db), timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    swept = json.loads(out.stdout)
    store = Store(db)
    spec = streamrun.StreamSpec(n=200000, ntimes=3)
    mpich = streamrun.run_stream(local_cluster(), store, 2, "mpich", spec)
    fault = streamrun.StreamSpec(n=100000, ntimes=3, inject_fault=True)
    failed = streamrun.run_stream(local_cluster(), store, 1, "openmpi", fault)
    demoed = demo.step(local_cluster(), store)
    store.close()
    return {"np1": swept[0], "np2": swept[1], "mpich": mpich, "fault": failed, "demo": demoed}


@pytest.mark.parametrize("name", ["np1", "np2", "mpich"])
def test_every_loop_is_stored_per_rank_per_host_and_for_the_job(runs, name):
    r = runs[name]
    f, np = r["figures"], r["params"]["np"]
    assert r["status"] == "ok" and r["verification"] == "passed", r["error"]
    assert r["level"] == "stream" and r["kernel"] == "ct-stream" and r["meta"]["np"] == np
    assert f["ranks"] == np and f["hosts"] == 1 and f["n"] == 200000
    assert f["max_rel_error"] <= 1e-13 and r["detail"]["ntimes"] == 3
    assert len(r["detail"]["rank_times"]) == np
    loops = streamrun.samples_by_loop(r)
    assert list(loops) == ["copy", "scale", "add", "triad"]
    for loop, per_element in zip(loops, (16, 16, 24, 24), strict=True):
        s = loops[loop]
        assert s["bytes_per_rank"] == per_element * 200000
        # the job's rate: every rank's bytes over the slowest rank's best repetition
        assert s["gb_s"] == pytest.approx(np * s["bytes_per_rank"] / s["best_s"] / 1e9)
        assert f[f"{loop}_gb_s"] == pytest.approx(s["gb_s"]) and s["gb_s"] > 0
        assert s["best_s"] <= s["avg_s"] <= s["max_s"]
        assert len(s["rank_gb_s"]) == np
        assert s["rank_stats"]["mean"] == pytest.approx(sum(s["rank_gb_s"]) / np)
        assert f[f"{loop}_rank_gb_s"] == pytest.approx(s["rank_stats"]["mean"])
        (host,) = s["per_host"]
        assert host["host"] == socket.gethostname() and host["ranks"] == np


def test_both_mpis_ran_their_own_build(runs):
    assert runs["np2"]["detail"]["mpi_library"].startswith("Open MPI")
    assert "MPICH" in runs["mpich"]["detail"]["mpi_library"]


def test_default_arrays_are_four_times_the_last_level_caches_shared_by_the_ranks(runs, store):
    llc = host_llc_bytes()
    if not llc:
        pytest.skip("no cache sizes in sysfs on this host")
    for r in runs["demo"]:  # the demo's runs: default arrays
        f = r["figures"]
        assert f["llc_bytes"] == llc and f["n"] == math.ceil(4 * llc / f["ranks"] / 8)
        assert f["arrays_over_llc"] == pytest.approx(4.0, rel=1e-6)
        assert streamrun.in_cache(f) is None and r["detail"]["llc_from"] == "sysfs"
    # --cache replaces sysfs (a host without it); --n replaces both
    told = streamrun.run_stream(
        local_cluster(), store, 2, "openmpi", streamrun.StreamSpec(cache="1M", ntimes=2)
    )
    assert told["figures"]["n"] == 4 * 2**20 // 2 // 8 and told["detail"]["llc_from"] == "--cache"


def test_injected_fault_is_failed_and_shows_no_rate(runs):
    r = runs["fault"]
    assert r["status"] == "failed" and r["verification"] == "failed"
    assert r["figures"]["max_rel_error"] == pytest.approx(1e-6, rel=1e-3)
    assert not any(k.endswith("_gb_s") for k in r["figures"]) and r["samples"] == []
    assert "verification failed" in r["error"]
    text = streamrun.text(r)
    assert "FAILED (verification)" in text and "GB/s" not in text
    row = next(
        row
        for row in section.runs_table([runs["np1"], r]).split("<tr>")
        if f"<td>{r['id']}</td>" in row
    )
    assert row.count("FAILED (verification)") == 5
    assert not re.search(r"<td>[\d.]+</td>", row.split("FAILED", 1)[1])  # no rate anywhere


@pytest.mark.parametrize(
    "args, named",
    [
        (["--np", "0"], "--np"),
        (["--ntimes", "1"], "--ntimes"),
        (["--n", "0"], "--n"),
        (["--cache", "12X"], "--cache"),
        (["--cache", "0"], "--cache"),
    ],
)
def test_bad_input_is_one_line_before_launch(tmp_path, args, named):
    assert_refused_before_launch(["stream", *args], tmp_path / "bad.db", named)


def test_text_is_streams_table(runs):
    text = streamrun.text(runs["np2"])
    assert "Function" in text and "Best GB/s" in text
    for loop in ("Copy:", "Scale:", "Add:", "Triad:"):
        assert loop in text
    # 200000 doubles are 1.5 MB: far below 4 x the caches, and said so
    assert "these rates are partly the cache's" in text


def test_report_section_and_first_screen(runs):
    records = [runs[k] for k in ("np1", "np2", "mpich", "fault")] + runs["demo"]
    html = section.render(records)
    assert "Triad GB/s" in html and "FAILED (verification)" in html
    triad = f"{runs['np2']['figures']['triad_gb_s']:.2f}"
    assert f"<td>{triad}</td>" in html
    # the curve of the runs whose arrays are memory's, not the cache's
    assert "<svg" in html and section.figure(records[:3]) == ""
    assert section.render([]) == ""
    rows = {row.measure: row for row in streamsummary.rows(records)}
    openmpi = rows[f"Triad, openmpi, np 1-2 ({runs['np1']['meta']['cluster']['name']})"]
    assert openmpi.state == summary.BAD and openmpi.verdict == "1 of 5 FAILED"
    one, two = (r["figures"]["triad_gb_s"] for r in runs["demo"])
    assert openmpi.value == pytest.approx(max(one, two))
    assert openmpi.ratio == pytest.approx(max(one, two) / one)
    cached = streamsummary.rows([runs["mpich"]])
    assert cached[0].verdict == "arrays fit in cache" and cached[0].state == summary.WARN
    healthy = streamsummary.rows(runs["demo"])
    assert healthy[0].verdict == "all 2 verified" and healthy[0].state == summary.GOOD


def test_first_screen_compares_a_sweep_only_with_a_sweep_of_the_same_rank_counts(runs):
    """The report's "change since run N" reads an earlier row of the same key: the first
    part of one sweep (np 1 of 1-2) must not be taken for an earlier run of the whole."""
    whole = [runs["np1"], runs["np2"]]
    (part,) = streamsummary.rows(whole[:1])
    (full,) = streamsummary.rows(whole)
    (again,) = streamsummary.rows(runs["demo"][:2])
    assert part.key != full.key
    assert again.key == full.key  # the demo's np 1-2 on the same host: comparable


def test_demo_step_sweeps_the_cores_of_localhost(runs):
    records = runs["demo"]
    assert [r["figures"]["ranks"] for r in records] == list(range(1, (os.cpu_count() or 1) + 1))
    assert all(r["status"] == "ok" for r in records), [r["error"] for r in records]


STUDY = """
[study]
name = "h6-stream"
title = "STREAM against ranks"
paper = "none"
description = "Triad on 1 and 2 ranks."

[[cluster]]
name = "one"
hosts = 1

[[step]]
name = "triad"
title = "Triad against ranks"
kind = "stream"
params = { cache = "1M", ntimes = 3 }  # arrays 4 x a declared 1 MiB cache: quick
sweep = { np = [1, 2] }
"""


def test_study_step_kind_checks_values_runs_and_draws(store, tmp_path):
    (kind,) = steps.KINDS
    assert kind.name == "stream" and kind.level == "stream"
    for values, said in (
        ({"np": 0}, "np: must be at least 1"),
        ({"n": "big"}, "n: expected an integer"),
        ({"ntimes": 2.5}, "ntimes: expected an integer"),
        ({"cache": "12X"}, "cache: "),
        ({"timeout": -1}, "timeout: expected a positive number"),
        # the kernel's own ranges, asked when the file is read
        ({"ntimes": 1}, "ntimes: expected an integer from 2 to 100, got '1'"),
        ({"ntimes": 101}, "ntimes: expected an integer from 2 to 100"),
        ({"cache": "0"}, "cache: expected a byte count above 0"),
    ):
        with pytest.raises(UserError, match=f"^{said}"):
            kind.check(values)
    path = tmp_path / "h6-stream.toml"
    path.write_text(STUDY)
    study = spec.load(str(path))
    done = execute.run(study, store, cluster=local_cluster(), log=lambda line: None)
    assert done.ok and len(done.ran) == 2
    records = store.list()
    assert [r["figures"]["ranks"] for r in records] == [1, 2]
    assert all(r["status"] == "ok" and r["meta"]["study"]["name"] == "h6-stream" for r in records)
    assert page.build(study, records).count("<svg") == 2  # Triad against np; the section's


@pytest.mark.root
def test_ranks_over_the_hosts_of_a_virtual_cluster(store):
    name = f"h6{uuid.uuid4().hex[:6]}"
    try:
        cluster = vcluster.cluster_from_state(vcluster.up(vcluster.plan(name, 2, None)))
        spec = streamrun.StreamSpec(cache="1M", ntimes=3)
        records = [streamrun.run_stream(cluster, store, 2, mpi, spec) for mpi in MPIS]
    finally:
        vcluster.down(name)
    hosts = [h.name for h in cluster.hosts]
    for r in records:
        assert r["status"] == "ok", r["error"]
        assert r["figures"]["hosts"] == 2 and r["figures"]["n"] == 4 * 2**20 // 8  # 1 a host
        for s in r["samples"]:
            assert sorted(h["host"] for h in s["per_host"]) == sorted(hosts)
            assert all(h["ranks"] == 1 and h["gb_s"] > 0 for h in s["per_host"])
        assert all(f"Triad on {h}:" in streamrun.text(r) for h in hosts)
    table = section.hosts_table(records)
    assert "Per host" in table and all(f"<td>{h}</td>" in table for h in hosts)


def hpcc_output(star_triad: str, verdict: str) -> str:
    """The parts of an hpccoutf.txt bench/stream_vs_hpcc.py reads (hpcc 1.5.0's wording)."""
    return "\n".join(
        [
            "Begin of StarSTREAM section.",
            "Triad:          8.0011       0.0680       0.0503       0.0908",
            verdict,
            "End of StarSTREAM section.",
            "Begin of SingleSTREAM section.",
            "Solution Validates: avg error less than 1.000000e-13 on all three arrays",
            "End of SingleSTREAM section.",
            "Begin of Summary section.",
            "STREAM_VectorSize=16779675",
            f"StarSTREAM_Triad={star_triad}",
            "SingleSTREAM_Triad=9.34902",
        ]
    )


def test_bench_reads_hpccs_starstream_and_its_verdict(monkeypatch):
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[1] / "bench"))
    bench = importlib.import_module("stream_vs_hpcc")
    ok = "Solution Validates: avg error less than 1.000000e-13 on all three arrays"
    got = bench.parse_hpcc(hpcc_output("8.00112", ok))
    assert got == {"vector_size": 16779675, "triad": 8.00112, "validated": True}
    # a failed StarSTREAM is no figure, whatever the SingleSTREAM section after it says
    failed = bench.parse_hpcc(hpcc_output("8.00112", "Failed Validation on array a[]"))
    assert failed["validated"] is False
    with pytest.raises(RuntimeError, match="no StarSTREAM figures"):
        bench.parse_hpcc("Begin of StarSTREAM section.\n")
    # hpcc's arrays reach 4 x a 32 MiB cache: N^2 x 8 / 3 >= 128 MiB
    n = bench.hpl_n_for(4 * 2**25)
    assert n * n * 8 / 3 >= 4 * 2**25 > (n - 1) ** 2 * 8 / 3
