"""The layers of src/clustertune, read from the source (the AST; nothing is imported):

(a) no level imports clustertune.cli, .demo or .report (levels are below them);
(b) a level imports another level only through that level's ``api`` module;
(c) only runner.py writes records into the Store (calls ``save``; no subclass of Store);
(d) no import cycle among the modules, counting imports inside functions, the run-time
    discovery of the level manifests and the manifests' part strings.

A part string (``section="section:render"`` in a manifest, clustertune.levels) is imported
by whoever asks for the part, ``level.part("section")``: it is an edge from each module
making that call to the module the string names. Discovery (``pkgutil.iter_modules``) is
an edge from the module that discovers to every level's package. Any other import whose
module name is computed at run time fails the test: it would hide an edge.

CLUSTERTUNE_SRC=/path/to/src/clustertune runs the same checks on another tree (an older
commit's worktree, to see them fail there).
"""

from __future__ import annotations

import ast
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import pytest

SRC = Path(os.environ.get("CLUSTERTUNE_SRC") or Path(__file__).parents[1] / "src/clustertune")
ROOT = "clustertune"
LEVELS = f"{ROOT}.levels"
ABOVE_THE_LEVELS = (f"{ROOT}.cli", f"{ROOT}.demo", f"{ROOT}.report")
# where a module name computed at run time is allowed, and why it is still counted
DYNAMIC_IMPORTS = {
    LEVELS: "Level.part: counted at each caller of .part(NAME)",
    f"{ROOT}.catalog": "discovery: counted by its iter_modules call",
}
STORE_WRITERS = (f"{ROOT}.runner", f"{ROOT}.results")
PART_STRING = re.compile(r"[\w.]+:\w+")  # "module:attribute" (a title "Grid: ..." is not)


@dataclass
class Module:
    name: str
    path: Path
    is_package: bool
    tree: ast.Module
    imports: set[str] = field(default_factory=set)  # every module it imports, anywhere
    part_calls: set[str | None] = field(default_factory=set)  # .part(NAME); None: computed
    discovers: bool = False  # calls pkgutil.iter_modules
    dynamic: list[int] = field(default_factory=list)  # lines importing a computed name


def _modules() -> dict[str, Module]:
    found = {}
    for path in sorted(SRC.rglob("*.py")):
        parts = path.relative_to(SRC.parent).with_suffix("").parts
        is_package = parts[-1] == "__init__"
        name = ".".join(parts[:-1] if is_package else parts)
        found[name] = Module(name, path, is_package, ast.parse(path.read_text(), str(path)))
    for module in found.values():
        _read_imports(module, found)
    return found


def _read_imports(module: Module, known: dict[str, Module]) -> None:
    package = module.name if module.is_package else module.name.rpartition(".")[0]
    for node in ast.walk(module.tree):
        if isinstance(node, ast.Import):
            module.imports |= {a.name for a in node.names if a.name.split(".")[0] == ROOT}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join([*base, *([node.module] if node.module else [])])
            else:
                target = node.module or ""
            if target.split(".")[0] != ROOT:
                continue
            for alias in node.names:  # `from pkg import mod` imports the module pkg.mod
                sub = f"{target}.{alias.name}"
                module.imports.add(sub if sub in known else target)
        elif isinstance(node, ast.Call):
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            constant = (
                node.args[0].value if node.args and isinstance(node.args[0], ast.Constant) else None
            )
            if called == "part" and isinstance(func, ast.Attribute):
                module.part_calls.add(constant if isinstance(constant, str) else None)
            elif called == "iter_modules":
                module.discovers = True
            elif called in ("import_module", "__import__"):
                if isinstance(constant, str) and constant.split(".")[0] == ROOT:
                    module.imports.add(constant)
                elif constant is None:
                    module.dynamic.append(node.lineno)


def _manifest_parts(module: Module) -> dict[str, list[str]]:
    """A level package's ``LEVEL = Level(...)``: part name -> the modules its strings name
    (a cluster_sources or study_kinds string included)."""
    parts: dict[str, list[str]] = {}
    for node in module.tree.body:
        if not (
            isinstance(node, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == "LEVEL" for t in node.targets)
            and isinstance(node.value, ast.Call)
        ):
            continue
        for kw in node.value.keywords:
            if isinstance(kw.value, ast.Constant) and isinstance(kw.value.value, str):
                spec = kw.value.value
                if PART_STRING.fullmatch(spec) and kw.arg:
                    parts.setdefault(kw.arg, []).append(f"{module.name}.{spec.split(':')[0]}")
    return parts


def _level_packages(modules: dict[str, Module]) -> list[Module]:
    """The level manifests: the packages and (in older trees) modules right under levels/."""
    return [m for m in modules.values() if m.name.rpartition(".")[0] == LEVELS]


