//go:build amd64 && cgo

// Query heads attending over a float16 KV cache: the decode and prefill inner loop. The
// heads that share one KV head (grouped-query attention) go together, so each key and value
// row is converted from float16 once for all of them and each head's sums form independent
// chains. Every head sees the same operations in the same order whatever the group size.
// AVX2 + FMA + F16C, chosen at run time.
#include <immintrin.h>
#include <math.h>
#include <stdint.h>

#include "attend_amd64.h"
#include "exp_amd64.h"

#define AT_T __attribute__((target("avx2,fma,f16c")))
#define AT_AI __attribute__((always_inline))
// AT_UNROLL: unroll the loop that follows (a constant count of at most eight turns), so its
// arrays stay in registers.
#define AT_UNROLL _Pragma("GCC unroll 8")

// AT_POS: key rows converted and dotted per step (independent sums per head), AT_HEADS heads
// at a time. AT_VPOS: value rows taken per step. AT_AHEAD: how many key rows ahead to
// prefetch.
#define AT_POS 4
#define AT_HEADS 2
#define AT_VPOS 16
#define AT_AHEAD 8

static inline AT_T float hsum256(__m256 v) {
	__m128 lo = _mm256_castps256_ps128(v), hi = _mm256_extractf128_ps(v, 1);
	lo = _mm_add_ps(lo, hi);
	lo = _mm_add_ps(lo, _mm_movehl_ps(lo, lo));
	lo = _mm_add_ss(lo, _mm_movehdup_ps(lo));
	return _mm_cvtss_f32(lo);
}

// prefetch_row asks for the cache lines of row j of d values (Q8: bytes, else halves), into L1.
static inline AT_T AT_AI void prefetch_row(const int Q8, const void *base, long j, int d) {
	const char *r = (const char *)base + j * (Q8 ? 1 : 2);
	for (int i = 0; i < d * (Q8 ? 1 : 2); i += 64) _mm_prefetch(r + i, _MM_HINT_T0);
}

// prefetch_row_l2: the same into L2 only.
static inline AT_T AT_AI void prefetch_row_l2(const int Q8, const void *base, long j, int d) {
	const char *r = (const char *)base + j * (Q8 ? 1 : 2);
	for (int i = 0; i < d * (Q8 ? 1 : 2); i += 64) _mm_prefetch(r + i, _MM_HINT_T1);
}

// load8: the 8 values from element idx of a cache's storage, as float32. Q8: int8 values
// times their block's scale (sc[idx/32]; idx is a multiple of 8 so the 8 share a block).
static inline AT_T AT_AI __m256 load8(const int Q8, const void *base, const float *sc, long idx) {
	if (Q8) {
		const __m128i b = _mm_loadl_epi64((const __m128i *)((const int8_t *)base + idx));
		return _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(b)), _mm256_broadcast_ss(sc + (idx >> 5)));
	}
	return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)base + idx)));
}

// softmax_row turns n scores into weights that sum to one, in place. With ml set it leaves
// them unnormalised, e^(s - max), and writes the max and their sum to ml[0], ml[1].
static inline AT_T void softmax_row(float *s, int n, float *ml) {
	// The max eight lanes at a time (one chain of scalar maxes was 3% of decode attention).
	__m256 m8 = _mm256_set1_ps(-INFINITY);
	int q = 0;
	for (; q + 8 <= n; q += 8) m8 = _mm256_max_ps(m8, _mm256_loadu_ps(s + q));
	__m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m8), _mm256_extractf128_ps(m8, 1));
	m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
	m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
	float maxv = _mm_cvtss_f32(m4);
	for (; q < n; q++)
		if (s[q] > maxv) maxv = s[q];
	const __m256 mx = _mm256_set1_ps(maxv);
	__m256 sum8 = _mm256_setzero_ps();
	int p = 0;
	for (; p + 8 <= n; p += 8) {
		const __m256 e = strata_exp8(_mm256_sub_ps(_mm256_loadu_ps(s + p), mx));
		_mm256_storeu_ps(s + p, e);
		sum8 = _mm256_add_ps(sum8, e);
	}
	float sum = hsum256(sum8);
	if (p < n) { // the tail through the same lanes
		float t[8] = {0};
		for (int j = p; j < n; j++) t[j - p] = s[j] - maxv;
		_mm256_storeu_ps(t, strata_exp8(_mm256_loadu_ps(t)));
		for (int j = p; j < n; j++) {
			s[j] = t[j - p];
			sum += t[j - p];
		}
	}
	if (ml) {
		ml[0] = maxv, ml[1] = sum;
		return;
	}
	const __m256 inv = _mm256_set1_ps(1.0f / sum);
	for (p = 0; p + 8 <= n; p += 8) _mm256_storeu_ps(s + p, _mm256_mul_ps(_mm256_loadu_ps(s + p), inv));
	for (; p < n; p++) s[p] *= 1.0f / sum;
}

