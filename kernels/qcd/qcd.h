/* qcd.h - ct-qcd: SU(3) pure gauge theory (Wilson plaquette action) on a 4-D lattice
 * split over an np0 x np1 x np2 x np3 process grid, after QCDMPI (seeds/003 section 4).
 *
 * Modules (one file each, HPL style):
 *   qcd_su3.c     SU(3) algebra: products, reunitarisation, unitarity/determinant checks
 *   qcd_rng.c     Philox4x32-10 counter-based random numbers keyed to (site, link, sweep)
 *   qcd_update.c  staples, Cabibbo-Marinari heat bath (Kennedy-Pendleton), over-relaxation,
 *                 plaquette (qcd_update_body.h, built twice: baseline and qcd_update_avx.c)
 *   qcd_halo.c    geometry, ghost layers and the halo exchange (non-blocking, checksummed)
 *   qcd_ckpt.c    checkpoint file: gauge field + RNG state (seed, sweep) + checksum
 *   qcd.c         options, the sweep loop, verification, JSON output
 *
 * Conventions. Directions 0..3 = x, y, z, t; site coordinates are lexicographic with x
 * fastest. A link matrix is 18 doubles, row-major, (re, im) pairs. The checkerboard
 * parity of a site is that of the sum of its GLOBAL coordinates, so any local extent
 * works and only the global extents must be even. Every rank holds its local sites plus
 * one ghost layer on each side in every direction ("extended" lattice); ghosts of split
 * directions come from neighbour ranks, ghosts of unsplit directions are periodic copies.
 */
#ifndef QCD_H
#define QCD_H

#include "ct_mpi.h"
#include "ct_phase.h"

#include <stdint.h>

#define QCD_DIM 4
/* The four links of a site lie together (a site's staples read three of them at x and
 * at x - nu): link mu of extended site e is u[mu] + e * QCD_SITE, u[mu] = field + 18 mu. */
#define QCD_SITE (QCD_DIM * 18)
#define QCD_NC 3

/* Flops we count per link update (docs/qcd.md derives them): staple sum 2484, W = U S 198,
 * three subgroups of projection, norm, SU(2) product and row updates. QCDMPI's nominal
 * constant for QCDFlops is QCD_NOMINAL_FLOPS per heat-bath link update (seeds/003
 * section 4.2; QCDMPI does no over-relaxation). */
#define QCD_FLOPS_STAPLE 2484.0
#define QCD_FLOPS_OR 3243.0
#define QCD_FLOPS_HB 3318.0
#define QCD_NOMINAL_FLOPS 5700.0

/* Ghost regions of a rank's block: the offsets in {-1, 0, 1}^4 (base-3 index). A halo
 * message's tag is ct_mpi.h's CT_TAG_QCD_HALO + its region's index. */
#define QCD_REGIONS 81
_Static_assert(CT_TAG_QCD_HALO_END - CT_TAG_QCD_HALO == QCD_REGIONS,
               "one halo tag per ghost region");

#include "qcd_su3.h"

/* ------------------------------------------------------------------ rng (qcd_rng.c) */
/* One call: 4 x 32 random bits from (key, counter); two doubles in [0, 1). */
typedef struct {
    uint32_t c[4];
} qcd_ctr;
void qcd_philox(uint64_t seed, const qcd_ctr *ctr, uint32_t out[4]);
void qcd_uniform2(uint64_t seed, const qcd_ctr *ctr, double u[2]);
/* Four doubles in (0, 1), 32 random bits each (the heat bath's trials). */
void qcd_uniform4(uint64_t seed, const qcd_ctr *ctr, double u[4]);

/* what a random stream is for (counter word 3) */
enum { QCD_STREAM_HEATBATH = 1, QCD_STREAM_HOT = 2, QCD_STREAM_GAUGE = 3 };

/* ------------------------------------------------------------------ geometry (qcd_halo.c) */
typedef struct {
    int n;           /* sites (pairs) */
    int64_t *dst;    /* ghost sites to fill (extended index) */
    int64_t *src;    /* where from: a local or already-filled ghost site */
    int64_t *at;     /* early copies of a step whose wave w is >= 0, sorted by the group
                      * (qcd_lattice) of src: those from group g are at[g] .. at[g + 1] - 1 */
} qcd_copylist;

typedef struct {
    int region;      /* index of the ghost region (offset in {-1,0,1}^4, base 3) */
    int to, from;    /* ranks: we send to `to`, receive from `from` */
    int n;           /* sites each way (same count by symmetry) */
    int64_t *send;   /* our sites the rank `to` holds as its ghost region `region` */
    int64_t *recv;   /* our ghost sites of region `region` */
    double *sbuf, *rbuf; /* n links + one word of checksum */
} qcd_message;

