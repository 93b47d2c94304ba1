//go:build amd64 && cgo

// x86-64 kernels of MatMul. The file is compiled for plain x86-64; each kernel carries its
// own target attribute, and Go picks the level at run time (cpu_amd64.go), so the binary
// runs on any x86-64 CPU.

#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "vecdot_amd64.h"

// GGML type ids (engine/quant/types.go).
enum {
	VD_F32 = 0, VD_F16 = 1, VD_Q4_0 = 2, VD_Q4_1 = 3, VD_Q5_0 = 6, VD_Q5_1 = 7, VD_Q8_0 = 8,
	VD_Q2_K = 10, VD_Q3_K = 11, VD_Q4_K = 12, VD_Q5_K = 13, VD_Q6_K = 14, VD_IQ4_NL = 20,
	VD_IQ4_XS = 23, VD_BF16 = 30, VD_MXFP4 = 39,
};

// The 4-bit codebooks (types.go: KValuesIQ4NL, KValuesMXFP4 doubled).
static const int8_t vd_kv_iq4nl[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
static const int8_t vd_kv_mxfp4[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

// vd_act is one Activations, as MatMul passes it.
typedef struct {
	const int8_t *q;  // n*cols int8 values
	const float *d;   // scale per block
	const int16_t *s; // sum per 32-block, or per 16 values for 256-blocks
	const float *f;   // n*cols floats (float activations)
	int64_t cols, n;
} vd_act;

// vd_dec32 is one decoded 32-value weight block (see VD_ROWS32X4 in vecdot_kern.h).
typedef struct {
	__m256i u;  // unsigned codes, or |w| for signed types
	__m256i sg; // signed types: w, whose signs go onto the activations
	float d, m; // scale, and min (Q4_1, Q5_1)
} vd_dec32;

// vd_e8m0_half: MXFP4's exponent byte as 2^(e-128) (E8M0ToFP32Half).
static inline float vd_e8m0_half(uint8_t e) {
	const uint32_t bits = e < 2 ? (0x00200000u << e) : ((uint32_t)(e - 1) << 23);
	float f;
	memcpy(&f, &bits, 4);
	return f;
}

static inline float vd_bf16(uint16_t h) {
	const uint32_t bits = (uint32_t)h << 16;
	float f;
	memcpy(&f, &bits, 4);
	return f;
}

// VD_PREFETCH: how far ahead in the weight row the loops ask for cache lines. Prefetching
// past the end of a row (or of the weights) is harmless: prefetches never fault. 4096 beat
// 256 and 1024 on a 16-core Xeon VM (4096x4096 matvec, 1 GiB of weights, 16 threads: Q4_K
// 74-79 vs 69 GB/s, Q6_K 92-98 vs 75, Q8_0 95-98 vs 79-85; MXFP4 about even, 47-50 vs 53).
#ifndef VD_PREFETCH
#define VD_PREFETCH 4096
#endif

#define VD_T __attribute__((target("avx2,fma,f16c")))
#define VD(x) vd_##x##_avx2
#include "vecdot_kern.h"
#undef VD_T
#undef VD

// The AVX-512 level keeps 256-bit vectors (memory bound; no zmm clock penalty) but gets
// VNNI's one-instruction int8 dot and the EVEX register file.
#define VD_T __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")))
#define VD(x) vd_##x##_vnni
#define VD_VNNI 1
#include "vecdot_kern.h"
#undef VD_T
#undef VD
#undef VD_VNNI

int vd_matmul(int level, int type, const uint8_t *w, int64_t row_bytes, int64_t cols, const int8_t *aq,
              const float *ad, const int16_t *as, const float *af, int64_t n, float *y, int64_t ldy, int64_t r0,
              int64_t r1) {
	const vd_act a = {aq, ad, as, af, cols, n};
	switch (level) {
	case VD_LEVEL_AVX2:
		return vd_run_avx2(type, w, row_bytes, &a, y, ldy, r0, r1);
	case VD_LEVEL_AVX512VNNI:
		return vd_run_vnni(type, w, row_bytes, &a, y, ldy, r0, r1);
	}
	return -1;
}

int vd_quantize(int level, const float *x, int64_t nb, int bsz, int8_t *q, float *d, int16_t *sums) {
	switch (level) {
	case VD_LEVEL_AVX2:
		vd_quantize_avx2(x, nb, bsz, q, d, sums);
		return 0;
	case VD_LEVEL_AVX512VNNI:
		vd_quantize_vnni(x, nb, bsz, q, d, sums);
		return 0;
	}
	return -1;
}
