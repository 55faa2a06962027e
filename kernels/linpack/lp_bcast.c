/* lp_bcast.c - the six panel broadcasts along a process row, non-blocking.
 *
 * Each broadcast is compiled, per process, into a short program of phases; a phase is a
 * set of sends and receives that may start once the previous phase has completed (a
 * process forwards what it has received). lp_bcast_progress() advances the program
 * without blocking, so a process keeps forwarding panels while it updates its trailing
 * matrix (look-ahead) or waits for something else. Positions are relative to the root
 * (rel 0); "next" means rel + 1 (increasing ring).
 *   1ring   0 -> 1 -> 2 -> ... -> Q-1
 *   1ringM  0 -> 1 (the next panel's owner, does not forward); 0 -> 2 -> 3 -> ... -> Q-1
 *   2ring   0 -> 1 -> ... -> h  and  0 -> h+1 -> ... -> Q-1   (two halves)
 *   2ringM  0 -> 1; then the 2-ring over 2..Q-1
 *   long    spread: the panel is cut in Q-1 pieces, piece i goes to rel i; roll: Q-2 ring
 *           steps among rel 1..Q-1 in which every process passes on the piece it got last
 *   longM   0 -> 1 whole panel; spread-roll over 2..Q-1
 * The same programs serve the U broadcast of the "long" row swap (lp_update.c). */
#include "lp.h"

#include <sched.h>
#include <stdlib.h>
#include <string.h>

static lp_panel *registry;
static int registry_count;

void lp_progress_register(lp_panel *panels, int count)
{
    registry = panels;
    registry_count = count;
}

static void add(lp_bcprog *pr, int ph, int is_send, int peer_rel, size_t off, size_t len)
{
    if (len == 0)
        return;
    lp_bc_phase *p = &pr->phase[ph];
    int i = p->nreq++;
    p->is_send[i] = is_send;
    p->peer[i] = (peer_rel + pr->root) % pr->size;
    p->off[i] = off;
    p->len[i] = len;
    if (ph + 1 > pr->nph)
        pr->nph = ph + 1;
    if (!is_send && ph + 1 > pr->recv_phases)
        pr->recv_phases = ph + 1;
}

/* Spread-roll among the members rel lo..size-1; the root spreads from phase 0. */
static void build_spread_roll(lp_bcprog *pr, int rel, int lo, size_t count)
{
    int m = pr->size - lo;
    if (m <= 0)
        return;
#define PIECE_OFF(c) ((size_t)((double)count * (double)(c) / (double)m))
    if (rel == 0) {
        for (int c = 0; c < m; c++)
            add(pr, 0, 1, lo + c, PIECE_OFF(c), PIECE_OFF(c + 1) - PIECE_OFF(c));
        return;
    }
    if (rel < lo)
        return;
    int me = rel - lo;
    add(pr, 0, 0, 0, PIECE_OFF(me), PIECE_OFF(me + 1) - PIECE_OFF(me));
    for (int step = 1; step < m; step++) {
        int send_piece = ((me - step + 1) % m + m) % m;
        int recv_piece = ((me - step) % m + m) % m;
        int next = lo + (me + 1) % m, prev = lo + (me - 1 + m) % m;
        add(pr, step, 1, next, PIECE_OFF(send_piece), PIECE_OFF(send_piece + 1) - PIECE_OFF(send_piece));
        add(pr, step, 0, prev, PIECE_OFF(recv_piece), PIECE_OFF(recv_piece + 1) - PIECE_OFF(recv_piece));
    }
#undef PIECE_OFF
}

/* A ring covering rel first..last, fed by the root. */
static void build_ring(lp_bcprog *pr, int rel, int first, int last, size_t count)
{
    if (first > last)
        return;
    if (rel == 0) {
        add(pr, 0, 1, first, 0, count);
    } else if (rel >= first && rel <= last) {
        add(pr, 0, 0, rel == first ? 0 : rel - 1, 0, count);
        if (rel < last)
            add(pr, 1, 1, rel + 1, 0, count);
    }
}

