"""The levels of clustertune and the one descriptor each registers.

A **level** is the unit a user measures, stores and reads back together: one entry in
the ``level`` field of every record it makes, one section of the report, one step of
``make demo``, its own commands and its own kernels. A level may cover more than one of
the papers' levels when its figures compare them: ``network`` holds the raw TCP level and
the message-passing level (MPI, PVM) because the MPI overhead is read against TCP on the
same pair (``params.layer`` tells them apart). Conversely the papers' "application level"
is several levels here (``linpack``, then ``npb``, ``qcd``), each with its own kernels.

A level is a module or package under ``clustertune/levels/`` that creates one
:class:`Level` with :func:`register` and hangs its pieces on it::

    LEVEL = register(Level("npb", "NAS Parallel Benchmarks", order=50,
                           kernels=(Kernel("ct-npb-ep", "npb"),)))

    @LEVEL.commands
    def add_commands(sub, common): ...        # its CLI commands (commands.py factories)

    @LEVEL.section
    def render(records) -> str: ...           # its report section (HTML fragment)

    @LEVEL.summary
    def rows(records) -> list[summary.Row]: ...   # its rows of the report's first screen

    @LEVEL.demo_step
    def demo(cluster, store) -> list[dict]: ...   # its step in make demo

The CLI, the report (and its first screen, clustertune.summary), the demo, the kernel finder (kernels.py) and the build
(``python -m clustertune.build``) read these descriptors; none of them names a level.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass

from ..kernels import Kernel, declare

Renderer = Callable[[list[dict]], str]
Summarizer = Callable[[list[dict]], list]  # -> list[clustertune.summary.Row]
CommandAdder = Callable[..., None]
DemoStep = Callable[..., list[dict]]


@dataclass
class Level:
    name: str  # the records' "level" field; also the report section's anchor
    title: str  # heading of the report section
    order: int  # demo and report order: cheap checks first, long measurements last
    kernels: tuple[Kernel, ...] = ()
    add_commands: CommandAdder | None = None
    render: Renderer | None = None
    summarize: Summarizer | None = None
    demo: DemoStep | None = None

    def commands(self, add: CommandAdder) -> CommandAdder:
        """Decorator: ``add(subparsers, common)`` adds the level's top-level commands."""
        self.add_commands = add
        return add

    def section(self, render: Renderer) -> Renderer:
        """Decorator: ``render(records) -> HTML`` draws the level's report section."""
        self.render = render
        return render

    def summary(self, rows: Summarizer) -> Summarizer:
        """Decorator: ``rows(records) -> [summary.Row]`` gives the level's headline rows
        of the report's first screen (each with the run it is read from)."""
        self.summarize = rows
        return rows

    def demo_step(self, step: DemoStep) -> DemoStep:
        """Decorator: ``step(cluster, store) -> records`` is the level's part of make demo."""
        self.demo = step
        return step


_LEVELS: dict[str, Level] = {}


def register(level: Level) -> Level:
    if level.name in _LEVELS:
        raise ValueError(f"level {level.name!r} registered twice")
    declare(level.kernels)
    _LEVELS[level.name] = level
    return level


def all_levels() -> list[Level]:
    """Every level, discovered by importing the modules of this package, in order."""
    for module in pkgutil.iter_modules(__path__):
        importlib.import_module(f"{__name__}.{module.name}")
    return sorted(_LEVELS.values(), key=lambda lv: (lv.order, lv.name))


__all__ = ["Kernel", "Level", "all_levels", "register"]
