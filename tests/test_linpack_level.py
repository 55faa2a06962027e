"""The Linpack level: derived figures on synthetic data with known answers, and the seeds'
HPL.dat files through the CLI on a 4-host virtual cluster (root only)."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from clirun import assert_refused_before_launch, cli

from clustertune import kernels, report
from clustertune.cluster import Cluster, Host, Site, local_cluster
from clustertune.errors import UserError
from clustertune.levels.linpack import blas, compare, section
from clustertune.levels.linpack import run as linpack
from clustertune.levels.linpack import summary as linpack_summary
from clustertune.results import Store


def test_n_for_memory_fits_and_is_a_multiple_of_nb() -> None:
    # 8 * N * (N+1) <= 0.5 * 8e8 bytes  ->  N <= 7070  ->  6912 (= 36 * 192)
    assert linpack.n_for_memory(0.5, 800_000_000, 192) == 6912
    assert linpack.n_for_memory(1.0, 8 * 101 * 102, 1) == 101
    with pytest.raises(UserError):
        linpack.n_for_memory(1.5, 10**9, 192)


def test_ranks_on_one_machine_share_its_memory() -> None:
    assert linpack.machines(local_cluster(), 8) == 1
    hosts = tuple(Host(f"h{i}", site=f"s{i % 2}") for i in range(4))
    virtual_grid = Cluster("g", hosts, (Site("s0", "grid"), Site("s1", "grid")))
    assert linpack.machines(virtual_grid, 4) == 1  # namespaces of this machine
    real = Cluster("r", hosts, (Site("s0", "slurm"), Site("s1", "slurm")))
    assert linpack.machines(real, 4) == 4


def sample(variant: str, gflops: float, passed: object, update: list[float]) -> dict:
    return {
        "variant": variant,
        "n": 100,
        "nb": 8,
        "p": 1,
        "q": 2,
        "time_s": 1.0,
        "gflops": gflops,
        "residual": 0.01,
        "passed": passed,
        "load_imbalance": 0.1,
        "phases": {"pfact": [0.1, 0.2], "update": update},
    }


def test_derive_takes_the_best_passing_run() -> None:
    samples = [
        sample("WR00L2L2", 9.0, False, [5.0, 5.0]),  # fastest but failed: ignored
        sample("WR11C2R4", 5.0, True, [0.5, 0.7]),
        sample("WR10R2C2", 4.0, True, [0.9, 0.9]),
    ]
    figures = linpack.derive(samples, None)
    assert figures["best_variant"] == "WR11C2R4"
    assert figures["phase_max_s"] == {"pfact": 0.2, "update": 0.7}
    assert linpack.derive([sample("WR00L2L2", 9.0, False, [1.0])], None) == {}


def test_unchecked_and_blown_up_residuals_are_shown_not_fatal() -> None:
    """A negative threshold skips the check ("not-verified"); a blown-up solve gives a NaN
    residual, which the kernel writes as null. Neither may break the text or the report."""
    unchecked = sample("WR11C2R4", 5.0, "not-verified", [0.5, 0.7]) | {"residual": 0.02}
    blown_up = sample("WR00L2L2", 9.0, False, [1.0, 1.0]) | {"residual": None}
    record = {
        "id": 7,
        "kernel": "ct-linpack",
        "status": "failed",
        "verification": "failed",
        "samples": [unchecked, blown_up],
        "detail": {},
        "error": "verification failed",
    }
    lines = linpack.text(record).splitlines()
    assert lines[1].endswith("resid 0.02 not checked")
    assert lines[2].endswith("resid n/a FAILED")
    html = section.lu_table([record], {})
    assert "<td>n/a</td><td>FAILED</td>" in html and "<td>0.02</td><td>not checked</td>" in html


# ------------------------------------------------------------------ seeds' HPL.dat, vcluster

DATA = Path(__file__).with_name("test_linpack_data")
SEED_FILES = ["seed000_fig11.dat", "seed000_fig12.dat", "seed001_fig9.dat", "seed001_fig10.dat"]
REDUCED_N = 288  # 4 blocks of NB=72 over P=2 rows: every rank owns a block


def with_n(source: Path, target: Path, n: int) -> Path:
    """A copy of an HPL.dat with only the value of its Ns line (line 6) rewritten."""
    lines = source.read_text().splitlines(keepends=True)
    value = lines[5].split()[0]
    assert lines[5].split()[1] == "Ns", lines[5]
    lines[5] = lines[5].replace(value, str(n).ljust(len(value)), 1)
    target.write_text("".join(lines))
    return target


def test_reduced_copy_changes_only_n(tmp_path) -> None:
    source = DATA / "seed001_fig9.dat"
    copy = with_n(source, tmp_path / "HPL.dat", REDUCED_N)
    old, new = source.read_text().splitlines(), copy.read_text().splitlines()
    assert [i for i, (a, b) in enumerate(zip(old, new, strict=True)) if a != b] == [5]
    assert new[5].split()[:2] == [str(REDUCED_N), "Ns"]


@pytest.mark.root
@pytest.mark.parametrize("mpi", ["openmpi", "mpich"])
def test_seed_hpl_dat_on_8_ranks_of_4_hosts(make_vcluster, tmp_path, mpi: str) -> None:
    """Both seeds' HPL.dat files (seeds/000 figs 11-12, seeds/001 figs 9-10), as printed
    but for N, on 8 ranks of a 4-host virtual cluster (2 ranks per host): every combination
    the file asks for runs and PASSES, and the JSON carries the results contract."""
    kernels.kernel_path("ct-linpack", mpi)  # a missing build is a UserError: fail loudly
    cluster = make_vcluster(hosts=4)
    for name in SEED_FILES:
        dat = with_n(DATA / name, tmp_path / name, REDUCED_N)
        proc = cli(
            "linpack",
            "--cluster",
            cluster.name,
            "--np",
            "8",
            "--mpi",
            mpi,
            "--dat",
            str(dat),
            "--timeout",
            "240",
            "--json",
        )
        assert proc.returncode == 0, (name, proc.stderr[-2000:])
        doc = json.loads(proc.stdout)
        assert doc["status"] == "ok" and doc["verification"] == "passed", (name, doc["error"])
        assert doc["meta"]["np"] == 8 and doc["meta"]["mpi"]["flavour"] == mpi
        # round-robin placement: ranks r and r+4 on host r, two per host
        assert doc["meta"]["hosts"] == [h.name for h in cluster.hosts]
        assert len(doc["results"]) == 5, name  # the wrapped BCAST comment: 5 depths
        for r in doc["results"]:
            assert set(r) >= set(linpack.RESULT_KEYS)
            assert (r["n"], r["nb"], r["p"], r["q"]) == (REDUCED_N, 72, 2, 4), r
            assert r["passed"] is True and r["residual"] < 16.0, r
            assert r["time_s"] > 0 and r["gflops"] > 0 and r["variant"].startswith("WR")
        assert doc["figures"]["passed"] == 5 and doc["figures"]["skipped"] == 0


# ------------------------------------------------------------------ BLAS choice, % of peak


def lu_record(cluster: str, np: int, library: str, core: str, gflops: float) -> dict:
    return {
        "kernel": "ct-linpack",
        "status": "ok",
        "params": {},
        "meta": {"cluster": {"name": cluster}, "np": np},
        "detail": {"blas": {"library": library, "core": core}},
        "samples": [sample("WR11C2R4", gflops, True, [0.1, 0.1])],
    }


def gemm_record(np: int, library: str, core: str, rates: list[tuple[str, str, float]]) -> dict:
    record = lu_record("c", np, library, core, 0.0)
    record["kernel"] = "ct-gemm"
    record["samples"] = [{"dtype": t, "mode": m, "gflops": g, "passed": True} for t, m, g in rates]
    return record


def grid_sample(p: int, q: int, gflops: float) -> dict:
    return {**sample("WR11C2R4", gflops, True, [0.1, 0.1]), "p": p, "q": q}


def test_percent_of_peak_uses_the_dgemm_of_the_same_blas_on_the_grid_ranks() -> None:
    ob, ref = "/o/libblas.so.3", "/r/libblas.so.3"
    peaks = section.dgemm_peaks(
        [
            gemm_record(
                2,
                ob,
                "Haswell",
                [
                    ("d", "local", 40.0),
                    ("d", "local", 50.0),
                    ("s", "local", 99.0),
                    ("d", "summa", 77.0),
                ],
            ),
            gemm_record(4, ob, "Haswell", [("d", "local", 60.0)]),
            gemm_record(2, ob, "SkylakeX", [("d", "local", 70.0)]),
            gemm_record(2, ref, "", [("d", "local", 5.0)]),
        ]
    )
    # best verified local DGEMM; single precision and SUMMA rates are not the peak
    lu = lu_record("c", 2, ob, "Haswell", 45.0)
    assert section.percent_of_peak(lu, grid_sample(1, 2, 45.0), peaks) == 90.0
    assert section.percent_of_peak(lu, grid_sample(2, 2, 30.0), peaks) == 50.0
    ref_lu = lu_record("c", 2, ref, "", 4.0)
    assert section.percent_of_peak(ref_lu, grid_sample(2, 1, 4.0), peaks) == 80.0
    # 4 ranks launched, a 1x2 grid computing: the peak of 2 ranks, not of the 4 launched
    wide = lu_record("c", 4, ob, "Haswell", 45.0)
    assert section.percent_of_peak(wide, grid_sample(1, 2, 45.0), peaks) == 90.0
    # another rank count, cluster or core: no peak measured, no percentage
    assert section.percent_of_peak(lu, grid_sample(2, 3, 1.0), peaks) is None
    other = lu_record("d", 2, ob, "Haswell", 1.0)
    assert section.percent_of_peak(other, grid_sample(1, 2, 1.0), peaks) is None


def demo_like(cpus: int, summa_ns: tuple[int, ...]) -> list[dict]:
    """make demo's Linpack records: an LU of 4 ranks on a 2 x 2 grid of a virtual cluster
    (the ranks on ``cpus`` CPUs), the local DGEMM of its 4 ranks and SUMMA DGEMMs on its
    grid at ``summa_ns`` (as stored at 5ba0a8d, the rates rounded)."""
    ob = "/o/libblas.so.3"
    lu = lu_record("demo", 4, ob, "SkylakeX", 4.78)
    lu["samples"][0] |= {"n": 2016, "p": 2, "q": 2}
    summa = gemm_record(4, ob, "SkylakeX", [])
    summa["samples"] = [
        {"dtype": "d", "mode": "summa", "n": n, "p": 2, "q": 2, "gflops": g, "passed": True}
        for n, g in zip(summa_ns, (16.71, 33.40), strict=False)
    ]
    records = [lu, summa, gemm_record(4, ob, "SkylakeX", [("d", "local", 101.36)])]
    for r in records:
        r["id"] = 8
        r["meta"] |= {"cluster": {"name": "demo", "launcher": "vcluster"}, "cpus": {"usable": cpus}}
    return records


def test_an_lu_whose_ranks_shared_cpus_is_not_read_against_the_local_dgemm() -> None:
    """make demo's 4 ranks on 2 CPUs: the local DGEMM's ranks never wait for a message,
    the LU's wait a scheduler slice for each, so the first screen read 0.05 of DGEMM; it
    reads the LU against the SUMMA DGEMM of the same grid and order (the same ranks,
    hosts and messages), or gives no ratio and says why; a CPU per rank: the local DGEMM."""
    (row,) = linpack_summary.rows(demo_like(2, (1000, 2016)))
    assert row.ratio == pytest.approx(4.78 / 33.40)
    assert row.reference == "SUMMA DGEMM 33.40 Gflop/s (4 ranks, 2 CPUs)"
    (row,) = linpack_summary.rows(demo_like(2, (1000,)))  # no SUMMA at the LU's order
    assert row.ratio is None and row.reference == "no ratio: 4 ranks on 2 CPUs"
    (row,) = linpack_summary.rows(demo_like(4, (1000, 2016)))
    assert row.ratio == pytest.approx(4.78 / 101.36)
    assert row.reference == "best DGEMM 101.36 Gflop/s"


def test_installed_blas_found_by_directory(tmp_path) -> None:
    for d in ("atlas", "openblas-pthread", "blas", "blis-openmp", "mkl-like"):
        (tmp_path / d).mkdir()
        (tmp_path / d / "libblas.so.3").touch()
    (tmp_path / "blis-serial").mkdir()  # no library inside: not installed
    found = blas.installed(tmp_path, listed=[tmp_path / "mkl-like", tmp_path / "atlas"])
    assert [b.name for b in found] == ["OpenBLAS", "BLIS", "ATLAS", "reference BLAS", "mkl-like"]
    assert [b.name for b in blas.select("atlas,blis-openmp", found)] == ["ATLAS", "BLIS"]
    with pytest.raises(UserError, match="not installed"):
        blas.select("blis-serial", found)


def test_squarest_grid() -> None:
    assert [blas.grid(n) for n in (1, 2, 4, 6, 8, 9, 7)] == [
        (1, 1),
        (1, 2),
        (2, 2),
        (2, 3),
        (2, 4),
        (3, 3),
        (1, 7),
    ]


def test_a_run_on_another_library_fails_its_check(tmp_path) -> None:
    chosen = blas.Blas("ATLAS", tmp_path / "atlas")
    chosen.directory.mkdir()
    chosen.library.touch()
    ok = {"detail": {"blas": {"library": str(chosen.library)}}}
    assert blas.library_check(chosen)([], ok) == {}
    other = {"detail": {"blas": {"library": "/usr/lib/x86_64-linux-gnu/openblas-pthread/x.so"}}}
    with pytest.raises(ValueError, match="openblas-pthread"):
        blas.library_check(chosen)([], other)
    missing = "exit status 127\nct-gemm: symbol lookup error: ct-gemm: undefined symbol: dgemm_"
    assert blas.failure({"status": "failed", "error": missing}) == (
        "symbol dgemm_ missing from the library"
    )


def installed_or_skip(directory: str) -> blas.Blas:
    found = [b for b in blas.installed() if b.directory.name == directory]
    if not found:
        pytest.skip(f"no BLAS in {blas.LIBDIR / directory}")
    return found[0]


@pytest.mark.parametrize("directory", ["openblas-pthread", "blis-openmp", "atlas", "blas"])
def test_blas_compare_runs_the_selected_library(directory: str, tmp_path) -> None:
    chosen = installed_or_skip(directory)
    db = str(tmp_path / "r.db")
    proc = cli(
        "blas",
        "compare",
        "--np",
        "2",
        "-N",
        "200",
        "--nb",
        "32",
        "--gemm-n",
        "96",
        "--blas",
        directory,
        "--json",
        "--db",
        db,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    variants = blas.core_variants(chosen)  # an OpenBLAS: one row per core it can run
    out = json.loads(proc.stdout)
    table = out["blas"]
    assert [row["blas"] for row in table] == [v.label for v in variants]
    # measured as the host's choice is (screened, the fastest again, each one's LU), the
    # best of these named but not stored: --blas compared a subset
    assert out["choice"]["label"] in [v.label for v in variants] and not out["stored"]
    store = Store(db)
    records = [store.get(i) for i in out["runs"]]
    stages = [r["params"]["blas_stage"] for r in records]
    assert stages.count("screen") == stages.count("lu") == len(variants)
    assert "shape" not in stages and {r["kernel"] for r in records} == {"ct-gemm", "ct-linpack"}
    for row, variant in zip(table, variants, strict=True):
        assert row["check"] == "PASSED" and not row["failed"]
        assert Path(row["library"]).parent == chosen.library.resolve().parent
        assert row["dgemm_gflops"] > 0 and row["lu_gflops"] > 0
        if variant.coretype:  # the core named is the core that ran
            assert row["core"].lower() == variant.coretype.lower()
    for r in records:  # each record names the library that ran and how it was chosen
        assert r["status"] == "ok", r["error"]
        assert Path(r["detail"]["blas"]["library"]).parent == chosen.library.resolve().parent
        assert r["meta"]["env"]["LD_LIBRARY_PATH"] == str(chosen.directory)
    html = report.build(store, [r["id"] for r in records])
    row = table[0]
    assert "DGEMM and LU per BLAS" in html and chosen.name in html
    assert f"<td>{100 * row['lu_gflops'] / row['dgemm_gflops']:.1f}</td>" in html  # % of DGEMM
    store.close()


def test_blas_missing_a_symbol_is_recorded_failed(tmp_path, store) -> None:
    if shutil.which("cc") is None:
        pytest.skip("no C compiler")
    stub = tmp_path / "stub"
    stub.mkdir()
    (tmp_path / "stub.c").write_text("void ct_not_a_blas(void) {}\n")
    cmd = ["cc", "-shared", "-fPIC", "-o", str(stub / "libblas.so.3"), str(tmp_path / "stub.c")]
    subprocess.run(cmd, check=True)
    records, chosen = compare.compare(
        local_cluster(),
        store,
        [blas.Blas("stub", stub)],
        np=1,
        mpi="openmpi",
        n=64,
        nb=16,
        gemm_n=32,
        timeout=60,
    )
    # its DGEMM failed: no LU, no choice
    assert [r["status"] for r in records] == ["failed"] and chosen is None
    (row,) = compare.rows(records)
    assert row["check"] is None and len(row["failed"]) == 1
    assert "missing from the library" in row["failed"][0], row["failed"]
    assert "FAILED" in compare.text([row])


@pytest.mark.root
def test_demo_step_on_the_4_host_cluster(make_vcluster, store) -> None:
    from clustertune import catalog
    from clustertune.levels.linpack import demo

    order = [level.name for level in catalog.all_levels()]
    assert order.index("linpack") > order.index("probe")  # after the probe in the demo
    cluster = make_vcluster(hosts=4)
    started = time.monotonic()
    records = demo.demo(cluster, store)
    assert time.monotonic() - started < 60
    assert [r["kernel"] for r in records] == ["ct-linpack", "ct-gemm", "ct-gemm"]
    assert all(r["status"] == "ok" and r["verification"] == "passed" for r in records)
    assert {s["dtype"] for s in records[1]["samples"]} == set("sdcz")
    html = report.build(store, [r["id"] for r in records])
    assert "Gflops vs np" in html
    peaks = section.dgemm_peaks(records)
    lu_rate, dgemm = records[0]["samples"][0]["gflops"], records[2]["figures"]["best_dgemm_gflops"]
    pct = section.percent_of_peak(records[0], records[0]["samples"][0], peaks)
    assert pct == pytest.approx(100 * lu_rate / dgemm)
    assert f"<td>{pct:.1f}</td>" in html  # the LU row carries its % of DGEMM
    # the first screen: where the 4 ranks share CPUs, against the SUMMA DGEMM of its
    # grid at its order, run beside it
    (row,) = linpack_summary.rows(records)
    if section.shared_cpus(records[0]):
        summa = section.summa_rate(
            records[0], records[0]["samples"][0], section.summa_rates(records)
        )
        assert summa and row.ratio == pytest.approx(lu_rate / summa)
        assert row.reference.startswith("SUMMA DGEMM")
    else:
        assert row.ratio == pytest.approx(lu_rate / dgemm)


@pytest.mark.parametrize(
    "args, named",
    [
        (["-N", "-5"], "-N"),
        (["--np", "3", "-P", "2", "-Q", "2"], "2 x 2"),
        (["--dat", "BAD_DAT"], "HPL.dat:8"),
        (["--nb", "x"], "--nb"),
    ],
)
def test_bad_input_is_one_line_before_anything_launches(tmp_path, args, named) -> None:
    """Checked by the kernel itself, without MPI: exit 2, one line naming the flag or the
    HPL.dat line, no page of HPL text or mpirun noise, nothing stored."""
    bad = tmp_path / "HPL.dat"  # the seed's file with its NBs line (line 8) unreadable
    text = (DATA / "seed000_fig11.dat").read_text().splitlines()
    bad.write_text("\n".join([*text[:7], "xx           NBs", *text[8:]]) + "\n")
    args = [str(bad) if a == "BAD_DAT" else a for a in args]
    assert_refused_before_launch(["linpack", *args], tmp_path / "r.db", named)


def test_a_core_the_caller_names_is_kept(tmp_path, monkeypatch):
    """OPENBLAS_CORETYPE in the caller's environment overrides the host's chosen BLAS
    (choice.told): the record's environment and the kernel say that core ran, and the
    record names no default choice."""
    monkeypatch.setenv("OPENBLAS_CORETYPE", "Zen")
    db = str(tmp_path / "r.db")
    proc = cli("linpack", "--np", "2", "-N", "200", "--nb", "32", "--json", "--db", db)
    assert proc.returncode == 0, proc.stderr[-2000:]
    record = Store(db).get(json.loads(proc.stdout)["id"])
    assert record["status"] == "ok", record["error"]
    assert record["meta"]["env"]["OPENBLAS_CORETYPE"] == "Zen"
    assert "blas_choice" not in record["params"]
    ran = record["detail"]["blas"].get("core")
    if ran:  # the default libblas.so.3 is an OpenBLAS: its kernels are the named core's
        assert ran.lower() == "zen"


def test_a_failed_check_shows_no_time_or_rate() -> None:
    """HPL prints a FAILED combination's Gflops; here only its residual and verdict show:
    a number that failed verification is not a result."""
    lu = {
        "variant": "WR11R2C4",
        "n": 64,
        "nb": 8,
        "p": 1,
        "q": 2,
        "time_s": 0.25,
        "gflops": 123.456,
        "residual": 7.5,
        "passed": False,
    }
    good = {**lu, "time_s": 0.5, "gflops": 4.5, "residual": 0.01, "passed": True}
    record = {
        "id": 7,
        "kernel": "ct-linpack",
        "status": "failed",
        "verification": "failed",
        "samples": [lu, good],
        "detail": {},
        "error": None,
        "params": {},
        "meta": {"np": 2, "cluster": {"name": "c"}},
    }
    text = linpack.text(record)
    assert "123.456" not in text and "0.25" not in text and "FAILED" in text
    assert "4.500 Gflops" in text
    table = section.lu_table([record], {})
    assert "123.456" not in table and "4.500" in table and "7.5" in table
    gemm = {
        **record,
        "kernel": "ct-gemm",
        "samples": [
            {
                "dtype": "d",
                "mode": "local",
                "n": 64,
                "p": 1,
                "q": 1,
                "gflops": 99.125,
                "passed": False,
            }
        ],
    }
    assert "99.125" not in linpack.gemm_text(gemm) and "FAILED" in linpack.gemm_text(gemm)
    assert "99.125" not in section.gemm_table([gemm]) and "FAILED" in section.gemm_table([gemm])
