"""The tuned configuration as an HPL.dat in HPL 2.x's layout (with the PMAP line), which
xhpl and ct-linpack (kernels/linpack/lp_dat.c) both read."""

from __future__ import annotations

from .space import Config

BCAST_LEGEND = "(0=1rg,1=1rM,2=2rg,3=2rM,4=Lng,5=LnM)"


def text(cfg: Config, n: int, threshold: float = 16.0, out: str = "HPL.out") -> str:
    rows = [
        (out, "output file name (if any)"),
        ("6", "device out (6=stdout,7=stderr,file)"),
        ("1", "# of problems sizes (N)"),
        (str(n), "Ns"),
        ("1", "# of NBs"),
        (str(cfg.nb), "NBs"),
        ("0", "PMAP process mapping (0=Row-,1=Column-major)"),
        ("1", "# of process grids (P x Q)"),
        (str(cfg.p), "Ps"),
        (str(cfg.q), "Qs"),
        (f"{threshold:g}", "threshold"),
        ("1", "# of panel fact"),
        (str(cfg.pfact), "PFACTs (0=left, 1=Crout, 2=Right)"),
        ("1", "# of recursive stopping criterium"),
        (str(cfg.nbmin), "NBMINs (>= 1)"),
        ("1", "# of panels in recursion"),
        (str(cfg.ndiv), "NDIVs"),
        ("1", "# of recursive panel fact."),
        (str(cfg.rfact), "RFACTs (0=left, 1=Crout, 2=Right)"),
        ("1", "# of broadcast"),
        (str(cfg.bcast), f"BCASTs {BCAST_LEGEND}"),
        ("1", "# of lookahead depth"),
        (str(cfg.depth), "DEPTHs (>=0)"),
        (str(cfg.swap), "SWAP (0=bin-exch,1=long,2=mix)"),
        ("64", "swapping threshold"),
        ("0", "L1 in (0=transposed,1=no-transposed) form"),
        ("0", "U  in (0=transposed,1=no-transposed) form"),
        ("1", "Equilibration (0=no,1=yes)"),
        ("8", "memory alignment in double (> 0)"),
    ]
    head = [
        "HPLinpack benchmark input file",
        f"clustertune tune linpack: {cfg.ranks} rank(s) x {cfg.threads} BLAS thread(s)",
    ]
    return "\n".join(head + [f"{value:<13}{label}" for value, label in rows]) + "\n"
