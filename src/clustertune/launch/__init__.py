"""How a job's ranks get started: the MPI flavours and the launchers behind one interface.

mpi.py        the MPI flavours: command lines, hostfiles, root and PMI settings (imports
              nothing of clustertune but its errors: the cluster model and the kernel
              finder use it)
base.py       Job and the Launcher interface
local.py, hostfile.py, vcluster.py, slurm.py   the built-in launchers
launchers.py  launcher_for(cluster): a cluster's launcher by name
process.py, service.py, watchdog.py   running, marking and stopping what they start

This file imports nothing, so importing ``clustertune.launch.mpi`` pulls in no launcher.
"""
