/* conv_winograd.c: Winograd convolutions F(m x m, r x r) for float32 2-D convolutions (stride 1,
 * dilation 1, one group) in the three directions, all from the same transforms as exact
 * adjoints, per transform coordinate xi of the n x n tile one GEMM over channels:
 *   forward:         V = BT d B, M[xi] = U[xi] V[xi] (U = G g GT), y = AT M A;
 *   input gradient:  dM = A dy AT, dV[xi] = U[xi]^T dM[xi], dx += B dV BT (tiles overlap);
 *   filter gradient: dU[xi] = sum over tiles dM[xi] V[xi]^T, dw = GT dU G.
 * Images go 16 to a vector (one per lane): activations are packed into [channel][row][column]
 * [16 images] planes with the padding stored, so the transforms of a tile position run on
 * aligned vectors with no bounds checks, in function versions for AVX-512 and AVX2+FMA picked
 * by CPU features at first use (the library is built for generic x86-64). Tile positions go
 * in small blocks, so that V [xi][c][col] and M [xi][k][col] of a block stay in L2; the GEMMs
 * run on the worker's one thread, the forward and input-gradient ones in this file's own AVX2
 * kernel where the AVX2 transforms run (gemm_avx2), the others through OpenBLAS. */
#include "conv_winograd.h"
#include <cblas.h>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include "kernel.h"
#include "kinds.h"
#include "thread_scratch.h"

#define LANES 16
#define NN (TFC_WINO_MAX_N * TFC_WINO_MAX_N)

/* ---- the transforms, generated ---- */

/* y = x^e, with 0^0 = 1 */
static double power(double x, int e)
{
    double y = 1;
    while (e-- > 0) y *= x;
    return y;
}

/* Toom-Cook with points a_0..a_{n-2} and infinity: AT[i][j] = a_j^i, G[j][k] = a_j^k / N_j
 * (N_j = prod_{l != j} (a_j - a_l)), BT[j] = the coefficients of M(x) / (x - a_j) with
 * M(x) = prod_l (x - a_l); the infinity row and column take the leading coefficients. */
static void toom_cook(int m, int r, double *AT, double *G, double *BT)
{
    static const double points[TFC_WINO_MAX_N - 1] = {0, 1, -1, 2, -2, 0.5, -0.5};
    int n = m + r - 1, f = n - 1;
    double M[TFC_WINO_MAX_N + 1] = {1}; /* coefficients of prod (x - a_l), low first */
    for (int l = 0; l < f; l++)
        for (int i = l + 1; i >= 0; i--)
            M[i] = (i ? M[i - 1] : 0) - points[l] * M[i];
    memset(AT, 0, sizeof(double) * (size_t)(m * n));
    memset(G, 0, sizeof(double) * (size_t)(n * r));
    memset(BT, 0, sizeof(double) * (size_t)(n * n));
    for (int j = 0; j < f; j++) {
        double a = points[j], N = 1;
        for (int l = 0; l < f; l++)
            if (l != j) N *= a - points[l];
        for (int i = 0; i < m; i++) AT[i * n + j] = power(a, i);
        for (int k = 0; k < r; k++) G[j * r + k] = power(a, k) / N;
        double q = 0; /* synthetic division of M by (x - a), from the top */
        for (int i = f; i >= 1; i--) BT[j * n + i - 1] = q = M[i] + a * q;
    }
    AT[(m - 1) * n + f] = 1, G[f * r + r - 1] = 1;
    for (int l = 0; l < n; l++) BT[f * n + l] = M[l];
}

/* The 1-D identity sum_j AT[i][j] G[j][k] BT[j][l] = [l == i + k] (y_i = sum_k g_k d_{i+k}). */
static int toom_cook_ok(int m, int r, const double *AT, const double *G, const double *BT)
{
    int n = m + r - 1;
    for (int i = 0; i < m; i++)
        for (int k = 0; k < r; k++)
            for (int l = 0; l < n; l++) {
                double s = 0;
                for (int j = 0; j < n; j++) s += AT[i * n + j] * G[j * r + k] * BT[j * n + l];
                if (fabs(s - (l == i + k)) > 1e-9) return 0;
            }
    return 1;
}

