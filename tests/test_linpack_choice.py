"""The host's default BLAS (levels/linpack/choice.py): measured with a checked DGEMM, a
wrong library never chosen, stored by CPU / ISA / library versions and reused, measured
again when the key changes; a default ``clustertune linpack`` runs it and takes NB and
the grid from its measurement."""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from clirun import cli

from clustertune import hostinfo
from clustertune.cli import build_parser
from clustertune.cluster import local_cluster
from clustertune.levels.linpack import blas as blaslib
from clustertune.levels.linpack import choice, compare, jobs, section
from clustertune.levels.linpack import run as linpack
from clustertune.levels.linpack import summary as linpack_summary
from clustertune.levels.tune import summary as tune_summary
from clustertune.results import Store

# a "BLAS" that returns at once without computing: the fastest of all, and wrong
FAKE_BLAS = """
void dgemm_(void) {} void dtrsm_(void) {} void dger_(void) {} void dgemv_(void) {}
void dtrsv_(void) {} void dscal_(void) {} void dswap_(void) {} int idamax_(void) { return 1; }
void sgemm_(void) {} void cgemm_(void) {} void zgemm_(void) {}
"""


def fake_blas(where: Path, extra: str = "") -> blaslib.Blas:
    where.mkdir(exist_ok=True)
    source = where / "fake.c"
    source.write_text(FAKE_BLAS + extra)
    subprocess.run(
        ["cc", "-shared", "-fPIC", "-o", str(where / "libblas.so.3"), str(source)], check=True
    )
    return blaslib.Blas("fake", where)


def openblas() -> blaslib.Blas:
    found = [b for b in blaslib.installed() if blaslib.own_core(b.library)]
    if not found:
        pytest.skip("no OpenBLAS installed")
    return blaslib.core_variants(found[0])[0]


