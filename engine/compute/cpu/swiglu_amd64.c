//go:build amd64 && cgo

// SwiGLU with an 8-lane exp: math.Exp in float64 took about 5% of a CPU decode step on
// Qwen3-30B-A3B's shape, and ran while the other threads waited.
#include <immintrin.h>

#include "swiglu_amd64.h"

#define SW_T __attribute__((target("avx2,fma")))

// sw_exp is e^x: x = n*ln2 + r with |r| <= ln2/2, e^r by its Taylor series to r^7 (relative
// error under 2e-7), times 2^n through the exponent bits. Below -87 it gives e^-87 (1 + that
// is 1), above 88 infinity, as float32 would.
static inline SW_T __m256 sw_exp(__m256 x0) {
	const __m256 x = _mm256_min_ps(_mm256_max_ps(x0, _mm256_set1_ps(-87.0f)), _mm256_set1_ps(88.0f));
	const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
	                                 _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
	__m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693145751953125f), x); // ln2, high bits
	r = _mm256_fnmadd_ps(n, _mm256_set1_ps(1.42860682030941723212e-6f), r); // ln2, the rest
	__m256 p = _mm256_set1_ps(1.0f / 5040);
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 720));
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120));
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24));
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6));
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
	const __m256i e = _mm256_slli_epi32(_mm256_cvtps_epi32(n), 23);
	const __m256 y = _mm256_castsi256_ps(_mm256_add_epi32(_mm256_castps_si256(p), e));
	return _mm256_blendv_ps(y, _mm256_set1_ps(__builtin_inff()), _mm256_cmp_ps(x0, _mm256_set1_ps(88.0f), _CMP_GT_OQ));
}

static inline SW_T __m256 sw_swiglu8(__m256 g, __m256 u) {
	const __m256 e = sw_exp(_mm256_sub_ps(_mm256_setzero_ps(), g));
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
