/* y[M,N] = x[M,K] . W^T with W stored as GGUF Q4_1 blocks (speedplan.runtime.kernels.q4 builds and loads this).

   Q4_1 block (20 bytes per 32 weights of one row): fp16 d, fp16 m, 16 bytes q; byte j holds weight j in
   its low nibble and weight j+16 in its high nibble; w = d*q + m. Row n of W is K/32 consecutive blocks.
   d*q is exact in fp32 (11-bit d mantissa times a 4-bit q), so fmaf(d, q, m) rounds once, exactly like
   the gguf package's fp32 (d*q)+m: the weights used here are bit-for-bit the fp32 weights of the
   dequantized model. Products and sums are fp32; only the summation order differs from an fp32 GEMM.

   Layout: x row-major [M, K] fp32, y row-major [M, N] fp32, K a multiple of 32. W is dequantized one
   block at a time into registers and used for every row of x (tiles of TILE_M rows of x times TILE_N
   rows of W), so the weights are read from memory once per call. OpenMP splits W's rows across threads.
   Plain C, no torch headers; AVX-512, AVX2 or portable scalar code depending on the compiler flags. */

#include <math.h>
#include <stdint.h>
#include <string.h>

#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__) && defined(__F16C__))
#include <immintrin.h>
#endif

#define QK 32          /* weights per block */
#define BLOCK_BYTES 20 /* 2 (d) + 2 (m) + 16 (q) */

#define INLINE static inline __attribute__((always_inline))

/* IEEE binary16 -> binary32, exact (normals, subnormals, inf, nan). */
static float half_to_float(const uint8_t *p) {
    uint16_t h = (uint16_t)(p[0] | (p[1] << 8));
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu, bits;
    if (exp == 0x1f) {
        bits = sign | 0x7f800000u | (mant << 13);
    } else if (exp != 0) {
        bits = sign | ((exp + 112u) << 23) | (mant << 13);
    } else if (mant == 0) {
        bits = sign;
    } else { /* subnormal: mant * 2^-24, renormalised */
        exp = 113;
        while (!(mant & 0x400u)) {
            mant <<= 1;
            exp--;
        }
        bits = sign | (exp << 23) | ((mant & 0x3ffu) << 13);
    }
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

const char *q4_1_isa(void) {
#if defined(__AVX512F__)
    return "avx512";
#elif defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
    return "avx2";
#else
    return "scalar";
#endif
}

/* out[nblocks*32] = the fp32 weights of `nblocks` consecutive blocks. */
void q4_1_dequantize(const uint8_t *w, float *out, int64_t nblocks) {
    for (int64_t b = 0; b < nblocks; b++, w += BLOCK_BYTES, out += QK) {
        const float d = half_to_float(w), m = half_to_float(w + 2);
        for (int j = 0; j < QK / 2; j++) {
            out[j] = fmaf(d, (float)(w[4 + j] & 0x0f), m);
            out[j + QK / 2] = fmaf(d, (float)(w[4 + j] >> 4), m);
        }
    }
}

#if defined(__AVX512F__)
#ifndef TILE_M /* rows of x per tile; -DTILE_M=.. / -DTILE_N=.. for tuning (8 x 2 was fastest here) */
#define TILE_M 8
#endif
#ifndef TILE_N /* rows of W per tile */
#define TILE_N 2
#endif

/* The 32 weights of one block, fmaf(d, q, m): weights 0-15 (low nibbles) and 16-31 (high nibbles). */
INLINE void dequant512(const uint8_t *blk, __m512 *lo, __m512 *hi) {
    int32_t dm_bits;
    memcpy(&dm_bits, blk, 4);
    const __m128 dm = _mm_cvtph_ps(_mm_cvtsi32_si128(dm_bits)); /* [d, m, 0, 0] */
    const __m512 d = _mm512_broadcastss_ps(dm), m = _mm512_broadcastss_ps(_mm_movehdup_ps(dm));
    const __m512i q = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(blk + 4)));
    *lo = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(_mm512_and_si512(q, _mm512_set1_epi32(0x0f))), m);
    *hi = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(_mm512_srli_epi32(q, 4)), m);
}