@pytest.fixture
def small(monkeypatch, tmp_path):
    """A private choice cache and small products (the test measures in seconds)."""
    monkeypatch.setenv(hostinfo.BLAS_CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.setattr(choice, "SCREEN_N", 256)
    monkeypatch.setattr(choice, "FINAL_N", 320)
    monkeypatch.setattr(choice, "SHAPE_N", 320)
    monkeypatch.setattr(choice, "SHAPE_KS", (32, 64))
    monkeypatch.setattr(choice, "CHECK_N", 256)
    monkeypatch.setattr(choice, "CHECK_NB", 32)


def test_a_wrong_blas_is_never_chosen_and_the_choice_is_reused_until_its_key_changes(
    small, monkeypatch, tmp_path, store
) -> None:
    fake, good = fake_blas(tmp_path / "fake"), openblas()
    monkeypatch.setattr(choice, "candidates", lambda: [fake, good])
    chosen = choice.resolve(local_cluster(), store, 2, "openmpi", None, log=lambda _: None)
    assert chosen is not None and chosen["how"] == "measured"
    # the fake's products are wrong: its DGEMM fails its check, whatever its speed
    assert chosen["directory"] == str(good.directory) and chosen["coretype"] == good.coretype
    assert fake.key in chosen["excluded"] and fake.key not in chosen["rates"]["screen"]
    assert chosen["version"].startswith("OpenBLAS") and chosen["rank_k_gflops"].keys() == {
        "32",
        "64",
    }
    stored = json.loads((tmp_path / "cache" / "blas-choice.json").read_text())
    (entry,) = stored.values()
    key = entry["key"]
    assert key["cpu"] == hostinfo.cpu_info()["model"] and key["isa"] == hostinfo.cpu_info()["isa"]
    assert set(key["libraries"]) == {str(fake.directory), str(good.directory)}
    assert key["libraries"][str(good.directory)]["version"] == chosen["version"]

    # the next run reuses it without measuring
    def no_run(*args, **kwargs):
        raise AssertionError("measured again")

    gemm_job, cpu_info = jobs.gemm_job, hostinfo.cpu_info  # the choice measures through it
    monkeypatch.setattr(jobs, "gemm_job", no_run)
    again = choice.resolve(local_cluster(), store, 2, "openmpi", None)
    assert again["how"] == "stored" and again["directory"] == chosen["directory"]
    # another ISA (another CPU's key) is not this one's choice: measured anew
    other = dict(hostinfo.cpu_info(), isa=["sse4_2"])
    monkeypatch.setattr(hostinfo, "cpu_info", lambda: other)
    with pytest.raises(AssertionError, match="measured again"):
        choice.resolve(local_cluster(), store, 2, "openmpi", None, log=lambda _: None)
    monkeypatch.setattr(hostinfo, "cpu_info", cpu_info)
    monkeypatch.setattr(jobs, "gemm_job", gemm_job)
    # nor is a changed library: rebuilt (another file), it is measured again
    changed = fake_blas(tmp_path / "fake", "void spare_(void) {}\n")
    monkeypatch.setattr(choice, "candidates", lambda: [changed, good])
    third = choice.resolve(local_cluster(), store, 2, "openmpi", None, log=lambda _: None)
    assert third["how"] == "measured" and third["directory"] == str(good.directory)
    assert len(json.loads((tmp_path / "cache" / "blas-choice.json").read_text())) == 2


# a BLAS whose DGEMM is right (OpenBLAS's, through its CBLAS interface) and whose
# triangular solve does nothing: its DGEMM passes every check, only a solve can catch it
WRONG_SOLVE_BLAS = """
enum { COL_MAJOR = 102, NO_TRANS = 111, TRANS = 112 };
void cblas_dgemm(int, int, int, int, int, int, double, const double *, int,
                 const double *, int, double, double *, int);
static int op(const char *t) { return *t == 'N' || *t == 'n' ? NO_TRANS : TRANS; }
void dgemm_(const char *ta, const char *tb, const int *m, const int *n, const int *k,
            const double *alpha, const double *a, const int *lda, const double *b,
            const int *ldb, const double *beta, double *c, const int *ldc) {
    cblas_dgemm(COL_MAJOR, op(ta), op(tb), *m, *n, *k, *alpha, a, *lda, b, *ldb, *beta, c, *ldc);
}
void dtrsm_(void) {}
"""
OPENBLAS_SO = Path("/usr/lib/x86_64-linux-gnu/libopenblas.so.0")
REFERENCE_BLAS = Path("/usr/lib/x86_64-linux-gnu/blas")


def wrong_solve_and_reference(where: Path) -> tuple[blaslib.Blas, blaslib.Blas]:
    """WRONG_SOLVE_BLAS built in ``where``, and the reference BLAS."""
    if not OPENBLAS_SO.exists() or not (REFERENCE_BLAS / "libblas.so.3").exists():
        pytest.skip("needs Debian's libopenblas0 and libblas3")
    where.mkdir()
    (where / "wrong.c").write_text(WRONG_SOLVE_BLAS)
    library, source = where / "libblas.so.3", where / "wrong.c"
    build = ["cc", "-shared", "-fPIC", "-o", str(library), str(source), str(OPENBLAS_SO)]
    subprocess.run(build, check=True)
    return blaslib.Blas("wrong solve", where), blaslib.Blas("reference", REFERENCE_BLAS)


def test_a_blas_whose_dgemm_passes_but_whose_lu_fails_its_residual_is_never_chosen(
    small, monkeypatch, tmp_path, store
) -> None:
    """The fast candidate computes DGEMM right (its rate is OpenBLAS's) but solves wrong;
    the only correct one is the reference BLAS, 10x slower. Only the LU's scaled-residual
    check stands between the wrong one and the choice."""
    wrong, reference = wrong_solve_and_reference(tmp_path / "wrong-solve")
    monkeypatch.setattr(choice, "candidates", lambda: [wrong, reference])
    chosen = choice.resolve(local_cluster(), store, 2, "openmpi", None, log=lambda _: None)
    assert chosen is not None and chosen["directory"] == str(REFERENCE_BLAS)
    # its DGEMM passed and ranked first; its LU failed the residual check
    screen = chosen["rates"]["screen"]
    assert screen[wrong.key] > screen[reference.key]
    assert chosen["excluded"][wrong.key].startswith("ct-linpack: ")


def test_blas_compare_stores_the_choice_it_implies_and_never_a_wrong_solve(
    small, monkeypatch, tmp_path
) -> None:
    """Issue 23.1: `blas compare` measures as the host's choice does, the LU of every
    candidate too, and stores the choice this implies: the next run that names no BLAS
    (and `info`) takes it without measuring. The fastest candidate solves wrong: its row
    FAILED, never the choice. A comparison of some libraries only (--blas) stores none."""
    wrong, reference = wrong_solve_and_reference(tmp_path / "wrong-solve")
    monkeypatch.setattr(choice, "available_blas", lambda: [wrong, reference])
    monkeypatch.setattr(choice, "candidates", lambda: [wrong, reference])
    db = tmp_path / "r.db"

    def blas_compare(*more: str):
        argv = ["blas", "compare", "--np", "2", "-N", "256", "--nb", "32", "--db", str(db)]
        return compare.cmd_compare(build_parser().parse_args([*argv, *more]))

    # the reference BLAS's directory, on more ranks than CPUs: one per CPU, said
    cpus = os.cpu_count() or 1
    subset = blas_compare("--blas", "blas", "--np", str(cpus + 1))
    assert not subset.payload["stored"] and "not stored (--blas named a subset)" in subset.text
    assert subset.text.startswith(f"on {cpus} ranks (--np {cpus + 1}: one per CPU")
    assert hostinfo.blas_choices() == {}

    out = blas_compare()
    table = {row["directory"]: row for row in out.payload["blas"]}
    bad, good = table[str(wrong.directory)], table[str(REFERENCE_BLAS)]
    assert bad["dgemm_cpu_gflops"] > good["dgemm_cpu_gflops"] and bad["check"] == "FAILED"
    assert good["check"] == "PASSED" and good["lu_gflops"] > 0
    assert out.status == 1  # a library failed: said by the exit status
    assert out.payload["stored"] and "chosen: reference, stored" in out.text

    def no_run(*args, **kwargs):
        raise AssertionError("measured again")

    monkeypatch.setattr(jobs, "gemm_job", no_run)
    monkeypatch.setattr(jobs, "linpack_job", no_run)
    again = choice.resolve(local_cluster(), Store(db), 2, "openmpi", None)
    assert again["how"] == "stored" and again["directory"] == str(REFERENCE_BLAS)
    assert again["excluded"][wrong.key].startswith("ct-linpack: ")
    assert again["rank_k_gflops"].keys() == {"32", "64"}  # a default run's NB comes from it
    assert hostinfo.blas_choice()["directory"] == str(REFERENCE_BLAS)  # what info shows


def load_bench(name: str):
    """A bench script as a module (bench/ is not a package)."""
    path = Path(__file__).resolve().parents[1] / "bench" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_default_linpack_bench_sets_it_against_the_best_correct_dgemm(
    monkeypatch, store
) -> None:
    """bench/tune_linpack.py --default (issue 23: the untuned `clustertune linpack --np 2
    --mem-fraction 0.8` over the best correct DGEMM of the host), the run itself at a tiny
    N; the DGEMM launches (hpcc.run_dgemm, a kernel run of its own) stubbed: every library
    whose DGEMM passed the host's choice at half the best's rate or more before the run,
    the best again after, the ratio over the higher."""
    bench = load_bench("tune_linpack")
    calls: list[str] = []

    def run_dgemm(n, np, repeat, env, timeout):
        key = env["LD_LIBRARY_PATH"] + (f"#{c}" if (c := env.get("OPENBLAS_CORETYPE")) else "")
        calls.append(key)
        return 50.0 + len(calls)  # the later, the faster: the run after is the highest

    monkeypatch.setattr(bench.hpcc, "run_dgemm", run_dgemm)
    args = argparse.Namespace(np=2, mem_fraction=0.00002, dgemm_n=256, timeout=300.0)
    figures = bench.default_vs_dgemm(args)
    host = choice.resolve(local_cluster(), store, 2, "openmpi", None)  # stored by now
    screen = {k: r for k, r in host["rates"]["screen"].items() if k not in host["excluded"]}
    measured = [k for k, r in screen.items() if r >= 0.5 * max(screen.values())]
    assert sorted(calls[:-1]) == sorted(measured) and calls[-1] in measured
    run = figures["default_run"]
    assert run["gflops"] > 0 and run["blas"] == host["label"]  # the host's choice ran
    assert run["defaults"]["grid"]["value"] == [1, 2]  # as a default run picks it
    assert figures["dgemm_after"] == 50.0 + len(calls)
    assert figures["vs_dgemm"] == pytest.approx(run["gflops"] / figures["dgemm_after"])


def stored_choice(rank_k: dict[str, float], core: str) -> dict:
    """A choice as a measurement stores it, for this host's current key."""
    found = choice.candidates()
    good = next(b for b in found if b.coretype)
    key = choice.key_of(local_cluster(), found)
    entry = {
        "name": good.name,
        "label": f"{good.name} ({core} kernels)",
        "directory": str(good.directory),
        "coretype": core,
        "version": "v-test",
        "dgemm_cpu_gflops": 1.0,
        "rank_k_gflops": rank_k,
        "key": key,
        "measured": "2026-11-27T00:00:00Z",
    }
    path = choice.cache_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({choice.digest(key): entry}))
    return entry


