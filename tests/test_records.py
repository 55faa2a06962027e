"""Only the runner stores records (issue 21 item 3): a tuning session's record carries a
verification computed from the runs it rests on, a study point's tag reaches its records
through the store the runner saves to."""

import json
from dataclasses import asdict
from pathlib import Path

from clustertune.cluster import local_cluster
from clustertune.launch.process import Completed
from clustertune.levels.linpack.blas import Blas
from clustertune.levels.tune import cli, linpack, space
from clustertune.levels.tune.space import Config
from clustertune.runner import Run

CFG = Config("/x/blas", 2, 1, nb=128, p=1, q=2)


def kernel_said(*items: dict) -> Completed:
    stdout = "\n".join(json.dumps(i) for i in items)
    return Completed(["mpirun", "ct-linpack"], 0, stdout, "", 0.5, False)


def lu_run(store, stage: str, verification: str, cfg: Config = CFG) -> dict:
    """A stored ct-linpack run of the tuner's session at ``stage`` (no kernel launched):
    one passing sample of ``cfg``, and the kernel's verification."""
    sample = {
        "type": "sample",
        "variant": cfg.code(),
        "n": 512,
        "nb": cfg.nb,
        "p": cfg.p,
        "q": cfg.q,
        "depth": cfg.depth,
        "bcast": space.BCASTS[cfg.bcast],
        "swap": space.SWAPS[cfg.swap],
        "pfact": space.FACTS[cfg.pfact],
        "rfact": space.FACTS[cfg.rfact],
        "nbmin": cfg.nbmin,
        "ndiv": cfg.ndiv,
        "gflops": 3.0,
        "passed": True,
    }
    result = {"type": "result", "verification": verification, "figures": {"gflops": 3.0}}
    params = {"tune": "s1", "stage": stage, "config": asdict(cfg)}
    with Run(local_cluster(), store, level="linpack", kernel="ct-linpack", params=params) as run:
        run.add("lu", kernel_said(sample, result))
    return run.record


def tuner_that_kept(store, *runs: dict) -> linpack.Tuner:
    """A tuner whose search read ``runs`` (as its stages do, through passing)."""
    tuner = linpack.Tuner(local_cluster(), store, 2, "openmpi", 60.0)
    tuner._blases = {CFG.blas: Blas("reference", Path(CFG.blas))}
    for record in runs:
        assert tuner.passing(record, CFG), "the tuner keeps the run's trial"
    return tuner


def session(store, tuner: linpack.Tuner, runs: list[dict], tmp_path) -> dict:
    summary = {
        "session": "s1",
        "config": asdict(CFG),
        "gflops_confirm": 3.0,
        "gflops_search": 3.0,
        "dgemm_gflops": 4.0,
        "n": 1024,
        "runs": [r["id"] for r in runs],
    }
    record = cli.store_linpack(
        local_cluster(), store, tuner, summary, tmp_path / "HPL.dat", budget_min=1.0
    )
    return store.get(record["id"])


def test_a_session_whose_runs_all_verified_is_passed(store, tmp_path) -> None:
    runs = [lu_run(store, "search1", "passed"), lu_run(store, "confirm", "passed")]
    record = session(store, tuner_that_kept(store, *runs), runs, tmp_path)
    assert (record["level"], record["status"], record["verification"]) == ("tune", "ok", "passed")
    assert record["error"] is None


def test_a_session_that_kept_an_unverified_trial_fails_verification(store, tmp_path) -> None:
    """67af505 wrote "passed" by hand whatever the trials were."""
    unverified = lu_run(store, "search1", "not-verified")
    runs = [unverified, lu_run(store, "confirm", "passed")]
    record = session(store, tuner_that_kept(store, *runs), runs, tmp_path)
    assert (record["status"], record["verification"]) == ("failed", "failed")
    assert f"run {unverified['id']} it kept is ok (verification not-verified)" in record["error"]


def test_a_session_whose_choice_was_never_run_again_fails_verification(store, tmp_path) -> None:
    """Only the search's runs (no confirmation of the chosen settings): not verified."""
    runs = [lu_run(store, "search1", "passed")]
    record = session(store, tuner_that_kept(store, *runs), runs, tmp_path)
    assert (record["status"], record["verification"]) == ("failed", "failed")
    assert "the chosen settings were not run again" in record["error"]
    # another configuration confirmed is not the chosen one's confirmation
    other = lu_run(store, "confirm", "passed", cfg=space.replace(CFG, nb=64))
    tuner = tuner_that_kept(store, *runs)
    tuner.passing(other, space.replace(CFG, nb=64))
    record = session(store, tuner, [*runs, other], tmp_path)
    assert record["verification"] == "failed"


def test_a_study_tag_reaches_every_record_the_runner_stores_through_the_view(store) -> None:
    tag = {"name": "st", "point": "p1"}
    view = store.tagged(study=tag)
    first = lu_run(view, "search1", "passed")
    second = lu_run(store, "search1", "passed")
    assert view.saved == [first["id"]] and store.saved == [second["id"]]
    assert store.get(first["id"])["meta"]["study"] == tag
    assert "study" not in store.get(second["id"])["meta"]
    view.close()  # the view leaves the connection to the store that opened it
    assert store.get(first["id"])["id"] == first["id"]
