/* qcd_ckpt.c - checkpoint file of ct-qcd.
 *
 * Layout (native byte order, documented in docs/qcd.md):
 *   "CTQCD001"                       8 bytes
 *   int32 global[4]; double beta; int32 or_steps; uint64 seed; int64 sweeps_done;
 *   double plaquette                 the header (qcd_ckpt_header, field by field)
 *   double links[V][4][18]           every site in global lexicographic order (x fastest)
 *   uint64 checksum                  FNV-1a (64 bit) of every byte before it
 * The random numbers are a function of (seed, sweep number, site), so seed and
 * sweeps_done are the generator's whole state. */
#include "qcd.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static const char MAGIC[8] = {'C', 'T', 'Q', 'C', 'D', '0', '0', '1'};
#define LINKS_PER_SITE (QCD_DIM * QCD_SU3)

typedef struct {
    FILE *f;
    uint64_t hash;
    int failed;
} stream;

static void hash_bytes(stream *s, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        s->hash = (s->hash ^ b[i]) * 0x100000001b3u;
}

static void put(stream *s, const void *p, size_t n)
{
    hash_bytes(s, p, n);
    if (!s->failed && fwrite(p, 1, n, s->f) != n)
        s->failed = 1;
}

static void get(stream *s, void *p, size_t n)
{
    if (s->failed || fread(p, 1, n, s->f) != n) {
        s->failed = 1;
        memset(p, 0, n);
        return;
    }
    hash_bytes(s, p, n);
}

static void header_io(stream *s, qcd_ckpt_header *hd, int writing)
{
#define io(s, p, n) (writing ? put(s, p, n) : get(s, p, n))
    int32_t g[QCD_DIM], ors = hd->or_steps;
    int64_t done = hd->sweeps_done;
    for (int d = 0; d < QCD_DIM; d++)
        g[d] = hd->global[d];
    io(s, g, sizeof g);
    io(s, &hd->beta, sizeof hd->beta);
    io(s, &ors, sizeof ors);
    io(s, &hd->seed, sizeof hd->seed);
    io(s, &done, sizeof done);
    io(s, &hd->plaquette, sizeof hd->plaquette);
    for (int d = 0; d < QCD_DIM; d++)
        hd->global[d] = g[d];
    hd->or_steps = ors;
    hd->sweeps_done = done;
#undef io
}

/* every rank's local links in its all_global order, gathered on rank 0 at global index */
static double *gather_global(const qcd_lattice *lat, double *const *u)
{
    size_t nl = (size_t)lat->volume * LINKS_PER_SITE;
    double *mine = ct_mpi_alloc(nl * sizeof *mine, "checkpoint buffer");
    for (int64_t k = 0; k < lat->volume; k++)
        for (int mu = 0; mu < QCD_DIM; mu++)
            memcpy(mine + (size_t)k * LINKS_PER_SITE + mu * QCD_SU3,
                   u[mu] + lat->all_local[k] * QCD_SITE, QCD_SU3 * sizeof(double));
    double *all = NULL, *tmp = NULL;
    int64_t *idx = NULL;
    int *counts = NULL, *displs = NULL, *lcounts = NULL, *ldispls = NULL;
    int64_t gv = (int64_t)lat->global_volume;
    if (lat->rank == 0) {
        all = ct_mpi_alloc((size_t)gv * LINKS_PER_SITE * sizeof *all, "checkpoint field");
        tmp = ct_mpi_alloc((size_t)gv * LINKS_PER_SITE * sizeof *tmp, "checkpoint field");
        idx = ct_mpi_alloc((size_t)gv * sizeof *idx, "checkpoint index");
        counts = ct_mpi_alloc(4 * (size_t)lat->size * sizeof(int), "counts");
        displs = counts + lat->size;
        lcounts = displs + lat->size;
        ldispls = lcounts + lat->size;
        for (int r = 0; r < lat->size; r++) { /* every rank has the same local volume */
            counts[r] = (int)lat->volume;
            displs[r] = (int)(r * lat->volume);
            lcounts[r] = (int)(lat->volume * LINKS_PER_SITE);
            ldispls[r] = (int)(r * lat->volume * LINKS_PER_SITE);
        }
    }
    CT_MPI_CHECK(MPI_Gatherv(lat->all_global, (int)lat->volume, MPI_INT64_T, idx, counts, displs,
                             MPI_INT64_T, 0, lat->comm));
    CT_MPI_CHECK(MPI_Gatherv(mine, (int)nl, MPI_DOUBLE, tmp, lcounts, ldispls, MPI_DOUBLE, 0,
                             lat->comm));
    if (lat->rank == 0)
        for (int64_t k = 0; k < gv; k++)
            memcpy(all + idx[k] * LINKS_PER_SITE, tmp + k * LINKS_PER_SITE,
                   LINKS_PER_SITE * sizeof(double));
    free(mine);
    free(tmp);
    free(idx);
    free(counts);
    return all;
}