@pytest.mark.parametrize(
    ("rank_k", "nb"),
    [
        ({"96": 100.0, "128": 60.0, "192": 60.0, "256": 60.0}, 96),
        ({"96": 50.0, "128": 60.0, "192": 100.0, "256": 100.0}, 192),
    ],
)
def test_a_default_linpack_runs_the_stored_choice_and_takes_nb_and_grid_from_it(
    monkeypatch, tmp_path, rank_k, nb
) -> None:
    """No HPL.dat, no NB, no grid: the record names the host's chosen BLAS (library,
    version, core: the kernel ran that core), NB follows the measured rank-K rates
    (N=768 allows 96..192) and the 2 ranks of one machine run 1 x 2."""
    monkeypatch.setenv(hostinfo.BLAS_CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.delenv("OPENBLAS_CORETYPE", raising=False)
    monkeypatch.delenv("LD_LIBRARY_PATH", raising=False)
    if not any(b.coretype for b in choice.candidates()):
        pytest.skip("no OpenBLAS installed")
    stored_choice(rank_k, "SkylakeX")
    db = str(tmp_path / "r.db")
    proc = cli("linpack", "--np", "2", "-N", "768", "--json", "--db", db)
    assert proc.returncode == 0, proc.stderr[-2000:]
    record = Store(db).get(json.loads(proc.stdout)["id"])
    said = record["params"]["blas_choice"]
    assert said["how"] == "stored" and said["version"] == "v-test"
    assert said["coretype"] == "SkylakeX" == record["meta"]["env"]["OPENBLAS_CORETYPE"]
    assert record["detail"]["blas"]["core"].lower() == "skylakex"  # what the kernel ran
    (lu,) = linpack.results(record)
    assert (lu["nb"], lu["p"], lu["q"], lu["passed"]) == (nb, 1, 2, True)
    text = linpack.text(record)
    assert "SkylakeX" in text and f"nb {nb}: rank-K DGEMM" in text and "grid [1, 2]" in text
    # the report's LU table names the core that ran and that it was the host's default
    assert "(SkylakeX), host default" in section.lu_table([record], {})
    # and so does the first screen's Linpack row
    (row,) = linpack_summary.rows([record])
    assert row.figure.endswith("Gflop/s, SkylakeX core") and row.state == "good"
    assert row.verdict == "residual passed, host default BLAS"


def test_nb_weighs_the_update_rate_against_the_panel_at_n() -> None:
    rates = {"96": 80.0, "128": 90.0, "192": 95.0, "256": 96.0}
    # at a large N the panel costs little: the fastest update; at a small one, small blocks
    assert choice.pick_nb(rates, [96, 128, 192, 256], 100_000) == 256
    assert choice.pick_nb(rates, [96, 128, 192, 256], 400) == 96
    assert choice.pick_nb(rates, [192, 256], 1000) == 192  # the network's floor kept
    assert choice.pick_nb({}, [96], 1000) is None  # nothing measured: the kernel's default


def test_a_caller_that_names_a_library_or_core_is_not_overridden(monkeypatch) -> None:
    monkeypatch.delenv("OPENBLAS_CORETYPE", raising=False)
    monkeypatch.delenv("LD_LIBRARY_PATH", raising=False)
    assert not choice.told(None) and not choice.told({"OMP_NUM_THREADS": "1"})
    assert choice.told({"LD_LIBRARY_PATH": "/x"}) and choice.told({"OPENBLAS_CORETYPE": "Zen"})
    monkeypatch.setenv("OPENBLAS_CORETYPE", "Zen")
    assert choice.told(None)


@pytest.mark.parametrize(
    ("how", "said"),
    [("stored", "host default"), ("measured", "host default"), ("named", "named")],
)
def test_the_lu_table_says_host_default_only_for_a_measured_choice(how, said) -> None:
    """`--blas openblas:Haswell` is the user's choice, not the host's measured default."""
    record = {
        "id": 7,
        "status": "ok",
        "params": {"blas_choice": {"how": how, "coretype": "Haswell"}},
        "detail": {
            "blas": {
                "library": "/usr/lib/x86_64-linux-gnu/openblas-pthread/libblas.so.3",
                "core": "Haswell",
            }
        },
    }
    text = section.blas_text(record)
    assert text.endswith(f"(Haswell), {said}")
    assert ("host default" in text) == (how != "named")


def test_the_suite_never_writes_the_users_blas_choice(tmp_path_factory):
    """The suite measures into its own cache (conftest.private_blas_cache), seeded from the
    user's, so a test run leaves ~/.cache/clustertune as it found it."""
    cache = hostinfo.blas_cache_dir()
    assert cache.is_relative_to(tmp_path_factory.getbasetemp()), cache


def lu_record(
    rid: int, gflops: float, core: str | None, choice_: dict | None, tune: bool = False
) -> dict:
    """An LU record as a run stores it: one passing 1 x 2 sample, the core that ran."""
    library = "/usr/lib/x86_64-linux-gnu/openblas-pthread/libblas.so.3"
    sample = {"variant": "WR11C2R4", "n": 2016, "nb": 96, "p": 1, "q": 2, "time_s": 1.0}
    sample |= {"gflops": gflops, "residual": 0.004, "passed": True, "phases": {}}
    return {
        "id": rid,
        "kernel": "ct-linpack",
        "status": "ok",
        "verification": "passed",
        "meta": {"cluster": {"name": "demo"}, "np": 2},
        "params": ({"blas_choice": choice_} if choice_ else {}) | ({"tune": "s1"} if tune else {}),
        "detail": {"blas": {"library": library, "core": core}},
        "samples": [sample],
    }


DEFAULT = {"name": "OpenBLAS", "coretype": "SkylakeX", "how": "stored"}


@pytest.mark.parametrize(
    ("core", "said", "figure_end", "whose", "state"),
    [
        ("SkylakeX", DEFAULT, "SkylakeX core", ", host default BLAS", "good"),
        # a default run that ran another core than its choice named is not the host's best
        ("Haswell", DEFAULT, "Haswell core", "; not the host default's core SkylakeX", "warn"),
        (
            "Haswell",
            DEFAULT | {"how": "named", "coretype": "Haswell"},
            "Haswell core",
            ", BLAS named",
            "good",
        ),
        ("Haswell", None, "Haswell core", "", "good"),  # the system's own
        (None, None, "openblas-pthread", "", "good"),  # a library that says no core
    ],
)
def test_the_first_screen_names_the_blas_core_the_lu_ran_with(core, said, figure_end, whose, state):
    (row,) = linpack_summary.rows([lu_record(1, 50.0, core, said)])
    assert row.measure == "LU N=2016 1x2 (demo)" and row.figure == f"50.00 Gflop/s, {figure_end}"
    assert row.state == state and row.verdict == "residual passed" + whose


def test_the_lu_table_shows_the_newest_default_run_beside_a_faster_tuner_trial() -> None:
    """make demo stores dozens of tuner trials; the best of them (another core) is not the
    level's own figure: the demo's LU and the core it ran stay in view, outside the fold."""
    trials = [lu_record(i, 90.0 + i, "Haswell", None, tune=True) for i in range(1, 15)]
    html = section.lu_table([*trials, lu_record(20, 40.0, "SkylakeX", DEFAULT)], {})
    in_view = html.split("<details>")[0]
    assert "(SkylakeX), host default" in in_view and "104.000" in in_view  # trial 14: best
    assert ">20<" in in_view


@pytest.mark.parametrize(
    ("host", "said"),
    [
        (
            {"label": "OpenBLAS (SkylakeX kernels)", "directory": "/o", "coretype": "SkylakeX"},
            "; BLAS = host default",
        ),
        ({"label": "BLIS", "directory": "/b", "coretype": None}, "; host default BLAS BLIS"),
        ({"label": None, "directory": None, "coretype": None}, ""),  # none measured here
    ],
)
def test_the_tuned_linpack_row_names_its_blas_and_the_host_default(host, said) -> None:
    detail = {
        "config": {"p": 1, "q": 2, "nb": 192},
        "n_confirm": 4096,
        "gflops_confirm": 90.0,
        "dgemm_gflops": 100.0,
        "runs": [1, 2],
        "blas": "OpenBLAS (SkylakeX kernels)",
        "blas_directory": "/o",
        "blas_coretype": "SkylakeX",
        "host_blas": host,
    }
    row = tune_summary.linpack_row(detail, "demo")
    assert row.measure == "tuned Linpack N=4096 1x2 NB 192 (demo)"
    assert row.figure == "90.0 Gflop/s, SkylakeX core"
    assert row.verdict == "HPL.dat written, 2 runs" + said


def test_the_tuned_linpack_row_names_the_configuration_its_figure_ran() -> None:
    """The HPL.dat's NB (modelled at 80 % of memory) is not the one the confirmation's
    rate was measured with: the row names the confirmed one beside its figure."""
    detail = {
        "config": {"p": 1, "q": 2, "nb": 256},
        "config_confirmed": {"p": 1, "q": 2, "nb": 128},
        "n_confirm": 14976,
        "gflops_confirm": 100.2,
        "dgemm_gflops": 106.8,
        "runs": [1],
        "blas": "OpenBLAS (SkylakeX kernels)",
    }
    assert tune_summary.linpack_row(detail, "h").measure == "tuned Linpack N=14976 1x2 NB 128 (h)"


def test_library_facts_are_read_once_per_file_and_cpu(monkeypatch, tmp_path) -> None:
    """Every run that names no BLAS needs the facts of every installed library (the
    choice's key): read by a child once, then from the cache file, again only when the
    file or the CPU changed."""
    monkeypatch.setenv(hostinfo.BLAS_CACHE_ENV, str(tmp_path / "cache"))
    lib, fake = openblas().library, fake_blas(tmp_path / "fake").library
    changed = fake_blas(tmp_path / "changed", "void spare_(void) {}\n").library
    monkeypatch.setattr(blaslib, "_FACTS_READ", {})
    blaslib.read_facts([lib, fake])
    first = blaslib.library_facts(lib)
    assert first["core"] and first["version"].startswith("OpenBLAS")

    def no_child(*args, **kwargs):
        raise AssertionError("a child started")

    monkeypatch.setattr(blaslib.subprocess, "Popen", no_child)
    monkeypatch.setattr(blaslib, "_FACTS_READ", {})  # another process
    assert blaslib.library_facts(lib) == first and blaslib.library_facts(fake)
    monkeypatch.setattr(blaslib, "_FACTS_READ", {})
    shutil.copy(changed, fake)  # the library changed
    with pytest.raises(AssertionError, match="a child started"):
        blaslib.library_facts(fake)
    other = dict(hostinfo.cpu_info(), model="another CPU")
    monkeypatch.setattr(hostinfo, "cpu_info", lambda: other)
    with pytest.raises(AssertionError, match="a child started"):
        blaslib.library_facts(lib)


# an "OpenBLAS" built without Cooperlake kernels: named that core, it runs SkylakeX
NO_COOPERLAKE = """
#include <stdlib.h>
#include <string.h>
const char *openblas_get_corename(void) {
    const char *core = getenv("OPENBLAS_CORETYPE");
    if (!core || !*core) return "Zen";
    if (!strcmp(core, "Haswell") && getenv("CT_TEST_FAIL_HASWELL")) exit(1);
    return strcmp(core, "Cooperlake") ? core : "SkylakeX";
}
const char *openblas_get_config(void) { return "OpenBLAS test"; }
"""


def test_a_core_the_library_runs_another_core_for_is_no_candidate(monkeypatch, tmp_path) -> None:
    """PyPI's OpenBLAS 0.3.34 has no Cooperlake kernels: OPENBLAS_CORETYPE=Cooperlake runs
    its SkylakeX ones, so that candidate was a twin of the SkylakeX one whose label named
    a core that never ran (the host's choice once named it; the first screen warned that
    the core that ran was not the default's). Only the cores a library runs are kept."""
    monkeypatch.setenv(hostinfo.BLAS_CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.setattr(blaslib, "_FACTS_READ", {})
    every_isa = dict(
        hostinfo.cpu_info(), isa=sorted({f for n in blaslib.FORCED_CORES.values() for f in n})
    )
    monkeypatch.setattr(hostinfo, "cpu_info", lambda: every_isa)
    where = tmp_path / "no-cooperlake"
    where.mkdir()
    (where / "lib.c").write_text(NO_COOPERLAKE)
    cmd = ["cc", "-shared", "-fPIC", "-o", str(where / "libblas.so.3"), str(where / "lib.c")]
    subprocess.run(cmd, check=True)
    found = blaslib.core_variants(blaslib.Blas("test", where))
    assert [b.coretype for b in found] == ["Zen", "Haswell", "SkylakeX"]
    # a forced read that failed drops its core for this run only, never in the cache
    (tmp_path / "cache" / blaslib.FACTS_FILE).unlink()
    monkeypatch.setattr(blaslib, "_FACTS_READ", {})
    monkeypatch.setenv("CT_TEST_FAIL_HASWELL", "1")
    found = blaslib.core_variants(blaslib.Blas("test", where))
    assert [b.coretype for b in found] == ["Zen", "SkylakeX"]
    monkeypatch.delenv("CT_TEST_FAIL_HASWELL")
    monkeypatch.setattr(blaslib, "_FACTS_READ", {})  # another process
    found = blaslib.core_variants(blaslib.Blas("test", where))
    assert [b.coretype for b in found] == ["Zen", "Haswell", "SkylakeX"]


def test_a_facts_cache_of_another_shape_is_read_again(monkeypatch, tmp_path) -> None:
    """A cache file that is JSON but not the facts map (a list, entries that are not
    maps) is ignored and rewritten, never a TypeError in every run that names no BLAS."""
    monkeypatch.setenv(hostinfo.BLAS_CACHE_ENV, str(tmp_path))
    lib = openblas().library
    cache = tmp_path / blaslib.FACTS_FILE
    for content in ("[]", '{"stamp": 1}', "7"):
        cache.write_text(content)
        monkeypatch.setattr(blaslib, "_FACTS_READ", {})
        assert blaslib.library_facts(lib)["core"]
        assert all(isinstance(v, dict) for v in json.loads(cache.read_text()).values())