/* src (rows x cols) and its transpose as lists of nonzeros per row */
static void to_sparse(const double *src, int rows, int cols, struct tfc_wino_sparse *s,
                      struct tfc_wino_sparse *st)
{
    s->rows = rows, s->cols = cols, st->rows = cols, st->cols = rows;
    for (int i = 0; i < rows; i++)
        for (int j = 0; j < cols; j++) {
            double v = src[i * cols + j];
            if (v == 0) continue;
            s->idx[i][s->nnz[i]] = j, s->val[i][s->nnz[i]++] = (float)v;
            st->idx[j][st->nnz[j]] = i, st->val[j][st->nnz[j]++] = (float)v;
        }
}

int tfc_wino_make(struct tfc_wino *t, int m, int r)
{
    int n = m + r - 1;
    if (m < 1 || r < 1 || n > TFC_WINO_MAX_N) return -1;
    double AT[NN], G[NN], BT[NN];
    toom_cook(m, r, AT, G, BT);
    if (!toom_cook_ok(m, r, AT, G, BT)) return -1;
    memset(t, 0, sizeof *t);
    t->m = m, t->r = r, t->n = n;
    to_sparse(AT, m, n, &t->sAT, &t->sA);
    to_sparse(G, n, r, &t->sG, &t->sGT);
    to_sparse(BT, n, n, &t->sBT, &t->sB);
    return 0;
}

/* ---- the 16-lane sandwich Y = L X R^T ---- */

/* Strides (in floats) of a matrix of 16-lane vectors: element (i, j) at i * row + j * col. */
struct lay {
    int64_t row, col;
};

/* Y[p][q][lane] (+)= sum_{i,j} L[p][i] X[i][j][lane] R[q][j] for L (NP x ni), X (ni x NJ),
 * R (nq x NJ), L and R as lists of their nonzeros (the transforms are sparse). NP and NJ are
 * constants where this is inlined, so that the loops over them unroll and their NP or NJ
 * accumulators (16 lanes each) are independent chains held in registers. */
static inline __attribute__((always_inline)) void
sandwich_fixed(const struct tfc_wino_sparse *L, const float *X, struct lay xl, const int NJ,
               const struct tfc_wino_sparse *R, float *Y, struct lay yl, int add, const int NP)
{
    float tmp[NN * LANES];
    for (int p = 0; p < NP; p++) {
        float acc[TFC_WINO_MAX_N][LANES]; /* zeroed by unrolled stores, not a memset */
#pragma GCC unroll 8
        for (int j = 0; j < NJ; j++)
            for (int l = 0; l < LANES; l++) acc[j][l] = 0;
        for (int e = 0; e < L->nnz[p]; e++) {
            float c = L->val[p][e];
            const float *x = X + L->idx[p][e] * xl.row;
#pragma GCC unroll 8
            for (int j = 0; j < NJ; j++)
                for (int l = 0; l < LANES; l++) acc[j][l] += c * x[j * xl.col + l];
        }
#pragma GCC unroll 8
        for (int j = 0; j < NJ; j++) memcpy(tmp + (p * NJ + j) * LANES, acc[j], sizeof acc[j]);
    }
    for (int q = 0; q < R->rows; q++) {
        float acc[TFC_WINO_MAX_N][LANES];
#pragma GCC unroll 8
        for (int p = 0; p < NP; p++)
            for (int l = 0; l < LANES; l++) acc[p][l] = 0;
        for (int e = 0; e < R->nnz[q]; e++) {
            float c = R->val[q][e];
            const float *t = tmp + R->idx[q][e] * LANES;
#pragma GCC unroll 8
            for (int p = 0; p < NP; p++)
                for (int l = 0; l < LANES; l++) acc[p][l] += c * t[p * NJ * LANES + l];
        }
#pragma GCC unroll 8
        for (int p = 0; p < NP; p++) {
            float *y = Y + p * yl.row + q * yl.col;
            if (add)
                for (int l = 0; l < LANES; l++) y[l] += acc[p][l];
            else
                memcpy(y, acc[p], sizeof acc[p]);
        }
    }
}