// attend_values: out = the weights in scores times the value rows, for G heads of T tokens
// (see attend_group). A block of rows at a time, eight output dims of every head at a time
// over the block, the sums carried in out between blocks (so in position order throughout).
// DIRECT (a constant): the rows are converted as they are used, else once per block into vf.
static inline AT_T AT_AI void attend_values(const int G, const int Q8, const int DIRECT, int T, long qs, const void *v,
                                            const float *vs, long stride, int n, int d, const float *scores, float *out,
                                            float *vf) {
	const int nmax = n + T - 1;
	for (int p0 = 0; p0 < nmax; p0 += AT_VPOS) {
		const int pb = nmax - p0 < AT_VPOS ? nmax - p0 : AT_VPOS;
		for (int j = p0 + AT_VPOS; j < p0 + 2 * AT_VPOS && j < nmax; j++) prefetch_row(Q8, v, (long)j * stride, d);
		for (int j = 0; j < pb && !DIRECT; j++) {
			const long vr = (long)(p0 + j) * stride;
			for (int i = 0; i < d; i += 8) _mm256_storeu_ps(vf + j * d + i, load8(Q8, v, vs, vr + i));
		}
		for (int t = 0; t < T; t++) {
			const int valid = n + t - p0 < pb ? n + t - p0 : pb;
			if (valid <= 0) continue;
			float *ot = out + (long)t * qs;
			const float *st = scores + (long)t * G * nmax;
			for (int i = 0; i < d; i += 8) {
				__m256 o[STRATA_ATTEND_MAX_GROUP];
				AT_UNROLL
				for (int h = 0; h < G; h++) o[h] = p0 == 0 ? _mm256_setzero_ps() : _mm256_loadu_ps(ot + (long)h * d + i);
				const long vi = (long)p0 * stride + i;
				for (int j = 0; j < valid; j++) {
					const __m256 vv = DIRECT ? load8(Q8, v, vs, vi + (long)j * stride) : _mm256_loadu_ps(vf + j * d + i);
					AT_UNROLL
					for (int h = 0; h < G; h++) o[h] = _mm256_fmadd_ps(_mm256_broadcast_ss(st + (long)h * nmax + p0 + j), vv, o[h]);
				}
				AT_UNROLL
				for (int h = 0; h < G; h++) _mm256_storeu_ps(ot + (long)h * d + i, o[h]);
			}
		}
	}
}

