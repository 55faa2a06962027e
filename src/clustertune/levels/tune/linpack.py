"""``clustertune tune linpack``: measurements turned into an HPL.dat (docs/tune.md).

Stages, each a set of stored ct-linpack / ct-gemm runs tagged ``params.tune = <session>``
and ``params.stage``:

1. BLAS: every installed libblas.so.3 and the PyPI OpenBLAS (linpack/shim.py), an OpenBLAS once
   with the core it picks itself and once with each forced core it did not pick
   (blas.variants), runs the local DGEMM (ct-gemm --local) and a small LU; a candidate whose either run is not ok
   (verification failed, wrong library loaded, could not start) is excluded; the fastest
   DGEMM of the rest by CPU time is chosen.
2. Ranks x BLAS threads: the layouts of space.layouts, each a small LU.
3. Coordinate descent at a small N (a trial of ~budget/150 s): NB, P x Q, then DEPTH,
   BCAST, SWAP, PFACT, RFACT, NBMIN, one dimension per launch (the kernel runs the lists'
   product, one sample per value); a second pass only while the first improved by more
   than the noise, and only while the budget allows (early stopping).
4. Confirmation: the best few distinct configurations at a larger N (a run of
   ~budget/10 s, at most what memory allows), the best of them chosen; the final two
   again, alternating, when within each other's noise.
5. Scale: ranks x threads and NB again at an N of ~budget/20 s with the rest of the
   confirmed configuration (the small N favours small blocks), when the budget allows.

N in the HPL.dat is the memory one (``--mem-fraction`` of the hosts' memory, a multiple of
NB), since that is the run the file is for; the confirmation N is what the budget allows.
"""

from __future__ import annotations

import math
import os
import time
import uuid
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from ...cluster import Cluster
from ...errors import UserError
from ...hostinfo import blas_choice, memory_bytes
from ...results import Store
from ..linpack import api as linpack_api  # the linpack level's; this module is tune's linpack
from . import hpldat, space
from .space import Config

# test knob: the named BLAS (directory name) gets --inject-fault, so its LU fails its
# residual check and the tuner must exclude it
INJECT_ENV = "CT_TUNE_INJECT_FAULT"
GEMM_N = 1536
BLAS_LU_N = 1200
N_MIN = 256
CONFIRM_TOP = 4
# the BLAS at scale: at most RIVALS others whose DGEMM came within RIVAL_SHARE of the
# chosen one's
RIVALS = 2
RIVAL_SHARE = 0.9
# the host's measured default BLAS (linpack/choice.py) stays the tuner's when its DGEMM
# comes this close to the fastest: the demo's tuner took PyPI OpenBLAS at 105.8 Gflop/s
# over the default's 105.7, and its figure named another core than the host's choice
HOST_DEFAULT_SHARE = 0.98
# the HPL.dat's N at least this many times the largest N the tuner measured: its NB is the
# host default's model at that N (linpack/choice.pick_nb, a default run's rule). Measured
# at 80 % of memory (N=50176, 2026-11-28): the tuner's NB 128, judged at N=11776, made
# 102.8 Gflop/s (0.913 of DGEMM); the default's NB 256 made 107.6 (0.960)
NB_MODEL_BEYOND = 2
# samples of each value in a descent sweep (-N n,n: the kernel runs the list's product
# with N outside the variants, so the values alternate): one sample at a small N is one
# tenth of a second, and a load spike in it decided PFACT/RFACT in the bench
SWEEP_SAMPLES = 2
# the values within the noise of a sweep's fastest get this many samples more each
CLOSE_SAMPLES = 3
# a confirmation launch lasts about this long (several samples of a short LU: the
# noise of a shared machine comes in spikes of a second or so), at most this many
CONFIRM_LAUNCH_S = 2.0
CONFIRM_SAMPLES = 8
LAUNCH_FLOOR_S = 60.0
# the confirmation's final two, when within each other's noise, get this many more
# launches each in alternating order (the bench's rate ratio sat at its 0.95 line)
DUEL_ROUNDS = 2


def host_default_key(host: dict | None = None) -> str | None:
    """The host's measured default BLAS (``host``: that choice as read already, else read
    now) as a candidate's key (Blas.key), None without one."""
    host = (host if host is not None else blas_choice()) or {}
    if not host.get("directory"):
        return None
    return host["directory"] + (f"#{host['coretype']}" if host.get("coretype") else "")