#define SW_CASE(np, nj)                                                                      \
    case np * 16 + nj:                                                                       \
        sandwich_fixed(L, X, xl, nj, R, Y, yl, add, np);                                     \
        break;
#define SW_ROW(np) SW_CASE(np, 1) SW_CASE(np, 2) SW_CASE(np, 3) SW_CASE(np, 4) SW_CASE(np, 5) \
    SW_CASE(np, 6) SW_CASE(np, 7) SW_CASE(np, 8)

/* sandwich_fixed with the extents as constants: every case of TFC_WINO_MAX_N = 8 */
static inline __attribute__((always_inline)) void
sandwich_body(const struct tfc_wino_sparse *L, const float *X, struct lay xl, int nj,
              const struct tfc_wino_sparse *R, float *Y, struct lay yl, int add)
{
    switch (L->rows * 16 + nj) {
        SW_ROW(1) SW_ROW(2) SW_ROW(3) SW_ROW(4) SW_ROW(5) SW_ROW(6) SW_ROW(7) SW_ROW(8)
    }
}

#define SANDWICH_ARGS                                                                        \
    const struct tfc_wino_sparse *L, const float *X, struct lay xl, int nj,                  \
        const struct tfc_wino_sparse *R, float *Y, struct lay yl, int add
typedef void sandwich_fn(SANDWICH_ARGS);

#if defined(__x86_64__) || defined(__i386__)
__attribute__((target("avx512f,avx512vl,fma"))) static void sandwich_avx512(SANDWICH_ARGS)
{
    sandwich_body(L, X, xl, nj, R, Y, yl, add);
}

__attribute__((target("avx2,fma"))) static void sandwich_avx2(SANDWICH_ARGS)
{
    sandwich_body(L, X, xl, nj, R, Y, yl, add);
}
#endif

static void sandwich_plain(SANDWICH_ARGS)
{
    sandwich_body(L, X, xl, nj, R, Y, yl, add);
}

/* ---- the per-point GEMMs on AVX2 ---- */

/* C[i][j] = sum_p A[i * ars + p * acs] B[p * ldb + j] for i < rows, j < cols (a multiple of
 * 16: positions of 16 lanes), p < depth; C overwritten. A block's GEMMs are tiny (the CNN's
 * conv2: 64 x 16 x 32 per transform point), where OpenBLAS's packing of both operands and its
 * separate beta = 0 pass over C cost more than the products: this reads B in place (a block's
 * B is a few KiB, in L1) and broadcasts A, R rows (a constant where inlined) by 16 columns at a
 * time in 2R accumulators. The forward GEMM is U V (ars = C, acs = 1), the input gradient's
 * U^T dM (ars = 1, acs = K). */
#define GEMM_ARGS                                                                            \
    int rows, int cols, int depth, const float *A, int ars, int acs, const float *B, int ldb, \
        float *C, int ldc
typedef void gemm_fn(GEMM_ARGS);

