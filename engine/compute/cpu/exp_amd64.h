// An 8-lane e^x for the kernels of this package (AVX2 + FMA).
#ifndef STRATA_EXP_AMD64_H
#define STRATA_EXP_AMD64_H

#include <immintrin.h>

// strata_exp8 is e^x: x = n*ln2 + r with |r| <= ln2/2, e^r by its Taylor series to r^7
// (relative error under 2e-7), times 2^n through the exponent bits. Below -87 it gives e^-87
// (1 + that is 1), above 88 infinity, as float32 would.
static inline __attribute__((target("avx2,fma"))) __m256 strata_exp8(__m256 x0) {
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

#endif