@dataclass
class Tuner:
    cluster: Cluster
    store: Store
    np: int
    mpi: str
    budget_s: float
    hosts: list[str] | None = None
    timeout: float = linpack_api.TIMEOUT_S
    mem_fraction: float = 0.8
    n_search: int | None = None
    n_confirm: int | None = None
    n_scale: int | None = None
    blas_filter: str | None = None
    session: str = field(default_factory=lambda: uuid.uuid4().hex[:12])
    runs: list[int] = field(default_factory=list)
    why: dict[str, str] = field(default_factory=dict)
    trials: list[tuple[Config, float]] = field(default_factory=list)
    excluded: list[str] = field(default_factory=list)
    blas_rates: dict[str, float] = field(default_factory=dict)  # by CPU time: ranking
    blas_wall: dict[str, float] = field(default_factory=dict)  # by wall clock: N for a time
    passes: int = 0
    dimensions: dict[str, tuple[int, ...]] = field(default_factory=lambda: dict(space.DIMENSIONS))
    spread: dict[str, tuple[float, float]] = field(default_factory=dict)
    noise: dict[str, str] = field(default_factory=dict)  # choices the rates did not decide
    stage_s: dict[str, float] = field(default_factory=dict)  # launch time per stage
    # the ok runs whose figures the search read, by id, with the configurations of their
    # passing samples (the session record's verification rests on them: evidence())
    kept: dict[int, tuple[dict, list[Config]]] = field(default_factory=dict)
    _blases: dict[str, linpack_api.Blas] = field(default_factory=dict)
    _t0: float = field(default_factory=time.monotonic)

    # ------------------------------------------------------------------ running

    def left(self) -> float:
        return self.budget_s - (time.monotonic() - self._t0)

    def env(self, cfg_blas: linpack_api.Blas, threads: int) -> dict[str, str]:
        env = linpack_api.environment(cfg_blas)  # an OpenBLAS candidate names its core
        t = str(threads)
        return env | {"OPENBLAS_NUM_THREADS": t, "OMP_NUM_THREADS": t, "BLIS_NUM_THREADS": t}

    def lu(
        self,
        stage: str,
        cfg: Config,
        n: int,
        extra: dict[str, str] | None = None,
        timeout: float | None = None,
    ) -> dict:
        """One ct-linpack launch of ``cfg`` at ``n``; ``extra`` replaces flags by lists
        (one sample per combination). Every passing sample becomes a trial. By default a
        launch may last the whole budget (at least LAUNCH_FLOOR_S), no longer: BLIS
        (OpenMP) with 2 threads in one rank ran an N=1536 layout launch for over 3
        minutes (1 s expected); killed, its record is not ok and the layout drops out."""
        timeout = timeout or min(self.timeout, max(LAUNCH_FLOOR_S, self.budget_s))
        kargs = cfg.kernel_args(n)
        for flag, value in (extra or {}).items():
            kargs[kargs.index(flag) + 1] = value
        blas = self.blas_of(cfg.blas)
        if os.environ.get(INJECT_ENV) in (blas.directory.name, blas.name):
            kargs.append("--inject-fault")
        began = time.monotonic()
        record = linpack_api.run_linpack(
            self.cluster,
            self.store,
            cfg.ranks,
            self.mpi,
            [*kargs, "--hpl-out", "-"],
            timeout=timeout,
            env=self.env(blas, cfg.threads),
            hosts=self.hosts,
            params=self.tag(stage, cfg, blas),
        )
        self.timed(stage, began)
        self.runs.append(record["id"])
        self.trials += self.passing(record, cfg)
        return record

    def timed(self, stage: str, began: float) -> None:
        self.stage_s[stage] = self.stage_s.get(stage, 0.0) + time.monotonic() - began

    def tag(self, stage: str, cfg: Config | None, blas: linpack_api.Blas) -> dict:
        out = {
            "tune": self.session,
            "stage": stage,
            "blas": {
                "name": blas.name,
                "directory": str(blas.directory),
                "coretype": blas.coretype,
            },
        }
        if cfg is not None:
            out["config"] = asdict(cfg)
        return out

    def passing(self, record: dict, base: Config) -> list[tuple[Config, float]]:
        """The trials of an ok run (its samples that passed), which the search then uses."""
        if record["status"] != "ok":
            return []
        got = [
            (space.from_sample(base, s), s["gflops"])
            for s in record["samples"]
            if s.get("passed") is True and "variant" in s
        ]
        if got:
            self.kept[record["id"]] = (record, [c for c, _ in got])
        return got

    def evidence(self, final: Config) -> tuple[list[dict], list[dict]]:
        """What the session's choice rests on (runner.Run.rests_on): every run whose
        figures the search read, and those of them that ran ``final`` after the search
        (the confirmation or the scale stage)."""
        kept = [record for record, _ in self.kept.values()]
        chosen = [
            record
            for record, configs in self.kept.values()
            if record["params"].get("stage") in ("confirm", "scale") and final in configs
        ]
        return kept, chosen

    def best_of(self, record: dict, base: Config) -> tuple[Config, float] | None:
        got = self.passing(record, base)
        return max(got, key=lambda t: t[1]) if got else None

    # ------------------------------------------------------------------ stages

    def candidates(self) -> list[linpack_api.Blas]:
        chosen = linpack_api.select(self.blas_filter, linpack_api.available_blas())
        if not chosen:
            raise UserError("no BLAS found (install libopenblas0 or run make setup)")
        # an OpenBLAS once with the core it picks itself, once with each forced core (Debian's
        # 0.3.21 needed Haswell on a CPU newer than it knows): measured, not assumed
        chosen = linpack_api.variants(chosen)
        self._blases = {b.key: b for b in chosen}
        return chosen

    def blas_of(self, key: str) -> linpack_api.Blas:
        """A candidate by its key (Config.blas): the library's directory, ``#core`` for an
        OpenBLAS run with a named core."""
        return self._blases[key]

    def choose_blas(self) -> tuple[linpack_api.Blas, float]:
        """The fastest candidate whose DGEMM and small LU pass, ranked by the DGEMM's rate
        in CPU time (as the host's default, linpack/choice.py: at load 16 the wall-clock
        rates put BLIS 4 % above OpenBLAS, whose CPU-time rate is 10 % above BLIS's), with
        its wall-clock rate, which sizes the search's N for its time."""
        rates: dict[str, float] = {}
        wall: dict[str, float] = {}
        excluded: list[str] = []
        p, q = space.grids(self.np)[0]
        for b in self.candidates():
            gemm = self.dgemm(b, 1)
            cfg = Config(b.key, self.np, 1, nb=128, p=p, q=q)
            lu = self.lu("blas", cfg, BLAS_LU_N)
            if gemm["status"] != "ok" or lu["status"] != "ok":
                bad = gemm if gemm["status"] != "ok" else lu
                excluded.append(f"{b.label} ({bad['kernel']}: {linpack_api.failure(bad)})")
                continue
            rates[b.key], wall[b.key] = (
                linpack_api.best_cpu_rate(gemm),
                gemm["figures"]["best_dgemm_gflops"],
            )
        if not rates:
            raise UserError("no BLAS passed its checks: " + "; ".join(excluded))
        # the close ones (within half) again, best of 3 each, in reverse order: a load spike during
        # one candidate's single product must not decide between two fast libraries
        close = [d for d, r in rates.items() if r >= 0.5 * max(rates.values())]
        # an OpenBLAS's other core goes with it: the core is chosen by best of 3 each too
        # (at load 8 one product of Zen kernels measured 21.8 against 45.0 for Haswell)
        near = {self.blas_of(d).directory for d in close}
        close += [d for d in rates if d not in close and self.blas_of(d).directory in near]
        for d in close[::-1] if len(close) > 1 else []:
            again = self.dgemm(self.blas_of(d), 3)
            if again["status"] == "ok":
                rates[d] = max(rates[d], linpack_api.best_cpu_rate(again))
                wall[d] = max(wall[d], again["figures"]["best_dgemm_gflops"])
            else:
                excluded.append(f"{self.blas_of(d).label} (ct-gemm: {linpack_api.failure(again)})")
                del rates[d]
        if not rates:
            raise UserError("no BLAS passed its checks: " + "; ".join(excluded))
        best = max(rates, key=rates.__getitem__)
        which = "the fastest that passed"
        default = host_default_key()
        if (
            default in rates
            and default != best
            and rates[default] >= HOST_DEFAULT_SHARE * rates[best]
        ):
            best = default
            which = f"the host's default, within {1 - HOST_DEFAULT_SHARE:.0%} of the fastest"
        others = ", ".join(
            f"{self.blas_of(d).label} {r:.1f}" for d, r in rates.items() if d != best
        )
        self.why["blas"] = (
            f"{self.blas_of(best).label}: DGEMM {rates[best]:.1f} Gflop/s by CPU time "
            f"({wall[best]:.1f} by wall clock) on {self.np} ranks, {which}"
            + (f" (others: {others})" if others else "")
            + (f"; excluded: {'; '.join(excluded)}" if excluded else "")
        )
        self.excluded = excluded
        self.blas_rates, self.blas_wall = rates, wall
        return self.blas_of(best), wall[best]

    def dgemm(self, b: linpack_api.Blas, repeat: int) -> dict:
        """Every rank its own DGEMM (the aggregate rate), checked against the library."""
        began = time.monotonic()
        record = linpack_api.run_gemm(
            self.cluster,
            self.store,
            self.np,
            self.mpi,
            linpack_api.gemm_args(str(GEMM_N), 192, "d", repeat, True, 1, self.np),
            timeout=self.timeout,
            env=self.env(b, 1),
            params=self.tag("blas", None, b),
            derive=linpack_api.library_check(b),
            hosts=self.hosts,
        )
        self.timed("blas", began)
        self.runs.append(record["id"])
        if record["status"] == "ok":  # its rate may choose the BLAS
            self.kept[record["id"]] = (record, [])
        return record

    def cores_per_host(self) -> int:
        return os.cpu_count() or 1  # the hosts of a virtual cluster share this machine

    def layouts(self) -> list[tuple[int, int]]:
        return space.layouts(self.np, self.cores_per_host(), len(self.hosts or self.cluster.hosts))

    def choose_layout(self, blas: linpack_api.Blas, n: int, nbs: list[int]) -> tuple[Config, float]:
        """Each (ranks, threads) with every NB candidate in one launch, in two rounds of
        alternating order (the second while 70 % of the budget is left). A layout is
        judged by its best NB's median over the rounds; another layout replaces all ranks
        single-threaded (HPL's usual one, the first) only beyond the noise."""
        layouts = self.layouts()
        got: list[tuple[Config, float]] = []
        for round_ in range(2):
            if round_ and (len(layouts) < 2 or self.left() < 0.7 * self.budget_s):
                break
            for ranks, threads in layouts if round_ == 0 else layouts[::-1]:
                p, q = space.grids(ranks)[0]
                cfg = Config(blas.key, ranks, threads, nb=nbs[0], p=p, q=q)
                extra = {"--nb": ",".join(map(str, nbs))}
                got += self.passing(self.lu("layout", cfg, n, extra), cfg)
        best: dict[tuple[int, int], space.Measured] = {}
        for m in space.measured(got):  # best median first: each layout's best NB
            best.setdefault((m.cfg.ranks, m.cfg.threads), m)
        if not best:
            raise UserError("no rank/thread layout ran: see the stored runs " + self.ids())
        fastest = max(best.values(), key=lambda m: m.median)
        top = space.keep_incumbent(fastest, best.get(layouts[0]))
        if top is not fastest:
            self.noise["layout"] = (
                f"{fastest.cfg.ranks}x{fastest.cfg.threads} {fastest.text()} "
                f"against {top.text()}: within the noise, kept "
                f"{layouts[0][0]}x1"
            )
        said = ", ".join(f"{c[0]}x{c[1]} {m.median:.1f}" for c, m in best.items())
        self.why["layout"] = (
            f"{top.cfg.ranks} rank(s) x {top.cfg.threads} BLAS thread(s): {top.median:.1f} "
            f"Gflop/s at N={n}, median of the best NB of each (ranks x threads: {said})"
        )
        return top.cfg, top.median

    def launch_values(
        self, stage: str, cfg: Config, n: int, dim: str, values: list, samples: int
    ) -> list[tuple[Config, float]]:
        """The passing samples of ``values`` of one dimension around ``cfg``: one launch
        of the list (``-N n,n,..``: the kernel runs the values once per N, so the samples
        alternate), SWAP one launch per value (it is not a list in the kernel)."""
        ns = {"-N": ",".join([str(n)] * samples)}
        if dim == "swap":
            return [
                g
                for v in values
                for g in self.passing(
                    self.lu(stage, replace(cfg, swap=v), n, ns), replace(cfg, swap=v)
                )
            ]
        if dim == "grid":
            extra = {
                "-P": ",".join(str(p) for p, _ in values),
                "-Q": ",".join(str(q) for _, q in values),
            }
        else:
            extra = {space.FLAGS[dim]: ",".join(str(v) for v in values)}
        return self.passing(self.lu(stage, cfg, n, extra | ns), cfg)

    def sweep(
        self,
        stage: str,
        cfg: Config,
        n: int,
        dim: str,
        values: list,
        samples: int = SWEEP_SAMPLES,
        note: str | None = None,
    ) -> tuple[Config, float] | None:
        """One dimension around the incumbent ``cfg``. Its value is left only for one
        whose median beats it beyond the noise measured for both (space.beats); when the
        fastest does not, the values within its noise are measured again (CLOSE_SAMPLES
        more each, in reverse order; while the budget lasts) and judged on all their
        samples. What the rates still cannot decide keeps the incumbent, recorded in
        ``self.noise[note]``."""
        note = note or dim
        got = self.launch_values(stage, cfg, n, dim, values, samples)
        ms = space.measured(got)
        if not ms:
            return None
        self.noise.pop(note, None)  # an earlier pass's note is not this sweep's evidence
        mine = [m for m in ms if m.cfg == cfg]
        if mine and ms[0] is not mine[0] and not space.beats(ms[0], mine[0]) and self.left() > 0:
            close = {value(m.cfg, dim) for m in ms if not space.beats(ms[0], m)}
            again = [v for v in values if v in close][::-1]
            ms = space.measured(got + self.launch_values(stage, cfg, n, dim, again, CLOSE_SAMPLES))
            mine = [m for m in ms if m.cfg == cfg]
        best = space.keep_incumbent(ms[0], mine[0] if mine else None)
        if best is not ms[0]:
            self.noise[note] = (
                f"{value(ms[0].cfg, dim)} {ms[0].text()} against "
                f"{best.text()}: within the noise, kept "
                f"{value(cfg, dim)}"
            )
        self.spread[note] = (ms[-1].median, ms[0].median)
        return best.cfg, best.median

    def descend(self, cfg: Config, rate0: float, n: int, nbs: list[int]) -> tuple[Config, float]:
        """Coordinate descent from ``cfg`` (measured at ``rate0``). Each sweep includes
        the incumbent's own value, measured in the same launch, so the sweep's result is
        taken as is: a load that changes between launches (a shared machine) cannot make
        an older, luckier rate of the incumbent win. A second pass only if the first
        moved the configuration, and only with 30 % of the budget left (early stopping)."""
        dims: list[tuple[str, list]] = [("nb", nbs), ("grid", space.grids(cfg.ranks))]
        dims += [
            (d, [v for v in vals if d != "nbmin" or v <= min(nbs)])
            for d, vals in self.dimensions.items()
        ]
        best, rate = cfg, rate0
        for self.passes in (1, 2):
            start = best
            for dim, values in dims:
                if len(values) < 2:
                    continue
                got = self.sweep(f"search{self.passes}", best, n, dim, values)
                if got:
                    best, rate = got
            if best == start or self.left() < 0.3 * self.budget_s:
                break  # early stop: the pass changed nothing, or no time for another
        return best, rate

    def confirm(
        self, found: Config, rate: float, n: int
    ) -> tuple[Config, float, list[tuple[Config, float]]]:
        """The descent's result and the next best distinct configurations of the search
        (by median) at ``n``, each launch ~CONFIRM_LAUNCH_S long (several samples when
        one LU is shorter), in rounds of alternating order (a second round while half the
        budget is left); when the final two are within each other's noise, DUEL_ROUNDS
        more launches of each, alternating. Another configuration replaces the descent's
        result only if its median beats it beyond the noise."""
        others = [m.cfg for m in space.measured(self.trials) if m.cfg != found]
        top = [found, *others[: CONFIRM_TOP - 1]]
        samples = space.samples_for(n, rate, CONFIRM_LAUNCH_S, CONFIRM_SAMPLES)
        ns = {"-N": ",".join([str(n)] * samples)}
        got: list[tuple[Config, float]] = []
        for round_ in range(2):
            if round_ and self.left() < 0.5 * self.budget_s:
                break
            for cfg in top if round_ % 2 == 0 else top[::-1]:
                got += self.passing(self.lu("confirm", cfg, n, ns), cfg)
        ms = space.measured(got)
        if not ms:
            raise UserError("no configuration passed at the confirmation N: " + self.ids())
        if len(ms) > 1 and not space.beats(ms[0], ms[1]) and self.left() > 0:
            # the final two within each other's noise: DUEL_ROUNDS more alternating launches
            # of each, so the choice between them rests on more than a few seconds apiece
            two = [ms[0].cfg, ms[1].cfg]
            for round_ in range(DUEL_ROUNDS):
                for cfg in two if round_ % 2 else two[::-1]:
                    got += self.passing(self.lu("confirm", cfg, n, ns), cfg)
            ms = space.measured(got)
        mine = [m for m in ms if m.cfg == found]
        tied = [f"{m.cfg.code()} NB {m.cfg.nb}" for m in ms[1:] if not space.beats(ms[0], m)]
        best = space.keep_incumbent(ms[0], mine[0] if mine else None)
        if tied:
            self.noise["confirm"] = (
                f"{ms[0].cfg.code()} {ms[0].text()}; within its noise: {', '.join(tied)}"
            )
        return best.cfg, best.median, [(m.cfg, m.median) for m in ms]

    def blas_rivals(self, chosen: str) -> list[str]:
        """The candidates whose DGEMM came within RIVAL_SHARE of the chosen one's: the
        BLAS stage judged them by a product of order GEMM_N, the LU at scale may rank
        them otherwise."""
        top = self.blas_rates.get(chosen, 0.0)
        rivals = [k for k, r in self.blas_rates.items() if k != chosen and r >= RIVAL_SHARE * top]
        return sorted(rivals, key=lambda k: -self.blas_rates[k])[:RIVALS]

    def rejudge(
        self, cfg: Config, variants: list[Config], n: int, label, noise_key: str
    ) -> tuple[Config, float, str] | None:
        """The LU at ``n`` for each of ``variants`` (``cfg`` with one choice changed, ``cfg``
        itself among them): the fastest replaces ``cfg`` only beyond the noise. Returns the
        kept config, its median rate and the rates as text (``label`` names a config), or
        None when no variant passed."""
        got: list[tuple[Config, float]] = []
        for other in variants:
            got += self.passing(self.lu("scale", other, n), other)
        ms = space.measured(got)
        if not ms:
            return None
        best = space.keep_incumbent(ms[0], next((m for m in ms if m.cfg == cfg), None))
        if best is not ms[0]:
            self.noise[noise_key] = (
                f"{label(ms[0].cfg)} {ms[0].text()} against {best.text()}: "
                f"within the noise, kept {label(cfg)}"
            )
        return best.cfg, best.median, ", ".join(f"{label(m.cfg)} {m.median:.1f}" for m in ms)

    def at_scale(
        self, cfg: Config, rate: float, n: int, nbs: list[int], expect: float
    ) -> tuple[Config, float]:
        """The BLAS, ranks x threads and NB again at ``n`` (the N the budget gives a run,
        larger than the search's) with the rest of ``cfg``: the search judged them at a
        small N, where small blocks do better and the layout's verdict can differ (bench
        run 6: 1x2 chosen at N=1536 under load made 0.43 of DGEMM at N=18944 where 2x1
        made 0.94), and the BLAS by a DGEMM of order GEMM_N. Each changes only beyond the
        noise, and only when the budget has room for one sample of every value at
        ``expect`` Gflop/s (stage ``scale``)."""
        layouts = self.layouts()
        rivals = self.blas_rivals(cfg.blas)
        one = (2.0 / 3.0) * n**3 / (max(expect, 1e-3) * 1e9)
        # the BLAS step runs the incumbent again beside its rivals
        blas_runs = len(rivals) + 1 if rivals else 0
        if self.left() < (len(layouts) + len(nbs) + blas_runs) * one:
            self.why["at N"] = f"BLAS, layout and NB not re-measured at N={n} (no budget left)"
            return cfg, rate
        said = []
        if rivals:
            variants = [replace(cfg, blas=key) for key in [*rivals, cfg.blas]]
            judged = self.rejudge(
                cfg, variants, n, lambda c: self.blas_of(c.blas).label, "BLAS at N"
            )
            if judged is not None:
                cfg, rate, text = judged
                said.append(text)
        if len(layouts) > 1:
            variants = []
            for ranks, threads in layouts[::-1]:
                p, q = (cfg.p, cfg.q) if ranks == cfg.ranks else space.grids(ranks)[0]
                variants.append(replace(cfg, ranks=ranks, threads=threads, p=p, q=q))
            judged = self.rejudge(cfg, variants, n, lambda c: f"{c.ranks}x{c.threads}", "at N")
            if judged is not None:
                cfg, rate, text = judged
                said.append(text)
        nb_cfg = self.sweep("scale", cfg, n, "nb", nbs, 1, note="NB at N")
        if nb_cfg is not None:
            cfg, rate = nb_cfg
            said.append(f"NB {', '.join(map(str, nbs))}")
        self.why["at N"] = (
            f"{cfg.ranks}x{cfg.threads}, NB {cfg.nb}: {rate:.1f} Gflop/s at "
            f"N={n} (re-judged there: {'; '.join(said)})"
        )
        for key in ("BLAS at N", "at N", "NB at N"):
            if key in self.noise:
                self.why["at N"] += f"; {self.noise[key]}"
        return cfg, rate

    def spread_text(self, dim: str, n: int) -> str:
        if dim not in self.spread:
            return "not searched (one value)"
        low, high = self.spread[dim]
        out = (
            f"best median of its values at N={n} ({low:.1f}..{high:.1f} Gflop/s over them, "
            f"{100 * (high / low - 1):.0f} % apart; {self.passes} descent pass(es))"
        )
        return out + (f"; {self.noise[dim]}" if dim in self.noise else "")

    def ids(self) -> str:
        return f"runs {self.runs[0]}..{self.runs[-1]}" if self.runs else "no runs"

    # ------------------------------------------------------------------ the whole

    def nb_for_memory_n(
        self, cfg: Config, blas: linpack_api.Blas, n_measured: int, n_half: float | None
    ) -> Config:
        """``cfg`` with the NB for the HPL.dat's N where that N is far beyond every N
        measured (:data:`NB_MODEL_BEYOND`) and the BLAS is the host's default, whose
        stored rank-K rates model the LU's rate per NB at any N (choice.pick_nb); else
        ``cfg``. The search judged NB where small blocks do better: the panel's share
        of the flops falls as 1/N. The HPL.dat's settings then run once at
        ``n_measured`` (stage scale): the session rests on a run of what it chose, and
        an NB whose run does not pass is not taken."""
        n_out = self.memory_n(cfg.nb)
        if n_out < NB_MODEL_BEYOND * n_measured:
            return cfg
        host = blas_choice() or {}
        if host_default_key(host) != blas.key:
            return cfg
        allowed = linpack_api.nb_candidates(linpack_api.DEFAULT_BLOCK, n_half, n_out)
        nb = linpack_api.pick_nb(host.get("rank_k_gflops") or {}, allowed, n_out)
        if nb is None or nb == cfg.nb:
            return cfg
        modelled = replace(cfg, nb=nb)
        ran = [
            r
            for c, r in self.passing(self.lu("scale", modelled, n_measured), modelled)
            if c == modelled
        ]
        if not ran:
            self.why["NB"] = f"{cfg.nb}: NB {nb}, modelled for N={n_out}, did not pass its run"
            return cfg
        self.why["NB"] = (
            f"{nb} for N={n_out} from the host default's rank-K DGEMM rates among "
            f"{allowed} (as a default run picks it; {max(ran):.1f} Gflop/s, verified, at "
            f"N={n_measured}); the search's NB {cfg.nb} was judged at N={n_measured}"
        )
        return modelled

    def memory_n(self, nb: int) -> int:
        memory = memory_bytes()
        if memory is None:
            raise UserError("cannot read this host's memory size (/proc/meminfo)")
        total = memory * linpack_api.machines(self.cluster, self.np)
        return linpack_api.n_for_memory(self.mem_fraction, total, nb)

    def tune(self) -> dict:
        blas, dgemm = self.choose_blas()
        n_mem = self.memory_n(linpack_api.DEFAULT_BLOCK)
        step = 32 * linpack_api.DEFAULT_BLOCK // math.gcd(32, linpack_api.DEFAULT_BLOCK)
        n_small = self.n_search or space.n_for_time(
            0.5 * dgemm, max(0.05, self.budget_s / 150), step // 2, n_mem, N_MIN
        )
        self.trials.clear()
        n_half = linpack_api.network_n_half(self.store, self.cluster.name)
        nbs = linpack_api.nb_candidates(linpack_api.DEFAULT_BLOCK, n_half, n_small)
        cfg, rate0 = self.choose_layout(blas, n_small, nbs)
        best, rate = self.descend(cfg, rate0, n_small, nbs)
        n_budget = space.n_for_time(
            0.7 * dgemm, max(0.1, self.budget_s / 10), best.nb, n_mem, n_small
        )
        n_big = self.n_confirm or n_budget
        confirmed_cfg, confirmed_rate, confirmed = self.confirm(best, rate, n_big)
        # the scale stage's N: one LU ~budget/20 s, so that its ~6 launches fit the budget
        # left after a search that kept to it
        n_scale = self.n_scale or space.n_for_time(
            0.7 * dgemm, max(0.1, self.budget_s / 20), best.nb, n_mem, n_small
        )
        final, final_rate = self.at_scale(confirmed_cfg, confirmed_rate, n_scale, nbs, 0.7 * dgemm)
        if final.blas != blas.key:  # the LU at scale preferred another BLAS
            blas, dgemm = self.blas_of(final.blas), self.blas_wall[final.blas]
            self.why["blas"] += f"; at N={n_scale} the LU chose {blas.label} (see at N)"
        final = self.nb_for_memory_n(final, blas, max(n_big, n_scale), n_half)
        n_out = max(final.nb, self.memory_n(final.nb))
        env = self.env(blas, final.threads)
        self.why["env"] = " ".join(f"{k}={v}" for k, v in env.items()) + " (run the HPL.dat so)"
        self.explain(
            final, best, rate, n_small, n_big, confirmed_rate, confirmed, nbs, n_half, n_out
        )
        return {
            "session": self.session,
            "config": asdict(final),
            "blas": blas.label,
            "blas_directory": str(blas.directory),
            "blas_coretype": blas.coretype,
            # the host's measured default (linpack/choice.py), if any, that the report
            # sets the tuner's own BLAS judgement beside
            "host_blas": {
                k: (blas_choice() or {}).get(k) for k in ("label", "directory", "coretype")
            },
            "env": env,
            "n": n_out,
            "n_search": n_small,
            "n_confirm": n_big,
            "gflops_search": rate,
            "gflops_confirm": confirmed_rate,
            "config_confirmed": asdict(confirmed_cfg),
            "n_scale": n_scale,
            "gflops_scale": final_rate,
            "dgemm_gflops": dgemm,
            "passes": self.passes,
            "why": self.why,
            "excluded": self.excluded,
            "blas_rates": self.blas_rates,
            "confirmed": [(c.code(), c.nb, c.p, c.q, r) for c, r in confirmed],
            "within_noise": self.noise,
            "runs": list(self.runs),
            "stage_s": self.stage_s,
            "hpl_dat": hpldat.text(final, n_out),
        }

    def explain(
        self, final, best, rate, n_small, n_big, final_rate, confirmed, nbs, n_half, n_out
    ) -> None:
        net = (
            f"panel blocks >= n_half {n_half / 1024:.0f} KiB of the stored MPI ping-pong"
            if n_half
            else "no network record for this cluster: not filtered by n_half"
        )
        self.why["N"] = (
            f"{n_out}: {self.mem_fraction:.0%} of the hosts' memory, a multiple of "
            f"NB (searched at N={n_small}, confirmed at N={n_big})"
        )
        self.why.setdefault(  # set already where the NB is modelled at the HPL.dat's N
            "NB",
            f"{final.nb} among {nbs} (fractions of a {linpack_api.DEFAULT_BLOCK} DGEMM k-block; {net})",
        )
        self.why["PxQ"] = f"{final.p}x{final.q} among {space.grids(final.ranks)}"
        for dim in self.dimensions:
            self.why[dim.upper()] = f"{getattr(final, dim)}: " + self.spread_text(dim, n_small)
        self.why["NB"] += "; " + self.spread_text("nb", n_small)
        self.why["PxQ"] += "; " + self.spread_text("grid", n_small)
        self.why["confirm"] = (
            f"{final.code()} at {final_rate:.1f} Gflop/s (median), of {len(confirmed)} confirmed "
            f"at N={n_big} (search's result {best.code()} {rate:.1f} Gflop/s at N={n_small})"
        )
        for key in ("layout", "confirm"):
            if key in self.noise and key in self.why:
                self.why[key] += f"; {self.noise[key]}"


def value(cfg: Config, dim: str):
    """The value of one searched dimension (the grid as (P, Q))."""
    return (cfg.p, cfg.q) if dim == "grid" else getattr(cfg, dim)


def write(path: Path, text: str) -> None:
    try:
        path.write_text(text)
    except OSError as exc:
        raise UserError(f"--out {path}: {exc.strerror}") from None