#if defined(__x86_64__) || defined(__i386__)
__attribute__((target("avx2,fma"))) static inline __attribute__((always_inline)) void
gemm_rows_avx2(const int R, int cols, int depth, const float *A, int ars, int acs,
               const float *B, int ldb, float *C, int ldc)
{
    for (int j = 0; j < cols; j += 16) {
        __m256 acc[6][2];
#pragma GCC unroll 6
        for (int r = 0; r < R; r++) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
        for (int p = 0; p < depth; p++) {
            __m256 b0 = _mm256_loadu_ps(B + (size_t)p * ldb + j);
            __m256 b1 = _mm256_loadu_ps(B + (size_t)p * ldb + j + 8);
#pragma GCC unroll 6
            for (int r = 0; r < R; r++) {
                __m256 a = _mm256_set1_ps(A[(size_t)r * ars + (size_t)p * acs]);
                acc[r][0] = _mm256_fmadd_ps(a, b0, acc[r][0]);
                acc[r][1] = _mm256_fmadd_ps(a, b1, acc[r][1]);
            }
        }
#pragma GCC unroll 6
        for (int r = 0; r < R; r++) {
            _mm256_storeu_ps(C + (size_t)r * ldc + j, acc[r][0]);
            _mm256_storeu_ps(C + (size_t)r * ldc + j + 8, acc[r][1]);
        }
    }
}

__attribute__((target("avx2,fma"))) static void gemm_avx2(GEMM_ARGS)
{
    int i = 0;
    for (; i + 6 <= rows; i += 6)
        gemm_rows_avx2(6, cols, depth, A + (size_t)i * ars, ars, acs, B, ldb, C + (size_t)i * ldc,
                       ldc);
    const float *Ai = A + (size_t)i * ars;
    float *Ci = C + (size_t)i * ldc;
    switch (rows - i) {
    case 5: gemm_rows_avx2(5, cols, depth, Ai, ars, acs, B, ldb, Ci, ldc); break;
    case 4: gemm_rows_avx2(4, cols, depth, Ai, ars, acs, B, ldb, Ci, ldc); break;
    case 3: gemm_rows_avx2(3, cols, depth, Ai, ars, acs, B, ldb, Ci, ldc); break;
    case 2: gemm_rows_avx2(2, cols, depth, Ai, ars, acs, B, ldb, Ci, ldc); break;
    case 1: gemm_rows_avx2(1, cols, depth, Ai, ars, acs, B, ldb, Ci, ldc); break;
    }
}
#endif

/* The transforms of one instruction set, and its per-point GEMM where it has one (NULL:
 * OpenBLAS). */
struct isa {
    const char *name;
    sandwich_fn *sw;
    gemm_fn *gemm;
};

/* Widest first; the default is the first the CPU runs (picked by features: gcc's arch= clones
 * test CPU models); tfc_conv_winograd_set_isa forces one, so tests run the others too. */
enum { ISA_AVX512, ISA_AVX2, ISA_PLAIN, ISA_COUNT };
static const struct isa isas[ISA_COUNT] = {
#if defined(__x86_64__) || defined(__i386__)
    {"avx512", sandwich_avx512, NULL}, {"avx2", sandwich_avx2, gemm_avx2},
#else
    {"avx512", sandwich_plain, NULL}, {"avx2", sandwich_plain, NULL},
#endif
    {"plain", sandwich_plain, NULL}};

static int isa_supported(int i)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    if (i == ISA_AVX512)
        return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
               __builtin_cpu_supports("fma");
    if (i == ISA_AVX2) return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#endif
    return i == ISA_PLAIN;
}

static int isa_default = -1, isa_forced = -1;

static const struct isa *isa_get(void)
{
    int f = __atomic_load_n(&isa_forced, __ATOMIC_RELAXED);
    if (f >= 0) return &isas[f];
    int d = __atomic_load_n(&isa_default, __ATOMIC_RELAXED);
    if (d < 0) {
        d = isa_supported(ISA_AVX512) ? ISA_AVX512 : isa_supported(ISA_AVX2) ? ISA_AVX2 : ISA_PLAIN;
        __atomic_store_n(&isa_default, d, __ATOMIC_RELAXED);
    }
    return &isas[d];
}

