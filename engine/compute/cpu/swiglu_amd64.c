//go:build amd64 && cgo

// SwiGLU with an 8-lane exp: math.Exp in float64 took about 5% of a CPU decode step on
// Qwen3-30B-A3B's shape, and ran while the other threads waited.
#include <immintrin.h>

#include "exp_amd64.h"
#include "swiglu_amd64.h"

#define SW_T __attribute__((target("avx2,fma")))

static inline SW_T __m256 sw_swiglu8(__m256 g, __m256 u) {
	const __m256 e = strata_exp8(_mm256_sub_ps(_mm256_setzero_ps(), g));
	return _mm256_mul_ps(_mm256_div_ps(g, _mm256_add_ps(_mm256_set1_ps(1.0f), e)), u);
}

SW_T void strata_swiglu_avx2(float *g, const float *u, int64_t n) {
	int64_t i = 0;
	for (; i + 8 <= n; i += 8) _mm256_storeu_ps(g + i, sw_swiglu8(_mm256_loadu_ps(g + i), _mm256_loadu_ps(u + i)));
	if (i < n) { // the tail through the same lanes, so every element gets the same arithmetic
		float gt[8] = {0}, ut[8] = {0};
		for (int64_t j = i; j < n; j++) gt[j - i] = g[j], ut[j - i] = u[j];
		_mm256_storeu_ps(gt, sw_swiglu8(_mm256_loadu_ps(gt), _mm256_loadu_ps(ut)));
		for (int64_t j = i; j < n; j++) g[j] = gt[j - i];
	}
}