/* nt (<= TILE_N) rows of W against mt (<= TILE_M) rows of x; writes y[i*ldy + r] for i < mt, r < nt.
   Each x vector loaded feeds nt rows of W. */
INLINE void tile(const uint8_t *w, int64_t row_bytes, int64_t nb, const float *x, int64_t K, float *y, int64_t ldy,
                 const int nt, const int mt) {
    __m512 acc[TILE_N][TILE_M];
    for (int r = 0; r < nt; r++)
        for (int i = 0; i < mt; i++) acc[r][i] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        __m512 lo[TILE_N], hi[TILE_N];
        for (int r = 0; r < nt; r++) dequant512(w + r * row_bytes + b * BLOCK_BYTES, &lo[r], &hi[r]);
        const float *xb = x + b * QK;
        for (int i = 0; i < mt; i++) {
            const __m512 x_lo = _mm512_loadu_ps(xb + i * K), x_hi = _mm512_loadu_ps(xb + i * K + 16);
            for (int r = 0; r < nt; r++)
                acc[r][i] = _mm512_fmadd_ps(hi[r], x_hi, _mm512_fmadd_ps(lo[r], x_lo, acc[r][i]));
        }
    }
    for (int r = 0; r < nt; r++)
        for (int i = 0; i < mt; i++) y[i * ldy + r] = _mm512_reduce_add_ps(acc[r][i]);
}

#elif defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#define TILE_M 4
#define TILE_N 1

INLINE float hsum256(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

INLINE void tile(const uint8_t *row, int64_t row_bytes, int64_t nb, const float *x, int64_t K, float *y, int64_t ldy,
                 const int nt, const int mt) {
    (void)row_bytes, (void)nt; /* TILE_N == 1 */
    __m256 a_acc[TILE_M], b_acc[TILE_M]; /* a: weights 0-7 and 16-23, b: 8-15 and 24-31 */
    for (int i = 0; i < mt; i++) a_acc[i] = b_acc[i] = _mm256_setzero_ps();
    const __m256i nibble = _mm256_set1_epi32(0x0f);
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *blk = row + b * BLOCK_BYTES;
        int32_t dm_bits;
        memcpy(&dm_bits, blk, 4);
        const __m128 dm = _mm_cvtph_ps(_mm_cvtsi32_si128(dm_bits));
        const __m256 d = _mm256_broadcastss_ps(dm), m = _mm256_broadcastss_ps(_mm_movehdup_ps(dm));
        const __m128i qb = _mm_loadu_si128((const __m128i *)(blk + 4));
        const __m256i q0 = _mm256_cvtepu8_epi32(qb), q1 = _mm256_cvtepu8_epi32(_mm_srli_si128(qb, 8));
        const __m256 w0 = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(_mm256_and_si256(q0, nibble)), m);
        const __m256 w1 = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(_mm256_and_si256(q1, nibble)), m);
        const __m256 w2 = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(_mm256_srli_epi32(q0, 4)), m);
        const __m256 w3 = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(_mm256_srli_epi32(q1, 4)), m);
        const float *xb = x + b * QK;
        for (int i = 0; i < mt; i++) {
            const float *xi = xb + i * K;
            a_acc[i] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(xi), a_acc[i]);
            b_acc[i] = _mm256_fmadd_ps(w1, _mm256_loadu_ps(xi + 8), b_acc[i]);
            a_acc[i] = _mm256_fmadd_ps(w2, _mm256_loadu_ps(xi + 16), a_acc[i]);
            b_acc[i] = _mm256_fmadd_ps(w3, _mm256_loadu_ps(xi + 24), b_acc[i]);
        }
    }
    for (int i = 0; i < mt; i++) y[i * ldy] = hsum256(_mm256_add_ps(a_acc[i], b_acc[i]));
}