int tfc_conv_winograd_set_isa(const char *name)
{
    for (int i = 0; i < ISA_COUNT; i++)
        if (name && !strcmp(name, isas[i].name)) {
            if (!isa_supported(i)) return -1;
            __atomic_store_n(&isa_forced, i, __ATOMIC_RELAXED);
            return 0;
        }
    if (name) return -1;
    __atomic_store_n(&isa_forced, -1, __ATOMIC_RELAXED);
    return 0;
}

const char *tfc_conv_winograd_isa(void)
{
    return isa_get()->name;
}

/* ---- one convolution ---- */

/* Tile positions (of 16 images each) per block: V and M of a block stay in L2 (measured by
 * bench/conv_winograd --block-pos). */
static int block_pos = 1;
/* The filter gradient's blocks are larger: each block's GEMMs add into all of dU (n*n*K*C),
 * so wider blocks (a longer GEMM inner dimension) read and write it fewer times. */
#define FILTER_BLOCK_FACTOR 2

void tfc_conv_winograd_set_block(int positions)
{
    if (positions >= 1) __atomic_store_n(&block_pos, positions, __ATOMIC_RELAXED);
}

/* Images go in groups of 16, one per lane: activations are packed per group into
 * [channel][row][column][16 images] planes with the padding (and the last partial tiles)
 * stored as zeros, so a tile of 16 images is n x n aligned vectors. Tile positions go in
 * blocks of `pb`; V and M hold a block: [xi][c][col], [xi][k][col], col = position * 16 + lane. */
struct wconv {
    const struct tfc_wino *t;
    sandwich_fn *sw;
    gemm_fn *gemm;                         /* the per-point GEMM, or NULL for OpenBLAS */
    int64_t N, C, K, H, W, OH, OW, pt, pl; /* extents, pads before */
    int64_t th, tw, npos, pb;              /* tiles per column and row, positions, per block */
    int64_t PH, PW, QH, QW;                /* packed input plane, packed output plane */
    float *U, *V, *M, *P, *Q;              /* [n*n][K][C], blocks, packed input, output */
};

/* P[c][top + y][left + x][lane] = src[n0 + lane][c][y][x], zero elsewhere (images past N
 * too). Lanes innermost: each store writes whole lines, the loads stream 16 image planes. */
static void pack(const struct wconv *c, const float *src, int64_t n0, int64_t ch, int64_t h,
                 int64_t w, int64_t ph, int64_t pw, int64_t top, int64_t left, float *dst)
{
    int nl = c->N - n0 < LANES ? (int)(c->N - n0) : LANES;
    memset(dst, 0, sizeof(float) * (size_t)(ch * ph * pw * LANES));
    for (int64_t k = 0; k < ch; k++)
        for (int64_t y = 0; y < h; y++) {
            const float *s = src + ((n0 * ch + k) * h + y) * w;
            float *d = dst + ((k * ph + top + y) * pw + left) * LANES;
            for (int64_t x = 0; x < w; x++)
                for (int l = 0; l < nl; l++) d[x * LANES + l] = s[l * ch * h * w + x];
        }
}

/* The reverse of pack: dst[n0 + lane][c][y][x] = P[c][top + y][left + x][lane]. */
static void unpack(const struct wconv *c, const float *src, int64_t n0, int64_t ch, int64_t h,
                   int64_t w, int64_t ph, int64_t pw, int64_t top, int64_t left, float *dst)
{
    int nl = c->N - n0 < LANES ? (int)(c->N - n0) : LANES;
    for (int64_t k = 0; k < ch; k++)
        for (int64_t y = 0; y < h; y++) {
            float *d = dst + ((n0 * ch + k) * h + y) * w;
            const float *s = src + ((k * ph + top + y) * pw + left) * LANES;
            for (int64_t x = 0; x < w; x++)
                for (int l = 0; l < nl; l++) d[l * ch * h * w + x] = s[x * LANES + l];
        }
}

