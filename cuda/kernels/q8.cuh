// q8.cuh: the 8-bit quantisation rule, and loads and integer helpers the 8-bit-activation
// kernels share (mul_mat_vec_q8.cu, gemm_q8.cu): dp4a, word loads from 2-byte aligned and MXFP4 blocks, and a 16-entry int8
// codebook lookup on 4 packed indices.
#pragma once

#include "common.cuh"

// The 8-bit rule every kernel that writes quantize_q8's layout follows (quantize_q8,
// rms_norm_q8, attention_merge), so that their bytes agree: a group's scale is
// d = max|x| / 127 and a value is rint(x / d), 0 in an all-zero group.
static __device__ __forceinline__ float q8_scale(float amax) { return amax / 127.f; }
static __device__ __forceinline__ int q8_value(float x, float d) { return d > 0.f ? __float2int_rn(x / d) : 0; }

// q8_warp quantises a group held one value a lane: the lane's value, and the scale in d.
static __device__ __forceinline__ int q8_warp(float x, float &d) {
	d = q8_scale(warp_max(fabsf(x)));
	return q8_value(x, d);
}

// One warp quantises the 32-group blockIdx.x * warps + warp of row blockIdx.y: q = rint(x / d)
// with d = max|x| / 127, into row r of xq (row_bytes apart): q[cols], then per group the
// float d (SUMS false: quantize_q8's rows) or float2 (d, d * sum of q) (SUMS true:
// quantize_q8_sums', for gemm_q8's min terms).
template <bool SUMS>
static __device__ __forceinline__ void quantize_q8_group(const float *x, int8_t *xq, int cols, int row_bytes) {
	const int g = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5), lane = threadIdx.x & 31;
	if (g >= cols / 32) return;
	const long long r = blockIdx.y;
	float d;
	const int q = q8_warp(x[r * cols + g * 32 + lane], d);
	int8_t *row = xq + r * row_bytes;
	row[g * 32 + lane] = (int8_t)q;
	if (SUMS) {
		const float sum = warp_sum((float)q); // exact: at most 32 x 127
		if (lane == 0) ((float2 *)(row + cols))[g] = make_float2(d, d * sum);
	} else if (lane == 0) {
		((float *)(row + cols))[g] = d;
	}
}

static __device__ __forceinline__ int dp4a(int a, int b, int c) {
#if __CUDA_ARCH__ >= 610
	return __dp4a(a, b, c);
#else
	const int8_t *x = (const int8_t *)&a, *y = (const int8_t *)&b;
	return c + x[0] * y[0] + x[1] * y[1] + x[2] * y[2] + x[3] * y[3];
#endif
}

// 16 bytes from a 2-byte aligned address as 4 words.
static __device__ __forceinline__ void ld16_a2(const uint8_t *p, int (&w)[4]) {
	const uint16_t *q = (const uint16_t *)p;
#pragma unroll
	for (int i = 0; i < 4; i++) w[i] = (int)((uint32_t)q[2 * i] | ((uint32_t)q[2 * i + 1] << 16));
}
static __device__ __forceinline__ void ld16_i(const int8_t *p, int (&w)[4]) {
	const int4 v = *(const int4 *)p;
	w[0] = v.x; w[1] = v.y; w[2] = v.z; w[3] = v.w;
}

// 16 bytes from a 2-byte aligned address: four or five aligned words and funnel shifts
// (the fifth only when p is not 4-byte aligned, so no word outside the 16 bytes is read).
static __device__ __forceinline__ void ld16_a2w(const uint8_t *p, uint32_t (&w)[4]) {
	const uint32_t off = (uint32_t)((uintptr_t)p & 3);
	const uint32_t *q = (const uint32_t *)(p - off);
	const uint32_t a0 = q[0], a1 = q[1], a2 = q[2], a3 = q[3];
	const uint32_t a4 = off ? q[4] : 0u;
	w[0] = __funnelshift_r(a0, a1, 8 * off);
	w[1] = __funnelshift_r(a1, a2, 8 * off);
	w[2] = __funnelshift_r(a2, a3, 8 * off);
	w[3] = __funnelshift_r(a3, a4, 8 * off);
}
// MXFP4's 17-byte block at any address: its exponent byte and its 16 bytes of nibbles, from
// the five aligned words that hold them.
static __device__ __forceinline__ uint32_t ld_mxfp4(const uint8_t *p, uint32_t (&w)[4]) {
	const uint32_t off = (uint32_t)((uintptr_t)p & 3);
	const uint32_t *q = (const uint32_t *)(p - off);
	const uint32_t a0 = q[0], a1 = q[1], a2 = q[2], a3 = q[3], a4 = q[4];
	const uint32_t sh = 8 * off + 8; // the nibbles start one byte after the exponent (32: clamped)
	w[0] = __funnelshift_rc(a0, a1, sh);
	w[1] = __funnelshift_rc(a1, a2, sh);
	w[2] = __funnelshift_rc(a2, a3, sh);
	w[3] = __funnelshift_rc(a3, a4, sh);
	return (a0 >> (8 * off)) & 0xFFu;
}

// 4 packed 4-bit indices (one per byte) through a 16-entry int8 table held in 4 words.
static __device__ __forceinline__ int lut16(uint32_t q, uint32_t t0, uint32_t t1, uint32_t t2, uint32_t t3) {
	const uint32_t v = q & 0x07070707u;
	const uint32_t s = v | (v >> 4);
	const uint32_t sel = (s & 0xFFu) | ((s >> 8) & 0xFF00u);
	const uint32_t lo = __byte_perm(t0, t1, sel), hi = __byte_perm(t2, t3, sel);
	const uint32_t m = ((q >> 3) & 0x01010101u) * 0xFFu;
	return (int)((hi & m) | (lo & ~m));
}

// The MXFP4 codebook, doubled (kvalues_mxfp4 {0,1,2,3,4,6,8,12,0,-1,-2,-3,-4,-6,-8,-12}; the
// block scale is halved to match, e8m0_half), on 4 packed indices.
static __device__ __forceinline__ int lut_mxfp4(uint32_t q) {
	return lut16(q, 0x03020100u, 0x0C080604u, 0xFDFEFF00u, 0xF4F8FAFCu);
}

// The IQ4_NL codebook ({-127,-104,-83,-65,-49,-35,-22,-10,1,13,25,38,53,69,89,113}), which
// IQ4_XS shares, on 4 packed indices.
static __device__ __forceinline__ int lut_iq4nl(uint32_t q) {
	return lut16(q, 0xBFAD9881u, 0xF6EADDCFu, 0x26190D01u, 0x71594535u);
}