#else
#define TILE_M 4
#define TILE_N 1

INLINE void tile(const uint8_t *row, int64_t row_bytes, int64_t nb, const float *x, int64_t K, float *y, int64_t ldy,
                 const int nt, const int mt) {
    (void)row_bytes, (void)nt; /* TILE_N == 1 */
    float acc[TILE_M][QK];
    for (int i = 0; i < mt; i++)
        for (int j = 0; j < QK; j++) acc[i][j] = 0.0f;
    float w[QK];
    for (int64_t b = 0; b < nb; b++) {
        q4_1_dequantize(row + b * BLOCK_BYTES, w, 1);
        const float *xb = x + b * QK;
        for (int i = 0; i < mt; i++)
            for (int j = 0; j < QK; j++) acc[i][j] = fmaf(w[j], xb[i * K + j], acc[i][j]);
    }
    for (int i = 0; i < mt; i++) {
        float s = 0.0f;
        for (int j = 0; j < QK; j++) s += acc[i][j];
        y[i * ldy] = s;
    }
}
#endif

/* Constant tile sizes let the compiler keep the accumulators in registers. */
#if TILE_M > 8
#error "TILE_M must be at most 8 (the cases below)"
#endif
#define TILE(nt, m) tile(w, row_bytes, nb, x, K, y, ldy, nt, (m) < TILE_M ? (m) : TILE_M)
#define TILE_CASES(nt)                                                                                                 \
    switch (mt) {                                                                                                      \
    case 1: TILE(nt, 1); break;                                                                                        \
    case 2: TILE(nt, 2); break;                                                                                        \
    case 3: TILE(nt, 3); break;                                                                                        \
    case 4: TILE(nt, 4); break;                                                                                        \
    case 5: TILE(nt, 5); break;                                                                                        \
    case 6: TILE(nt, 6); break;                                                                                        \
    case 7: TILE(nt, 7); break;                                                                                        \
    default: TILE(nt, 8); break;                                                                                       \
    }

static void tile_one(const uint8_t *w, int64_t row_bytes, int64_t nb, const float *x, int64_t K, float *y, int64_t ldy,
                     int mt) {
    TILE_CASES(1)
}

static void tile_any(const uint8_t *w, int64_t row_bytes, int64_t nb, const float *x, int64_t K, float *y, int64_t ldy,
                     int nt, int mt) {
    if (nt == TILE_N) {
        TILE_CASES(TILE_N)
    } else { /* the last, partial tile of rows */
        for (int r = 0; r < nt; r++) tile_one(w + r * row_bytes, row_bytes, nb, x, K, y + r, ldy, mt);
    }
}

/* y[M,N] = x[M,K] . W^T; w: N rows of K/32 Q4_1 blocks; returns 0, or -1 if K is not a multiple of 32. */
int q4_1_matmul(const float *x, const uint8_t *w, float *y, int64_t M, int64_t N, int64_t K, int threads) {
    if (K % QK != 0 || M < 0 || N < 0) return -1;
    const int64_t nb = K / QK, row_bytes = nb * BLOCK_BYTES;
    const int64_t tiles = (N + TILE_N - 1) / TILE_N;
    (void)threads;
#pragma omp parallel for schedule(static) num_threads(threads) if (threads > 1)
    for (int64_t t = 0; t < tiles; t++) {
        const int64_t n = t * TILE_N;
        const int nt = (int)(N - n < TILE_N ? N - n : TILE_N);
        for (int64_t m0 = 0; m0 < M; m0 += TILE_M) {
            const int mt = (int)(M - m0 < TILE_M ? M - m0 : TILE_M);
            tile_any(w + n * row_bytes, row_bytes, nb, x + m0 * K, K, y + m0 * N + n, N, nt, mt);
        }
    }
    return 0;
}
