//go:build amd64 && cgo

// RMSNorm and the MoE's weighted sum with eight lanes. In Go they ran one value at a time on
// the caller while the other threads waited: a few percent of a decode step on 16 cores.
// The target has no FMA, so every product and sum is rounded as Go rounds it (vec.go): the
// same bits on every path.
#include <immintrin.h>

#include "vec_amd64.h"

#define VEC_T __attribute__((target("avx2")))

// vec_sum_squares is sumSquares (vec.go): four float64 partial sums over i mod 4.
static inline VEC_T double vec_sum_squares(const float *x, int64_t n) {
	__m256d acc = _mm256_setzero_pd();
	int64_t i = 0;
	for (; i + 4 <= n; i += 4) {
		const __m256d v = _mm256_cvtps_pd(_mm_loadu_ps(x + i));
		acc = _mm256_add_pd(acc, _mm256_mul_pd(v, v));
	}
	double s[4];
	_mm256_storeu_pd(s, acc);
	for (; i < n; i++) s[0] += (double)x[i] * (double)x[i];
	return (s[0] + s[1]) + (s[2] + s[3]);
}

VEC_T void strata_rmsnorm_avx2(float *dst, const float *x, const float *w, int64_t rows, int64_t dim, float eps) {
	for (int64_t r = 0; r < rows; r++) {
		const float *in = x + r * dim;
		float *out = dst + r * dim;
		// sqrtsd directly: the C library's sqrt would add a libm call and its errno path.
		const __m128d ms = _mm_set_sd(vec_sum_squares(in, dim) / (double)dim + (double)eps);
		const float scale = (float)(1.0 / _mm_cvtsd_f64(_mm_sqrt_sd(ms, ms)));
		const __m256 s8 = _mm256_set1_ps(scale);
		int64_t i = 0;
		for (; i + 8 <= dim; i += 8) {
			_mm256_storeu_ps(out + i, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(in + i), s8), _mm256_loadu_ps(w + i)));
		}
		for (; i < dim; i++) out[i] = in[i] * scale * w[i];
	}
}

VEC_T void strata_add_scaled_avx2(float *o, float s, const float *x, int64_t n) {
	const __m256 s8 = _mm256_set1_ps(s);
	int64_t i = 0;
	for (; i + 8 <= n; i += 8) {
		_mm256_storeu_ps(o + i, _mm256_add_ps(_mm256_loadu_ps(o + i), _mm256_mul_ps(s8, _mm256_loadu_ps(x + i))));
	}
	for (; i < n; i++) o[i] += s * x[i];
}
