"""The grid's launcher (clustertune.launch.launchers finds it through the manifest): one
MPI job across the sites of a virtual grid, each site reached its own way."""

from ...grid.launcher import GridLauncher

LAUNCHERS = (GridLauncher,)
