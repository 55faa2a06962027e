"""A study file (TOML) read into a :class:`Study`, every field checked with an error that
names file:line:field (tomlfile.read), and its points listed.

    [study]
    name = "beowulf-tuning"            # what `study list|run|report` call it
    title = "..."
    paper = "seeds/002"
    reference = "ref-002.csv"          # the paper's numbers, beside this file (optional)

    [[cluster]]                        # a virtual cluster built for the study
    name = "lan"
    hosts = 2
    link = "100mbit"                   # nominal link rate per host
    faults = { host1 = "loss=2%" }     # injected per host (docs/faults.md)

    [[step]]                           # one level's measurement, swept
    name = "pingpong"
    kind = "pingpong"                  # see the levels' study_kinds
    cluster = "lan"
    mpi = ["openmpi"]                  # one point per MPI flavour
    repeat = 3                         # one point per repetition
    params = { max_size = "8M" }       # fixed
    sweep = { layer = ["tcp", "mpi"] } # one point per combination
    cases = [{ np = 1, hosts = ["host0"] }, { np = 2, hosts = ["host0"] }]  # values that
                                       # go together: one point per case (x the sweep)
    quick = { repeat = 1, params = { max_size = "64K" } }   # --quick overrides

    [[finding]]                        # a qualitative finding of the paper (findings.py)
    ...

A point is one combination of step x sweep values x MPI x repetition; its key (``step/
k=v,.../mpi/r1``) is stored in every record it makes, so a rerun skips it.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from pathlib import Path

from .. import tomlfile, vcluster
from ..errors import UserError
from ..launch import mpi as mpi_flavours
from ..units import parse_rate

BUILTIN_DIR = Path(__file__).with_name("data")
STUDY_KEYS = {"name", "title", "paper", "description", "reference"}
CLUSTER_KEYS = {
    "name",
    "hosts",
    "link",
    "faults",
    "cores",
    "quick",
    "note",
    "sites",
    "wan_link",
    "scheduler",
}
STEP_KEYS = {
    "name",
    "kind",
    "cluster",
    "mpi",
    "repeat",
    "params",
    "sweep",
    "cases",
    "quick",
    "full_only",
    "title",
}
QUICK_KEYS = {"repeat", "params", "sweep", "cases", "mpi"}


@dataclass
class ClusterSpec:
    name: str
    hosts: int
    link: str | None
    faults: dict[str, str] = field(default_factory=dict)
    cores: int = 1
    sites: int = 1
    wan_link: str | None = None
    scheduler: str | None = None  # a virtual grid: this scheduler on every site


@dataclass
class StepSpec:
    name: str
    kind: str
    cluster: str
    mpi: list[str]
    repeat: int
    params: dict
    sweep: dict[str, list]
    full_only: bool = False
    title: str = ""
    cases: list[dict] = field(default_factory=list)  # points whose values go together

    def combinations(self) -> list[dict]:
        """The values of each point that vary: one sweep combination x one case."""
        axes = list(self.sweep.items())
        combos = itertools.product(*(values for _, values in axes)) if axes else [()]
        return [
            dict(zip((k for k, _ in axes), combo, strict=True)) | case
            for combo, case in itertools.product(combos, self.cases or [{}])
        ]


@dataclass
class Point:
    step: StepSpec
    values: dict  # params | this combination of the sweep
    mpi: str
    rep: int
    key: str


@dataclass
class Study:
    name: str
    title: str
    paper: str
    description: str
    path: Path
    clusters: dict[str, ClusterSpec]
    steps: list[StepSpec]
    findings: list[dict]
    reference: Path | None
    quick: bool = False
    here: list[dict] = field(default_factory=list)  # this cluster's value of a quantity

    def points(self) -> list[Point]:
        out = []
        for step in self.steps:
            for chosen in step.combinations():
                for mpi in step.mpi:
                    for rep in range(1, step.repeat + 1):
                        part = ",".join(f"{k}={_text(v)}" for k, v in chosen.items()) or "-"
                        key = f"{step.name}/{part}/{mpi}/r{rep}"
                        out.append(Point(step, {**step.params, **chosen}, mpi, rep, key))
        return out


def _text(value: object) -> str:
    return "+".join(map(str, value)) if isinstance(value, list) else str(value)


def builtin() -> dict[str, Path]:
    """The studies shipped with clustertune, by name."""
    return {p.stem: p for p in sorted(BUILTIN_DIR.glob("*.toml"))}


def find(name_or_file: str) -> Path:
    path = Path(name_or_file)
    if path.suffix == ".toml" or path.is_file():
        if not path.is_file():
            raise UserError(f"{name_or_file}: no such study file")
        return path
    known = builtin()
    if name_or_file not in known:
        raise UserError(
            f"study {name_or_file!r}: not a built-in study ({', '.join(known)}) nor a file"
        )
    return known[name_or_file]


def load(name_or_file: str, *, quick: bool = False) -> Study:
    from .catalog import kinds  # the point kinds know their own parameters

    step_kinds = kinds()

    path = find(name_or_file)
    doc, _, fail = tomlfile.read(path, "study file")

    def text(table: str, index: int, got: dict, key: str, default: str | None = None) -> str:
        value = got.get(key, default)
        if not isinstance(value, str) or not value:
            raise fail(table, index, key, "expected a non-empty string")
        return value

    def positive(table: str, index: int, got: dict, key: str, default: int) -> int:
        value = got.get(key, default)
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise fail(table, index, key, f"expected a positive integer, got {value!r}")
        return value

    for key in doc:
        if key not in {"study", "cluster", "step", "finding", "here"}:
            raise fail("", 0, key, "unknown table (known: study, cluster, step, finding, here)")
    head = doc.get("study")
    if not isinstance(head, dict):
        raise fail("", 0, "study", "missing [study] table")
    tomlfile.known(fail, "study", 0, head, STUDY_KEYS)
    name = text("study", 0, head, "name")
    reference = None
    if "reference" in head:
        reference = path.parent / text("study", 0, head, "reference")
        if not reference.is_file():
            raise fail("study", 0, "reference", f"no such file {reference}")

    clusters: dict[str, ClusterSpec] = {}
    for i, c in enumerate(tomlfile.tables(fail, doc, "cluster")):
        tomlfile.known(fail, "cluster", i, c, CLUSTER_KEYS)
        over = c.get("quick", {}) if quick else {}
        if not isinstance(over, dict):
            raise fail("cluster", i, "quick", "expected a table")
        tomlfile.known(fail, "cluster", i, over, {"hosts", "link", "cores", "faults", "wan_link"})
        merged = {**c, **over}
        cname = text("cluster", i, c, "name")
        if cname in clusters:
            raise fail("cluster", i, "name", f"cluster {cname!r} declared twice")
        link = merged.get("link")
        if link is not None:
            try:
                parse_rate(str(link))
            except UserError as exc:
                raise fail("cluster", i, "link", str(exc)) from None
        faults = merged.get("faults", {})
        if not isinstance(faults, dict) or not all(isinstance(v, str) for v in faults.values()):
            raise fail("cluster", i, "faults", 'expected { hostN = "field=value,..." }')
        for host, spec in faults.items():
            try:
                vcluster.parse_faults(spec.split(","), f"faults.{host}")
            except UserError as exc:
                raise fail("cluster", i, "faults", str(exc)) from None
        hosts = positive("cluster", i, merged, "hosts", 2)
        scheduler = merged.get("scheduler")
        if scheduler is not None:
            from ..grid import virtual

            if scheduler not in virtual.SCHEDULERS:
                raise fail(
                    "cluster",
                    i,
                    "scheduler",
                    f"{scheduler!r}: expected one of {', '.join(virtual.SCHEDULERS)}",
                )
            if faults or hosts % positive("cluster", i, merged, "sites", 1):
                raise fail(
                    "cluster",
                    i,
                    "scheduler",
                    "a virtual grid: hosts a multiple of sites, no faults",
                )
        clusters[cname] = ClusterSpec(
            cname,
            hosts,
            link,
            dict(faults),
            positive("cluster", i, merged, "cores", 1),
            positive("cluster", i, merged, "sites", 1),
            merged.get("wan_link"),
            scheduler,
        )

    steps: list[StepSpec] = []
    for i, s in enumerate(tomlfile.tables(fail, doc, "step")):
        tomlfile.known(fail, "step", i, s, STEP_KEYS)
        sname = text("step", i, s, "name")
        if any(st.name == sname for st in steps) or "/" in sname:
            raise fail("step", i, "name", f"{sname!r}: step names are unique, without '/'")
        kind = text("step", i, s, "kind")
        if kind not in step_kinds:
            raise fail("step", i, "kind", f"{kind!r}: expected one of {', '.join(step_kinds)}")
        over = s.get("quick", {}) if quick else {}
        if not isinstance(over, dict):
            raise fail("step", i, "quick", "expected a table")
        tomlfile.known(fail, "step", i, over, QUICK_KEYS)
        cluster = s.get("cluster", next(iter(clusters), ""))
        if cluster not in clusters:
            raise fail("step", i, "cluster", f"{cluster!r} is not a [[cluster]] of this study")
        mpi = over.get("mpi", s.get("mpi", [mpi_flavours.DEFAULT.name]))
        if isinstance(mpi, str):
            mpi = [mpi]
        if not isinstance(mpi, list) or not mpi or any(m not in mpi_flavours.NAMES for m in mpi):
            raise fail("step", i, "mpi", f"expected a list of {', '.join(mpi_flavours.NAMES)}")
        params = {
            **tomlfile.typed(fail, "step", i, s, "params", dict, {}),
            **tomlfile.typed(fail, "step", i, over, "params", dict, {}),
        }
        sweep = {
            **tomlfile.typed(fail, "step", i, s, "sweep", dict, {}),
            **tomlfile.typed(fail, "step", i, over, "sweep", dict, {}),
        }
        for key, values in sweep.items():
            if not isinstance(values, list) or not values:
                raise fail("step", i, "sweep", f"{key}: expected a non-empty list of values")
        cases = over.get("cases", s.get("cases", []))
        if not isinstance(cases, list) or not all(isinstance(c, dict) and c for c in cases):
            raise fail("step", i, "cases", "expected a list of tables of values")
        allowed = step_kinds[kind].params
        for key in (*params, *sweep, *(k for c in cases for k in c)):
            if key not in allowed:
                raise fail(
                    "step",
                    i,
                    "params" if key in params else "sweep" if key in sweep else "cases",
                    f"{key!r} is not a parameter of kind {kind} "
                    f"(known: {', '.join(sorted(allowed))})",
                )
        repeat = positive("step", i, {**s, **over}, "repeat", 1)
        step = StepSpec(
            sname,
            kind,
            cluster,
            mpi,
            repeat,
            params,
            sweep,
            bool(s.get("full_only", False)),
            s.get("title", ""),
            cases,
        )
        for chosen in step.combinations():  # the kind's own checks of the values
            try:
                step_kinds[kind].check({**params, **chosen})
            except UserError as exc:
                key = str(exc).split(":", 1)[0]
                where = "sweep" if key in sweep else "cases" if key in chosen else "params"
                raise fail("step", i, where, str(exc)) from None
        steps.append(step)
    if quick:
        steps = [s for s in steps if not s.full_only]

    findings = []
    for i, f in enumerate(tomlfile.tables(fail, doc, "finding")):
        from .findings import check_spec

        # a finding may read a full-only step: "no data" in the quick variant
        if problem := check_spec(f, {st.get("name") for st in doc.get("step", [])}):
            field_name, message = problem
            raise fail("finding", i, field_name, message)
        findings.append(f)

    here = []
    for i, h in enumerate(tomlfile.tables(fail, doc, "here")):
        from .findings import check_selector

        tomlfile.known(fail, "here", i, h, {"quantity", "item", "a", "scale", "unit"})
        text("here", i, h, "quantity")
        if problem := check_selector(h.get("a"), {st.get("name") for st in doc.get("step", [])}):
            raise fail("here", i, "a", problem)
        if h["a"]["step"] in {s.name for s in steps}:  # a full-only step's: full variant only
            here.append(h)

    return Study(
        name=name,
        here=here,
        title=head.get("title", name),
        paper=head.get("paper", ""),
        description=head.get("description", ""),
        path=path,
        clusters=clusters,
        steps=steps,
        findings=findings,
        reference=reference,
        quick=quick,
    )