typedef struct {
    int nmsg;
    qcd_message *msg;
    qcd_copylist early; /* ghosts in unsplit directions only: before the interior update */
    qcd_copylist late;  /* ghosts mixing split and unsplit directions: after the messages */
} qcd_halo_plan;

typedef struct {
    int rank, size;
    MPI_Comm comm;
    int global[QCD_DIM], grid[QCD_DIM], local[QCD_DIM], coord[QCD_DIM], origin[QCD_DIM];
    int ext[QCD_DIM];          /* local + 2 */
    int64_t stride[QCD_DIM];   /* of the extended lattice */
    int64_t next;              /* extended sites */
    int64_t volume;            /* local sites */
    double global_volume;
    int split[QCD_DIM];        /* grid[d] > 1 */
    /* local sites per parity: interior (no ghost of a split direction among the sites its
     * update reads) and boundary, as extended indices; gsite = global lexicographic index */
    int64_t nin[2], nbd[2];
    int64_t *bd[2], *gbd[2];
    /* The wave of the steps of direction mu (qcd.c, update_pair): mu itself if unsplit, else
     * an unsplit direction (t first), or -1 if every direction is split. Its local
     * coordinates 1..L are the wave's slices. If the wave is mu, a slice is cut further in
     * planes along plane[mu], the last direction other than mu (else plane[mu] = -1).
     * in[mu][p], the interior sites in the order of the steps of direction mu, go by
     * group: slice s, plane q is group s * E + q (E = ext[plane[mu]], or 1 and q = 0 without
     * planes), its sites the entries in_at[mu][p][g] .. in_at[mu][p][g + 1] - 1. */
    int wave[QCD_DIM], plane[QCD_DIM];
    int64_t *in[QCD_DIM][2], *gin[QCD_DIM][2], *in_at[QCD_DIM][2];
    int64_t *all_local, *all_global; /* every local site, both parities */
    /* the ghost sites of U_mu that an exchange or a copy fills (ascending): the only ghosts
     * of U_mu ever read */
    int64_t nghost[QCD_DIM], *ghost[QCD_DIM];
    qcd_halo_plan plan[QCD_DIM][2];  /* links of direction mu, parity p */
} qcd_lattice;

/* state of the exchanges, counters and the injected fault */
typedef struct {
    qcd_lattice *lat;
    double *const *u;          /* the four directions' links (QCD_SITE apart), extended */
    MPI_Request *req;          /* 2 per message of the largest plan */
    int overlap;               /* 0: every exchange completes before the next update */
    int injected;
    int active_mu, active_p;   /* the plan in flight, -1 when none */
    ct_phases *phases;
    long long messages, bytes; /* sent by this rank */
    int inject_fault;          /* corrupt the payload of the first message sent (once) */
    int fault_seen;            /* a checksum mismatch was found by this rank */
    char fault_text[256];
    long sweep;                /* for the fault text */
} qcd_halo;

/* Checks the layout (lattice divisible by the grid, even global extents, np); returns 0
 * or -1 with "<field>: <problem>" in err. Used before MPI starts (--check-only) too. */
int qcd_layout_check(const int global[QCD_DIM], const int grid[QCD_DIM], int np, char *err,
                     size_t errlen);
void qcd_lattice_init(qcd_lattice *lat, MPI_Comm comm, const int global[QCD_DIM],
                      const int grid[QCD_DIM]);
void qcd_lattice_free(qcd_lattice *lat);
int qcd_parity_of_ext(const qcd_lattice *lat, int64_t e); /* global parity of a site */
int64_t qcd_global_index(const qcd_lattice *lat, const int gcoord[QCD_DIM]);

void qcd_halo_init(qcd_halo *h, qcd_lattice *lat, double *const *u, ct_phases *phases);
void qcd_halo_free(qcd_halo *h);
/* post the exchange of links U_mu at parity p (after they changed), do the early copies */
void qcd_halo_start(qcd_halo *h, int mu, int p);
/* qcd_halo_start in two parts for the wave: post the messages (the boundary sites of
 * parity p are final), then the early copies from groups first .. last - 1 of the wave
 * (qcd_lattice) once they are final */