/* Floats between the xi panels of a V or M block (rows x cols): one cache line more than the
 * panel, so that the n*n panels a tile's transform reads or writes do not all fall in the same
 * L1 sets (panels are often a multiple of 4 KiB). */
static int64_t panel(int64_t rows, int64_t cols)
{
    return rows * cols + LANES;
}

/* The block's tiles between packed planes (plane rows ph x pw, `ch` channels, tiles start
 * every m) and a V/M block of `rows` rows: to_block V = L X L^T, else X = L V L^T (added). */
static void tiles_xfer(const struct wconv *c, int64_t p0, int64_t np, float *plane,
                       int64_t ch, int64_t ph, int64_t pw, float *blk,
                       const struct tfc_wino_sparse *L, int to_block, int add)
{
    int64_t cols = c->pb * LANES, nn = c->t->n * c->t->n, m = c->t->m;
    int64_t xs = panel(ch, cols); /* one xi's panel */
    struct lay pl = {pw * LANES, LANES}, bl = {c->t->n * xs, xs};
    (void)nn;
    for (int64_t p = 0; p < np; p++) {
        int64_t oy = (p0 + p) / c->tw * m, ox = (p0 + p) % c->tw * m;
        for (int64_t k = 0; k < ch; k++) {
            float *pp = plane + ((k * ph + oy) * pw + ox) * LANES;
            float *bb = blk + k * cols + p * LANES;
            if (to_block) c->sw(L, pp, pl, L->cols, L, bb, bl, 0);
            else c->sw(L, bb, bl, L->cols, L, pp, pl, add);
        }
    }
}

/* U[xi][k][c] = (G w[k][c] GT)[xi] */
static void filter_transform(const struct wconv *c, const float *w)
{
    const struct tfc_wino *t = c->t;
    int64_t kc = c->K * c->C, r = t->r;
    float X[NN * LANES];
    for (int64_t i0 = 0; i0 < kc; i0 += LANES) {
        for (int l = 0; l < LANES; l++)
            for (int e = 0; e < r * r; e++)
                X[e * LANES + l] = i0 + l < kc ? w[(i0 + l) * r * r + e] : 0.0f;
        float Y[NN * LANES];
        c->sw(&t->sG, X, (struct lay){r * LANES, LANES}, (int)r, &t->sG, Y,
              (struct lay){t->n * LANES, LANES}, 0);
        /* whole 16-lane rows as one copy each: U's xi rows are kc floats apart (often a
         * multiple of 4 KiB), and 16 scalar stores per row stalled on their misses (CNN
         * conv2: 0.25 ms a task, 2 ms an inference of batch 128) */
        int nl = kc - i0 < LANES ? (int)(kc - i0) : LANES;
        for (int xi = 0; xi < t->n * t->n; xi++)
            memcpy(c->U + xi * kc + i0, Y + xi * LANES, sizeof(float) * (size_t)nl);
    }
}

/* dw[k][c] = GT dU[.][k][c] G */
static void filter_adjoint(const struct wconv *c, float *dw)
{
    const struct tfc_wino *t = c->t;
    int64_t kc = c->K * c->C, r = t->r;
    float X[NN * LANES], Y[NN * LANES];
    for (int64_t i0 = 0; i0 < kc; i0 += LANES) {
        for (int xi = 0; xi < t->n * t->n; xi++)
            for (int l = 0; l < LANES; l++)
                X[xi * LANES + l] = i0 + l < kc ? c->U[xi * kc + i0 + l] : 0.0f;
        c->sw(&t->sGT, X, (struct lay){t->n * LANES, LANES}, t->n, &t->sGT, Y,
              (struct lay){r * LANES, LANES}, 0);
        for (int l = 0; l < LANES && i0 + l < kc; l++)
            for (int e = 0; e < r * r; e++) dw[(i0 + l) * r * r + e] = Y[e * LANES + l];
    }
}

