//go:build amd64 && cgo

// One query head attending over a float16 KV cache: the decode and prefill inner loop.
// The AVX2 version converts eight halves at a time with F16C; it is chosen at run time.
#include <immintrin.h>
#include <math.h>
#include <stdint.h>

#include "attend_amd64.h"

__attribute__((target("avx2,fma,f16c"))) static inline float hsum256(__m256 v) {
	__m128 lo = _mm256_castps256_ps128(v), hi = _mm256_extractf128_ps(v, 1);
	lo = _mm_add_ps(lo, hi);
	lo = _mm_add_ps(lo, _mm_movehl_ps(lo, lo));
	lo = _mm_add_ss(lo, _mm_movehdup_ps(lo));
	return _mm_cvtss_f32(lo);
}

__attribute__((target("avx2,fma,f16c")))
void strata_attend_f16_avx2(const float *q, const uint16_t *k, const uint16_t *v, long stride, int n, int d,
                            float scale, float *scores, float *out) {
	float maxv = -INFINITY;
	for (int p = 0; p < n; p++) {
		const uint16_t *kr = k + (long)p * stride;
		__m256 acc = _mm256_setzero_ps();
		for (int i = 0; i < d; i += 8) {
			__m256 kv = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(kr + i)));
			acc = _mm256_fmadd_ps(_mm256_loadu_ps(q + i), kv, acc);
		}
		float s = hsum256(acc) * scale;
		scores[p] = s;
		if (s > maxv) maxv = s;
	}
	float sum = 0;
	for (int p = 0; p < n; p++) {
		float e = expf(scores[p] - maxv);
		scores[p] = e;
		sum += e;
	}
	float inv = 1.0f / sum;
	for (int i = 0; i < d; i += 8) _mm256_storeu_ps(out + i, _mm256_setzero_ps());
	for (int p = 0; p < n; p++) {
		const uint16_t *vr = v + (long)p * stride;
		__m256 w = _mm256_set1_ps(scores[p] * inv);
		for (int i = 0; i < d; i += 8) {
			__m256 vv = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(vr + i)));
			_mm256_storeu_ps(out + i, _mm256_fmadd_ps(w, vv, _mm256_loadu_ps(out + i)));
		}
	}
}