void qcd_halo_post(qcd_halo *h, int mu, int p);
void qcd_halo_copy_groups(qcd_halo *h, int mu, int p, int64_t first, int64_t last);
/* sites per wave slice of direction mu are cut in this many groups (planes, or 1) */
int qcd_groups_per_slice(const qcd_lattice *lat, int mu);
/* complete the exchange in flight (if any): wait, check, unpack, late copies */
void qcd_halo_finish(qcd_halo *h);
/* every ghost of every direction, both parities (after a start, a resume, a transform) */
void qcd_halo_refresh_all(qcd_halo *h);

/* phases of ct-qcd (ct_phase accumulators); the last two are counters, not times */
enum {
    QCD_PH_UPDATE,  /* link updates (compute) */
    QCD_PH_PLAQ,    /* plaquette measurement */
    QCD_PH_REUNIT,  /* reunitarisation */
    QCD_PH_PACK,    /* packing, checksums, unpacking, local ghost copies */
    QCD_PH_WAIT,    /* blocked waiting for messages (exposed communication) */
    QCD_PH_COMM,    /* post to completion of each exchange (the paper's comm time) */
    QCD_PH_REDUCE,  /* the per-sweep reduction of plaquette and fault flags */
    QCD_PH_COUNT
};

/* ------------------------------------------------------------------ update (qcd_update.c) */
typedef struct {
    double beta;
    uint64_t seed;
    int nhit_max; /* Kennedy-Pendleton trials before a subgroup is left unchanged */
} qcd_action;

typedef struct {
    long long kp_trials, kp_accepted, kp_given_up;
} qcd_update_stats;

/* Which build of the update runs: AVX2 (qcd_update_avx.c, no FMA) where the CPU has it,
 * unless want_baseline; returns its name ("avx2" or "baseline"). Both give the same bits. */
const char *qcd_isa(int want_baseline);

/* A part of the field to prefetch while links are updated: from p, `runs` runs of `run`
 * bytes, `gap` bytes from the end of one to the start of the next (`left` still to go in
 * the current run), `lines` cache lines per link update (qcd.c, update_slice: the wave's
 * next slice; a slice of w != t is strided). */
typedef struct {
    const char *p;
    int64_t left, run, gap, runs;
    int lines;
} qcd_stream;

/* Update U_mu on the given sites (extended indices, global indices): heat bath (hb != 0,
 * random stream keyed by hb_index) or over-relaxation; prefetching pf along (may be NULL). */
void qcd_update_sites(const qcd_lattice *lat, double *const *u, int mu, int64_t n,
                      const int64_t *site, const int64_t *gsite, const qcd_action *act,
                      int hb, long long hb_index, qcd_update_stats *st, qcd_stream *pf);

/* Local plaquette sums: Re Tr of every plaquette, spatial and temporal planes, each
 * site's sum rounded to a fixed-point integer (QCD_PLAQ_SCALE), so that the global sum
 * is exact and independent of the decomposition. */
#define QCD_PLAQ_SCALE 0x1p50
void qcd_plaquette_local(const qcd_lattice *lat, double *const *u, __int128 sum[2]);

/* Reunitarises every local link and every ghost link that is read (lat->ghost: exact
 * copies of their owners' links, so the same function gives the same result, and no
 * exchange is needed); the local links' worst |U U^+ - 1| and |det U - 1| are measured
 * just before each is reunitarised. */
void qcd_reunit_check(const qcd_lattice *lat, double *const *u, double *unit_err, double *det_err);

/* ------------------------------------------------------------------ checkpoint (qcd_ckpt.c) */
typedef struct {
    int global[QCD_DIM];
    double beta;
    int or_steps;
    uint64_t seed;
    long long sweeps_done; /* the RNG state: heat-bath passes are keyed by sweep number */
    double plaquette;      /* after the last sweep, to check the read-back */
} qcd_ckpt_header;

/* Collective. Rank 0 writes the header and every site's links in global order, then a
 * 64-bit checksum of all that precedes it; returns 0 or -1 (message in err on rank 0). */
int qcd_ckpt_write(const qcd_lattice *lat, double *const *u, const qcd_ckpt_header *hd,
                   const char *path, char *err, size_t errlen);
/* Header only, checksum verified over the whole file (no MPI; --check-only uses it). */
int qcd_ckpt_read_header(const char *path, qcd_ckpt_header *hd, char *err, size_t errlen);
/* Collective: rank 0 reads and checks, every rank gets its local links (ghosts not set). */
int qcd_ckpt_read(const qcd_lattice *lat, double *const *u, const char *path,
                  qcd_ckpt_header *hd, char *err, size_t errlen);

#endif