/* The n*n GEMMs of one block of `np` positions. */
static void block_gemms(const struct wconv *c, int kind, int64_t np, int first)
{
    int nn = c->t->n * c->t->n, K = (int)c->K, C = (int)c->C, ld = (int)(c->pb * LANES);
    int cols = (int)(np * LANES);
    for (int xi = 0; xi < nn; xi++) {
        float *U = c->U + (size_t)xi * K * C, *V = c->V + (size_t)xi * panel(C, ld);
        float *M = c->M + (size_t)xi * panel(K, ld);
        if (c->gemm && kind == TFC_K_CONV)
            c->gemm(K, cols, C, U, C, 1, V, ld, M, ld);
        else if (c->gemm && kind == TFC_K_CONV_BP_INPUT)
            c->gemm(C, cols, K, U, 1, C, M, ld, V, ld);
        else if (kind == TFC_K_CONV)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, K, cols, C, 1.0f, U, C, V,
                        ld, 0.0f, M, ld);
        else if (kind == TFC_K_CONV_BP_INPUT)
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, C, cols, K, 1.0f, U, C, M, ld,
                        0.0f, V, ld);
        else
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, K, C, cols, 1.0f, M, ld, V, ld,
                        first ? 0.0f : 1.0f, U, C);
    }
}

/* One group of 16 images from n0, every block of tile positions. */
static void run_group(struct wconv *c, int kind, float *x, float *y, int64_t n0)
{
    const struct tfc_wino *t = c->t;
    if (kind != TFC_K_CONV_BP_INPUT)
        pack(c, x, n0, c->C, c->H, c->W, c->PH, c->PW, c->pt, c->pl, c->P);
    else
        memset(c->P, 0, sizeof(float) * (size_t)(c->C * c->PH * c->PW * LANES));
    if (kind != TFC_K_CONV) pack(c, y, n0, c->K, c->OH, c->OW, c->QH, c->QW, 0, 0, c->Q);
    for (int64_t p0 = 0; p0 < c->npos; p0 += c->pb) {
        int64_t np = c->npos - p0 < c->pb ? c->npos - p0 : c->pb;
        if (kind != TFC_K_CONV_BP_INPUT)
            tiles_xfer(c, p0, np, c->P, c->C, c->PH, c->PW, c->V, &t->sBT, 1, 0);
        if (kind != TFC_K_CONV)
            tiles_xfer(c, p0, np, c->Q, c->K, c->QH, c->QW, c->M, &t->sA, 1, 0);
        block_gemms(c, kind, np, n0 == 0 && p0 == 0);
        if (kind == TFC_K_CONV)
            tiles_xfer(c, p0, np, c->Q, c->K, c->QH, c->QW, c->M, &t->sAT, 0, 0);
        else if (kind == TFC_K_CONV_BP_INPUT)
            tiles_xfer(c, p0, np, c->P, c->C, c->PH, c->PW, c->V, &t->sB, 0, 1);
    }
    if (kind == TFC_K_CONV) unpack(c, c->Q, n0, c->K, c->OH, c->OW, c->QH, c->QW, 0, 0, y);
    if (kind == TFC_K_CONV_BP_INPUT)
        unpack(c, c->P, n0, c->C, c->H, c->W, c->PH, c->PW, c->pt, c->pl, x);
}

