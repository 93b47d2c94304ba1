//go:build amd64 && cgo

// x86-64 kernels of MatMul. The file is compiled for plain x86-64; each kernel carries its
// own target attribute, and Go picks the level at run time (cpu_amd64.go), so the binary
// runs on any x86-64 CPU.

#include <immintrin.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "vecdot_amd64.h"
#include "vecdot_iq_grids.h"

// GGML type ids (engine/quant/types.go).
enum {
	VD_F32 = 0, VD_F16 = 1, VD_Q4_0 = 2, VD_Q4_1 = 3, VD_Q5_0 = 6, VD_Q5_1 = 7, VD_Q8_0 = 8,
	VD_Q2_K = 10, VD_Q3_K = 11, VD_Q4_K = 12, VD_Q5_K = 13, VD_Q6_K = 14, VD_IQ2_XXS = 16,
	VD_IQ2_XS = 17, VD_IQ3_XXS = 18, VD_IQ4_NL = 20, VD_IQ3_S = 21, VD_IQ2_S = 22, VD_IQ4_XS = 23,
	VD_BF16 = 30, VD_MXFP4 = 39,
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

// vd_p32 is one decoded block of a signed 32-value type (see VD_ROWS32T in vecdot_kern.h).
typedef struct {
	int8_t w[32];  // the values
	int32_t c[8];  // VNNI: -128 x each four values' sum; AVX2: |w| as bytes (maddubs would saturate on a + 128)
} vd_p32;

// vd_q4k_pre: one Q4_K block of a weight row decoded once for all the activation rows of a
// call: the sub-blocks' scales, the mins times dmin, and d. The tile broadcasts each scale
// from memory (one load): kept as sixteen-lane vectors they cost eight stores a block here
// and 256 bytes of cache each, and the products of 3-8 activation rows ran 10-13% slower.
typedef struct {
	int16_t sc[8];
	float fm[8];
	float d;
} vd_q4k_pre;

// vd_i256: one 256-value block of an IQ type, Q2_K or Q3_K decoded once for the tiles of
// a call (i256_tile in vecdot_kern.h): the values as bytes (signed for the IQ types, none
// of which is 0, so sign_epi8 puts their signs onto the activations; Q2_K and Q3_K codes
// unsigned), the integer scale of each 16 values, Q2_K's mins, and the float scales.
// 352 bytes, a multiple of 32, so every w of a 32-aligned array is aligned too.
typedef struct {
	int8_t w[256];
	int16_t sc[16];
	int16_t m[16];
	float d, dmin;
	float pad[6];
} vd_i256;

// vd_shuf16_ctrl[lo][hi]: the _mm256_shuffle_epi8 control that copies int16 element lo of
// the low 128-bit lane over that lane and element hi of the high lane over the high lane.
#define VD_W16(j) 2 * (j), 2 * (j) + 1
#define VD_W16X8(j) VD_W16(j), VD_W16(j), VD_W16(j), VD_W16(j), VD_W16(j), VD_W16(j), VD_W16(j), VD_W16(j)
#define VD_CTRL(lo, hi) {VD_W16X8(lo), VD_W16X8(hi)}
#define VD_CTRL_ROW(lo)                                                                                         \
	{VD_CTRL(lo, 0), VD_CTRL(lo, 1), VD_CTRL(lo, 2), VD_CTRL(lo, 3),                                        \
	 VD_CTRL(lo, 4), VD_CTRL(lo, 5), VD_CTRL(lo, 6), VD_CTRL(lo, 7)}
static const uint8_t vd_shuf16_ctrl[8][8][32] __attribute__((aligned(32))) = {
	VD_CTRL_ROW(0), VD_CTRL_ROW(1), VD_CTRL_ROW(2), VD_CTRL_ROW(3),
	VD_CTRL_ROW(4), VD_CTRL_ROW(5), VD_CTRL_ROW(6), VD_CTRL_ROW(7),
};
#undef VD_CTRL_ROW
#undef VD_CTRL
#undef VD_W16X8
#undef VD_W16

// vd_e8m0_bits: MXFP4's exponent byte e as the float32 bits of 2^(e-128)
// (E8M0ToFP32Half): (e-1)<<23, and float32 subnormals for e < 2. A table is two
// instructions where the arithmetic with its special case took about six.
static const uint32_t vd_e8m0_bits[256] = {
	0x00200000, 0x00400000, 0x00800000, 0x01000000, 0x01800000, 0x02000000, 0x02800000, 0x03000000,
	0x03800000, 0x04000000, 0x04800000, 0x05000000, 0x05800000, 0x06000000, 0x06800000, 0x07000000,
	0x07800000, 0x08000000, 0x08800000, 0x09000000, 0x09800000, 0x0a000000, 0x0a800000, 0x0b000000,
	0x0b800000, 0x0c000000, 0x0c800000, 0x0d000000, 0x0d800000, 0x0e000000, 0x0e800000, 0x0f000000,
	0x0f800000, 0x10000000, 0x10800000, 0x11000000, 0x11800000, 0x12000000, 0x12800000, 0x13000000,
	0x13800000, 0x14000000, 0x14800000, 0x15000000, 0x15800000, 0x16000000, 0x16800000, 0x17000000,
	0x17800000, 0x18000000, 0x18800000, 0x19000000, 0x19800000, 0x1a000000, 0x1a800000, 0x1b000000,
	0x1b800000, 0x1c000000, 0x1c800000, 0x1d000000, 0x1d800000, 0x1e000000, 0x1e800000, 0x1f000000,
	0x1f800000, 0x20000000, 0x20800000, 0x21000000, 0x21800000, 0x22000000, 0x22800000, 0x23000000,
	0x23800000, 0x24000000, 0x24800000, 0x25000000, 0x25800000, 0x26000000, 0x26800000, 0x27000000,
	0x27800000, 0x28000000, 0x28800000, 0x29000000, 0x29800000, 0x2a000000, 0x2a800000, 0x2b000000,
	0x2b800000, 0x2c000000, 0x2c800000, 0x2d000000, 0x2d800000, 0x2e000000, 0x2e800000, 0x2f000000,
	0x2f800000, 0x30000000, 0x30800000, 0x31000000, 0x31800000, 0x32000000, 0x32800000, 0x33000000,
	0x33800000, 0x34000000, 0x34800000, 0x35000000, 0x35800000, 0x36000000, 0x36800000, 0x37000000,
	0x37800000, 0x38000000, 0x38800000, 0x39000000, 0x39800000, 0x3a000000, 0x3a800000, 0x3b000000,
	0x3b800000, 0x3c000000, 0x3c800000, 0x3d000000, 0x3d800000, 0x3e000000, 0x3e800000, 0x3f000000,
	0x3f800000, 0x40000000, 0x40800000, 0x41000000, 0x41800000, 0x42000000, 0x42800000, 0x43000000,
	0x43800000, 0x44000000, 0x44800000, 0x45000000, 0x45800000, 0x46000000, 0x46800000, 0x47000000,
	0x47800000, 0x48000000, 0x48800000, 0x49000000, 0x49800000, 0x4a000000, 0x4a800000, 0x4b000000,
	0x4b800000, 0x4c000000, 0x4c800000, 0x4d000000, 0x4d800000, 0x4e000000, 0x4e800000, 0x4f000000,
	0x4f800000, 0x50000000, 0x50800000, 0x51000000, 0x51800000, 0x52000000, 0x52800000, 0x53000000,
	0x53800000, 0x54000000, 0x54800000, 0x55000000, 0x55800000, 0x56000000, 0x56800000, 0x57000000,
	0x57800000, 0x58000000, 0x58800000, 0x59000000, 0x59800000, 0x5a000000, 0x5a800000, 0x5b000000,
	0x5b800000, 0x5c000000, 0x5c800000, 0x5d000000, 0x5d800000, 0x5e000000, 0x5e800000, 0x5f000000,
	0x5f800000, 0x60000000, 0x60800000, 0x61000000, 0x61800000, 0x62000000, 0x62800000, 0x63000000,
	0x63800000, 0x64000000, 0x64800000, 0x65000000, 0x65800000, 0x66000000, 0x66800000, 0x67000000,
	0x67800000, 0x68000000, 0x68800000, 0x69000000, 0x69800000, 0x6a000000, 0x6a800000, 0x6b000000,
	0x6b800000, 0x6c000000, 0x6c800000, 0x6d000000, 0x6d800000, 0x6e000000, 0x6e800000, 0x6f000000,
	0x6f800000, 0x70000000, 0x70800000, 0x71000000, 0x71800000, 0x72000000, 0x72800000, 0x73000000,
	0x73800000, 0x74000000, 0x74800000, 0x75000000, 0x75800000, 0x76000000, 0x76800000, 0x77000000,
	0x77800000, 0x78000000, 0x78800000, 0x79000000, 0x79800000, 0x7a000000, 0x7a800000, 0x7b000000,
	0x7b800000, 0x7c000000, 0x7c800000, 0x7d000000, 0x7d800000, 0x7e000000, 0x7e800000, 0x7f000000,
};

static inline float vd_e8m0_half(uint8_t e) {
	float f;
	memcpy(&f, &vd_e8m0_bits[e], 4);
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

__attribute__((target("avx2"))) uint64_t vd_read_sum(const uint8_t *p, int64_t n) {
	__m256i s0 = _mm256_setzero_si256(), s1 = s0, s2 = s0, s3 = s0;
	for (int64_t i = 0; i + 128 <= n; i += 128) {
		s0 = _mm256_add_epi64(s0, _mm256_loadu_si256((const __m256i *)(p + i)));
		s1 = _mm256_add_epi64(s1, _mm256_loadu_si256((const __m256i *)(p + i + 32)));
		s2 = _mm256_add_epi64(s2, _mm256_loadu_si256((const __m256i *)(p + i + 64)));
		s3 = _mm256_add_epi64(s3, _mm256_loadu_si256((const __m256i *)(p + i + 96)));
	}
	uint64_t w[4];
	_mm256_storeu_si256((__m256i *)w, _mm256_add_epi64(_mm256_add_epi64(s0, s1), _mm256_add_epi64(s2, s3)));
	return w[0] + w[1] + w[2] + w[3];
}