// attend_group: G heads (a compile-time constant at each call, so the sums below live in
// registers) of T consecutive tokens; see strata_attend_f16_avx2. Token j sees n + j
// positions; each (token, head) gets the same operations in the same order as alone.
static inline AT_T AT_AI void attend_group(const int G, const int Q8, int T, const float *q, long qs, const void *k,
                                           const void *v, const float *ks, const float *vs, long stride, int n, int d,
                                           float scale, float *scores, float *out, float *ml, float *kf, float *vf) {
	const int nmax = n + T - 1; // positions of the last token; score rows are nmax apart
	// Scores: a block of key rows in float32, then every token's heads against each of them.
	for (int p0 = 0; p0 < nmax; p0 += AT_POS) {
		const int pb = nmax - p0 < AT_POS ? nmax - p0 : AT_POS;
		for (int j = p0 + AT_AHEAD; j < p0 + AT_AHEAD + AT_POS && j < nmax; j++) prefetch_row(Q8, k, (long)j * stride, d);
		// These positions' value rows, into L2 while the scores are worked out, so the values
		// pass finds them there (decode at 600 positions: 14.1-16.3 -> 9.9-11.4 ms).
		for (int j = p0; j < p0 + pb; j++) prefetch_row_l2(Q8, v, (long)j * stride, d);
		AT_UNROLL
		for (int j = 0; j < AT_POS; j++) {
			const long kr = (long)(p0 + (j < pb ? j : 0)) * stride; // past the end: row p0 again, unused
			for (int i = 0; i < d; i += 8) _mm256_storeu_ps(kf + j * d + i, load8(Q8, k, ks, kr + i));
		}
		for (int t = 0; t < T; t++) {
			const int valid = n + t - p0 < pb ? n + t - p0 : pb; // this token's positions in the block
			if (valid <= 0) continue;
			const float *qt = q + (long)t * qs;
			float *st = scores + (long)t * G * nmax;
			// Two heads at a time: each key chunk loaded once for both (the loop was bound
			// by its loads with one head).
			AT_UNROLL
			for (int h = 0; h < G; h += AT_HEADS) {
				const int hn = G - h < AT_HEADS ? G - h : AT_HEADS;
				__m256 acc[AT_HEADS][AT_POS];
				AT_UNROLL
				for (int r = 0; r < hn; r++)
					AT_UNROLL
					for (int j = 0; j < AT_POS; j++) acc[r][j] = _mm256_setzero_ps();
				for (int i = 0; i < d; i += 8) {
					__m256 qv[AT_HEADS];
					AT_UNROLL
					for (int r = 0; r < hn; r++) qv[r] = _mm256_loadu_ps(qt + (long)(h + r) * d + i);
					AT_UNROLL
					for (int j = 0; j < AT_POS; j++) {
						const __m256 kv = _mm256_loadu_ps(kf + j * d + i);
						AT_UNROLL
						for (int r = 0; r < hn; r++) acc[r][j] = _mm256_fmadd_ps(qv[r], kv, acc[r][j]);
					}
				}
				AT_UNROLL
				for (int r = 0; r < hn; r++)
					for (int j = 0; j < valid; j++) st[(long)(h + r) * nmax + p0 + j] = hsum256(acc[r][j]) * scale;
			}
		}
	}
	for (int t = 0; t < T; t++)
		for (int h = 0; h < G; h++) softmax_row(scores + (long)(t * G + h) * nmax, n + t, ml ? ml + 2 * (t * G + h) : NULL);
	// Decode reads each value row once: converted where it is used, it is not stored and
	// read back (a 30b-a3b decode step at 600 positions: 22.6 -> 17.7 ms). Tokens of a prefill
	// share a block's rows, converted once.
	if (T == 1)
		attend_values(G, Q8, 1, 1, qs, v, vs, stride, n, d, scores, out, vf);
	else
		attend_values(G, Q8, 0, T, qs, v, vs, stride, n, d, scores, out, vf);
}

// attend_any: strata_attend_f16_avx2 or strata_attend_q8_avx2 (Q8 a constant at each call).
static inline AT_T AT_AI void attend_any(const int Q8, const float *q, long qs, const void *k, const void *v, const float *ks,
                                         const float *vs, long stride, int n, int t, int d, int g, float scale, float *scores,
                                         float *out, float *ml) {
	// Key and value rows converted to float32, shared by the group sizes below (one stack
	// frame). Accessed unaligned: Win64 only aligns the stack to 16 bytes, and mingw-w64 gcc
	// does not realign it for 32-byte locals (gcc bug 54412).
	float kf[AT_POS * STRATA_ATTEND_MAX_DIM], vf[AT_VPOS * STRATA_ATTEND_MAX_DIM];
	while (g > 0) {
		int now = g >= 8 ? 8 : g >= 4 ? 4 : g >= 2 ? 2 : 1;
		switch (now) {
		case 8: attend_group(8, Q8, t, q, qs, k, v, ks, vs, stride, n, d, scale, scores, out, ml, kf, vf); break;
		case 4: attend_group(4, Q8, t, q, qs, k, v, ks, vs, stride, n, d, scale, scores, out, ml, kf, vf); break;
		case 2: attend_group(2, Q8, t, q, qs, k, v, ks, vs, stride, n, d, scale, scores, out, ml, kf, vf); break;
		default: attend_group(1, Q8, t, q, qs, k, v, ks, vs, stride, n, d, scale, scores, out, ml, kf, vf); break;
		}
		q += (long)now * d;
		out += (long)now * d;
		if (ml) ml += 2 * now;
		g -= now;
	}
}

AT_T void strata_attend_f16_avx2(const float *q, long qs, const uint16_t *k, const uint16_t *v, long stride, int n, int t,
                                 int d, int g, float scale, float *scores, float *out, float *ml) {
	attend_any(0, q, qs, k, v, NULL, NULL, stride, n, t, d, g, scale, scores, out, ml);
}

AT_T void strata_attend_q8_avx2(const float *q, long qs, const int8_t *k, const int8_t *v, const float *ks, const float *vs,
                                long stride, int n, int t, int d, int g, float scale, float *scores, float *out, float *ml) {
	attend_any(1, q, qs, k, v, ks, vs, stride, n, t, d, g, scale, scores, out, ml);
}