int qcd_ckpt_write(const qcd_lattice *lat, double *const *u, const qcd_ckpt_header *hd,
                   const char *path, char *err, size_t errlen)
{
    double *all = gather_global(lat, u);
    int ok = 1;
    if (lat->rank == 0) {
        char tmp[4096];
        snprintf(tmp, sizeof tmp, "%s.part", path);
        stream s = {fopen(tmp, "wb"), 0xcbf29ce484222325u, 0};
        if (!s.f) {
            snprintf(err, errlen, "--checkpoint: cannot write %s: %s", path, strerror(errno));
            ok = 0;
        } else {
            qcd_ckpt_header h = *hd;
            put(&s, MAGIC, sizeof MAGIC);
            header_io(&s, &h, 1);
            put(&s, all, (size_t)lat->global_volume * LINKS_PER_SITE * sizeof(double));
            uint64_t sum = s.hash;
            put(&s, &sum, sizeof sum);
            if (fclose(s.f) != 0 || s.failed || rename(tmp, path) != 0) {
                snprintf(err, errlen, "--checkpoint: writing %s failed: %s", path,
                         strerror(errno));
                ok = 0;
            }
        }
        free(all);
    }
    CT_MPI_CHECK(MPI_Bcast(&ok, 1, MPI_INT, 0, lat->comm));
    return ok ? 0 : -1;
}

/* opens, reads the header; the whole file when links is not NULL; checks the checksum */
static int read_file(const char *path, qcd_ckpt_header *hd, double *links, char *err,
                     size_t errlen)
{
    stream s = {fopen(path, "rb"), 0xcbf29ce484222325u, 0};
    if (!s.f) {
        snprintf(err, errlen, "--resume: cannot read %s: %s", path, strerror(errno));
        return -1;
    }
    char magic[8];
    get(&s, magic, sizeof magic);
    if (s.failed || memcmp(magic, MAGIC, sizeof magic)) {
        snprintf(err, errlen, "--resume: %s is not a ct-qcd checkpoint", path);
        fclose(s.f);
        return -1;
    }
    header_io(&s, hd, 0);
    double v = 1.0;
    for (int d = 0; d < QCD_DIM; d++)
        v *= hd->global[d] > 0 ? hd->global[d] : 0;
    if (s.failed || v <= 0 || v > 1e10) {
        snprintf(err, errlen, "--resume: %s: damaged header", path);
        fclose(s.f);
        return -1;
    }
    /* the data: into links, or through a scratch block when only checking */
    size_t total = (size_t)v * LINKS_PER_SITE, block = 1 << 16;
    double *scratch = links ? NULL : malloc(block * sizeof *scratch);
    for (size_t done = 0; done < total && !s.failed;) {
        size_t n = links ? total : (total - done < block ? total - done : block);
        get(&s, links ? links : scratch, n * sizeof(double));
        done += n;
    }
    free(scratch);
    uint64_t want = s.hash, sum = 0;
    if (!s.failed && fread(&sum, sizeof sum, 1, s.f) != 1)
        s.failed = 1;
    int extra = fgetc(s.f) != EOF;
    fclose(s.f);
    if (s.failed) {
        snprintf(err, errlen, "--resume: %s is truncated", path);
        return -1;
    }
    if (sum != want || extra) {
        snprintf(err, errlen, "--resume: %s: checksum mismatch, the file is damaged", path);
        return -1;
    }
    return 0;
}