def _graph(modules: dict[str, Module]) -> dict[str, set[str]]:
    manifests = _level_packages(modules)
    parts: dict[str, set[str]] = {}
    for manifest in manifests:
        for part, targets in _manifest_parts(manifest).items():
            parts.setdefault(part, set()).update(targets)
    every_part = set().union(*parts.values()) if parts else set()
    graph = {}
    for m in modules.values():
        edges = {t for t in m.imports if t in modules}
        for name in m.part_calls:
            edges |= every_part if name is None else parts.get(name, set())
        if m.discovers:
            edges |= {p.name for p in manifests}
        graph[m.name] = (edges & modules.keys()) - {m.name}
    return graph


def _level_of(name: str) -> str | None:
    """``clustertune.levels.X...`` -> X."""
    if not name.startswith(LEVELS + "."):
        return None
    return name[len(LEVELS) + 1 :].split(".")[0]


def _where(module: Module) -> str:
    return str(module.path.relative_to(SRC.parent))


@pytest.fixture(scope="module")
def modules() -> dict[str, Module]:
    assert (SRC / "levels").is_dir(), f"no clustertune source tree at {SRC}"
    return _modules()


def test_levels_do_not_import_the_layers_above_them(modules) -> None:
    bad = [
        f"{_where(m)} imports {t}"
        for m in modules.values()
        if _level_of(m.name)
        for t in sorted(m.imports)
        if any(t == above or t.startswith(above + ".") for above in ABOVE_THE_LEVELS)
    ]
    assert not bad, "\n".join(bad)


def test_a_level_imports_another_level_only_through_its_api(modules) -> None:
    bad = []
    for m in modules.values():
        mine = _level_of(m.name)
        for t in sorted(m.imports):
            other = _level_of(t)
            if mine and other and other != mine and t != f"{LEVELS}.{other}.api":
                bad.append(f"{_where(m)} imports {t}")
    assert not bad, "\n".join(bad)


def test_only_the_runner_writes_records(modules) -> None:
    """Store.save is its one writing method (results.py); a subclass could write around it."""
    bad = []
    for m in modules.values():
        if m.name in STORE_WRITERS:
            continue
        for node in ast.walk(m.tree):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "save"
            ):
                bad.append(f"{_where(m)}:{node.lineno} calls .save()")
            elif isinstance(node, ast.ClassDef) and any(
                getattr(b, "id", getattr(b, "attr", None)) == "Store" for b in node.bases
            ):
                bad.append(f"{_where(m)}:{node.lineno} subclasses Store")
    assert not bad, "\n".join(bad)


def test_no_module_imports_a_name_computed_at_run_time(modules) -> None:
    bad = [
        f"{_where(m)}:{line}"
        for m in modules.values()
        if m.name not in DYNAMIC_IMPORTS
        for line in m.dynamic
    ]
    assert not bad, "imports that hide an edge of the import graph:\n" + "\n".join(bad)


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            for nxt in edges:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        top = stack.pop()
                        on_stack.discard(top)
                        component.append(top)
                        if top == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


def _path(graph: dict[str, set[str]], component: list[str]) -> str:
    """One cycle through the component's first module, for the message."""
    inside = set(component)
    start = component[0]
    trail, seen = [start], {start}
    while True:
        nxt = sorted(graph[trail[-1]] & inside)
        step = start if start in nxt else next((n for n in nxt if n not in seen), None)
        if step is None or step == start:
            return " -> ".join([*trail, start])
        trail.append(step)
        seen.add(step)


def test_no_import_cycles(modules) -> None:
    graph = _graph(modules)
    cycles = _cycles(graph)
    assert not cycles, "\n".join(
        f"{len(c)} modules in a cycle, e.g. {_path(graph, c)}" for c in cycles
    )


def test_every_part_string_names_a_module(modules) -> None:
    missing = [
        f"{_where(m)}: {part} -> {target}"
        for m in _level_packages(modules)
        for part, targets in _manifest_parts(m).items()
        for target in targets
        if target not in modules
    ]
    assert not missing, "\n".join(missing)


def test_the_checks_see_the_edges_they_are_about(modules) -> None:
    """The graph is not empty by mistake: the CLI reaches every level's commands through
    the manifests, and the catalogue discovers every level."""
    graph = _graph(modules)
    manifests = {m.name for m in _level_packages(modules)}
    assert {f"{LEVELS}.network", f"{LEVELS}.linpack"} <= manifests
    commands = [t for m in _level_packages(modules) for t in _manifest_parts(m).get("commands", [])]
    assert commands and set(commands) <= graph[f"{ROOT}.cli"]
    assert manifests <= set().union(*(graph[m] for m in graph if modules[m].discovers))