int tfc_conv_winograd_run(int kind, const struct tfc_wino *t, const struct tfc_conv_geom *g,
                          float *x, float *w, float *y)
{
    const struct isa *is = isa_get();
    struct wconv c = {.t = t, .sw = is->sw, .gemm = is->gemm, .N = g->batch, .C = g->in_ch,
                      .K = g->out_ch, .H = g->in[0], .W = g->in[1], .OH = g->out[0],
                      .OW = g->out[1], .pt = g->pad_lo[0], .pl = g->pad_lo[1]};
    c.th = (c.OH + t->m - 1) / t->m, c.tw = (c.OW + t->m - 1) / t->m, c.npos = c.th * c.tw;
    int bp = __atomic_load_n(&block_pos, __ATOMIC_RELAXED);
    if (kind == TFC_K_CONV_BP_FILTER) bp *= FILTER_BLOCK_FACTOR;
    c.pb = c.npos < bp ? c.npos : bp;
    c.QH = c.th * t->m, c.QW = c.tw * t->m, c.PH = c.QH + t->r - 1, c.PW = c.QW + t->r - 1;
    size_t nn = (size_t)(t->n * t->n), cols = (size_t)(c.pb * LANES);
    size_t lu = nn * (size_t)(c.K * c.C), lv = nn * (size_t)panel(c.C, (int64_t)cols),
           lm = nn * (size_t)panel(c.K, (int64_t)cols);
    size_t lp = (size_t)(c.C * c.PH * c.PW * LANES), lq = (size_t)(c.K * c.QH * c.QW * LANES);
    float *s = tfc_thread_scratch(TFC_SCRATCH_WINOGRAD, sizeof(float) * (lu + lv + lm + lp + lq));
    if (!s) return -1;
    c.U = s, c.V = s + lu, c.M = c.V + lv, c.P = c.M + lm, c.Q = c.P + lp;
    if (kind != TFC_K_CONV_BP_FILTER) filter_transform(&c, w);
    if (kind == TFC_K_CONV_BP_FILTER && c.N == 0) memset(c.U, 0, sizeof(float) * lu);
    for (int64_t n0 = 0; n0 < c.N; n0 += LANES) run_group(&c, kind, x, y, n0);
    if (kind == TFC_K_CONV_BP_FILTER) filter_adjoint(&c, w);
    return 0;
}

/* ---- the codelet's entry ---- */

static struct tfc_wino wino_tables[2]; /* r = 3, r = 5 */
static int wino_tables_ok;
static pthread_once_t wino_tables_once = PTHREAD_ONCE_INIT;

static void wino_tables_make(void)
{
    wino_tables_ok = !tfc_wino_make(&wino_tables[0], tfc_conv_winograd_tile(3), 3) &&
                     !tfc_wino_make(&wino_tables[1], tfc_conv_winograd_tile(5), 5);
}

int tfc_conv_winograd_cpu(void *buffers[], const struct tfc_kargs *a)
{
    struct tfc_conv_geom g;
    char msg[200];
    if (tfc_conv_geom_of(a, &g, msg, sizeof msg)) {
        tfc_kernel_fail(a, TFC_ERR_INTERNAL, "convolution geometry: %s", msg);
        return -1;
    }
    pthread_once(&wino_tables_once, wino_tables_make);
    if (!wino_tables_ok) {
        tfc_kernel_fail(a, TFC_ERR_INTERNAL, "the Winograd transforms failed their check");
        return -1;
    }
    float *in0 = (float *)tfc_kin(buffers, a, 0), *in1 = (float *)tfc_kin(buffers, a, 1);
    float *out = tfc_kout(buffers, a, 0);
    if (!in0 || !in1 || !out) return -1;
    const struct tfc_wino *t = &wino_tables[g.kern[0] == 5];
    float *x = a->kind == TFC_K_CONV_BP_INPUT ? out : in0;
    float *w = a->kind == TFC_K_CONV_BP_FILTER ? out : in1;
    float *y = a->kind == TFC_K_CONV ? out : a->kind == TFC_K_CONV_BP_INPUT ? in0 : in1;
    if (tfc_conv_winograd_run(a->kind, t, &g, x, w, y)) {
        tfc_kernel_fail(a, TFC_ERR_OUT_OF_MEMORY, "no memory for the Winograd scratch of a "
                        "%lld -> %lld channel convolution", (long long)g.in_ch,
                        (long long)g.out_ch);
        return -1;
    }
    return 0;
}