int qcd_ckpt_read_header(const char *path, qcd_ckpt_header *hd, char *err, size_t errlen)
{
    return read_file(path, hd, NULL, err, errlen);
}

int qcd_ckpt_read(const qcd_lattice *lat, double *const *u, const char *path,
                  qcd_ckpt_header *hd, char *err, size_t errlen)
{
    int64_t gv = (int64_t)lat->global_volume;
    double *all = NULL, *ordered = NULL;
    int64_t *idx = NULL;
    int ok = 1;
    if (lat->rank == 0) {
        all = ct_mpi_alloc((size_t)gv * LINKS_PER_SITE * sizeof *all, "checkpoint field");
        ok = read_file(path, hd, all, err, errlen) == 0;
        for (int d = 0; ok && d < QCD_DIM; d++)
            if (hd->global[d] != lat->global[d]) {
                snprintf(err, errlen,
                         "--resume: %s holds a %dx%dx%dx%d lattice, the run asks for %dx%dx%dx%d",
                         path, hd->global[0], hd->global[1], hd->global[2], hd->global[3],
                         lat->global[0], lat->global[1], lat->global[2], lat->global[3]);
                ok = 0;
            }
    }
    CT_MPI_CHECK(MPI_Bcast(&ok, 1, MPI_INT, 0, lat->comm));
    if (!ok) {
        free(all);
        return -1;
    }
    CT_MPI_CHECK(MPI_Bcast(hd, (int)sizeof *hd, MPI_BYTE, 0, lat->comm));
    int *counts = NULL, *displs = NULL;
    if (lat->rank == 0) {
        idx = ct_mpi_alloc((size_t)gv * sizeof *idx, "checkpoint index");
        ordered = ct_mpi_alloc((size_t)gv * LINKS_PER_SITE * sizeof *ordered, "checkpoint field");
        counts = ct_mpi_alloc(2 * (size_t)lat->size * sizeof(int), "counts");
        displs = counts + lat->size;
        for (int r = 0; r < lat->size; r++) {
            counts[r] = (int)lat->volume;
            displs[r] = (int)(r * lat->volume);
        }
    }
    CT_MPI_CHECK(MPI_Gatherv(lat->all_global, (int)lat->volume, MPI_INT64_T, idx, counts, displs,
                             MPI_INT64_T, 0, lat->comm));
    if (lat->rank == 0) {
        for (int64_t k = 0; k < gv; k++)
            memcpy(ordered + k * LINKS_PER_SITE, all + idx[k] * LINKS_PER_SITE,
                   LINKS_PER_SITE * sizeof(double));
        for (int r = 0; r < lat->size; r++) {
            counts[r] = (int)(lat->volume * LINKS_PER_SITE);
            displs[r] = (int)(r * lat->volume * LINKS_PER_SITE);
        }
    }
    size_t nl = (size_t)lat->volume * LINKS_PER_SITE;
    double *mine = ct_mpi_alloc(nl * sizeof *mine, "checkpoint buffer");
    CT_MPI_CHECK(MPI_Scatterv(ordered, counts, displs, MPI_DOUBLE, mine, (int)nl, MPI_DOUBLE, 0,
                              lat->comm));
    for (int64_t k = 0; k < lat->volume; k++)
        for (int mu = 0; mu < QCD_DIM; mu++)
            memcpy(u[mu] + lat->all_local[k] * QCD_SITE, mine + (size_t)k * LINKS_PER_SITE + mu * QCD_SU3,
                   QCD_SU3 * sizeof(double));
    free(mine);
    free(all);
    free(ordered);
    free(idx);
    free(counts);
    return 0;
}