void lp_bcprog_build(lp_bcprog *pr, int algo, int root, int rank, int size, size_t count)
{
    memset(pr->phase, 0, sizeof pr->phase);
    pr->nph = pr->recv_phases = pr->ph = 0;
    pr->root = root;
    pr->size = size;
    if (size <= 1 || count == 0)
        return;
    int rel = (rank - root + size) % size;
    switch (algo) {
    case LP_1RING:
        build_ring(pr, rel, 1, size - 1, count);
        break;
    case LP_1RINGM:
        build_ring(pr, rel, 1, 1, count);
        build_ring(pr, rel, 2, size - 1, count);
        break;
    case LP_2RING: {
        int h = (size - 1 + 1) / 2; /* first ring 1..h, second h+1..size-1 */
        build_ring(pr, rel, 1, h, count);
        build_ring(pr, rel, h + 1, size - 1, count);
        break;
    }
    case LP_2RINGM: {
        int h = 1 + (size - 2 + 1) / 2;
        build_ring(pr, rel, 1, 1, count);
        build_ring(pr, rel, 2, h, count);
        build_ring(pr, rel, h + 1, size - 1, count);
        break;
    }
    case LP_LONG:
        build_spread_roll(pr, rel, 1, count);
        break;
    default: /* LP_LONGM */
        build_ring(pr, rel, 1, 1, count);
        build_spread_roll(pr, rel, 2, count);
        break;
    }
}

static void post_phase(lp_bcprog *pr)
{
    lp_bc_phase *p = &pr->phase[pr->ph];
    for (int i = 0; i < p->nreq; i++) {
        double *at = pr->buf + p->off[i];
        if (p->is_send[i]) {
            CT_MPI_CHECK(MPI_Isend(at, (int)p->len[i], MPI_DOUBLE, p->peer[i], pr->tag, pr->comm,
                                   &pr->req[i]));
            lp_count_send((double)p->len[i] * sizeof(double));
        } else {
            CT_MPI_CHECK(MPI_Irecv(at, (int)p->len[i], MPI_DOUBLE, p->peer[i], pr->tag, pr->comm,
                                   &pr->req[i]));
        }
    }
}

void lp_bcprog_start(lp_bcprog *pr, double *buf, MPI_Comm comm, int tag)
{
    pr->buf = buf;
    pr->comm = comm;
    pr->tag = tag;
    pr->ph = 0;
    if (pr->nph > 0)
        post_phase(pr);
}

/* Advances without blocking; returns 1 once every phase has completed. */
int lp_bcprog_test(lp_bcprog *pr)
{
    while (pr->ph < pr->nph) {
        int done = 0;
        MPI_Status st[LP_BC_MAXREQ]; /* not MPI_STATUSES_IGNORE: MPICH's size annotations */
        CT_MPI_CHECK(MPI_Testall(pr->phase[pr->ph].nreq, pr->req, &done, st));
        if (!done)
            return 0;
        if (++pr->ph < pr->nph)
            post_phase(pr);
    }
    return 1;
}

int lp_bcprog_has_data(const lp_bcprog *pr) { return pr->ph >= pr->recv_phases; }

void lp_bcast_start(lp_panel *pn, const lp_problem *pb)
{
    const lp_grid *g = pb->grid;
    ct_phase_start(&lp_phases, LP_T_BCAST);
    pn->count = (size_t)pn->jb * pn->jb + pn->jb + (size_t)pn->mp * pn->jb;
    lp_bcprog_build(&pn->prog, pb->algo->bcast, pn->pcol, g->mycol, g->npcol, pn->count);
    lp_bcprog_start(&pn->prog, pn->buf, g->row, CT_TAG_LP_PANEL + pn->k % CT_TAG_LP_PANELS);
    pn->active = 1;
    pn->finished = 0;
    if (g->mycol != pn->pcol)
        pn->have_data = 0;
    lp_bcast_progress(pn);
    ct_phase_stop(&lp_phases, LP_T_BCAST);
}

void lp_bcast_progress(lp_panel *pn)
{
    if (!pn->active || pn->finished)
        return;
    int done = lp_bcprog_test(&pn->prog);
    if (!pn->have_data && lp_bcprog_has_data(&pn->prog)) {
        lp_panel_unpack(pn);
        pn->have_data = 1;
    }
    if (done)
        pn->finished = 1;
}

void lp_progress_all(void)
{
    for (int i = 0; i < registry_count; i++)
        if (registry[i].active && !registry[i].finished)
            lp_bcast_progress(&registry[i]);
}

void lp_wait_all(int count, MPI_Request *reqs) { ct_mpi_waitall(count, reqs, lp_progress_all); }

/* Called by every wait loop when a poll found nothing to do: gives the core away, which
 * costs nothing on a dedicated core and keeps oversubscribed runs (more ranks than
 * cores, as in tests) from spinning against the rank they wait for. */
void lp_idle(void) { sched_yield(); }
