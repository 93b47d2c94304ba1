// common.cuh: GGML block formats (ggml-common.h layouts, byte for byte) and the one
// primitive every kernel builds on: deq8<T>(block, chunk, v) decodes the 8 consecutive
// values [8*chunk, 8*chunk+8) of one block into registers.
#pragma once

#include <cuda_fp16.h>
#include <stdint.h>

// grid_dependency_entry opens a kernel that the host may launch with programmatic stream
// serialization (sm_90 and later; cuda's launchesEarly lists them): such a launch can start
// while the kernel ahead of it in the stream still runs, so it first waits here until that
// grid has ended and its writes are visible, then lets the kernel after it launch early in
// turn, which takes that kernel's launch off the chain of a decode step's small kernels. In
// an ordinary launch, and before sm_90, it does nothing.
static __device__ __forceinline__ void grid_dependency_entry() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
	asm volatile("griddepcontrol.wait;" ::: "memory");
	asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// Type ids are GGML's.
#define T_F32 0
#define T_F16 1
#define T_Q4_0 2
#define T_Q4_1 3
#define T_Q5_0 6
#define T_Q5_1 7
#define T_Q8_0 8
#define T_Q2_K 10
#define T_Q3_K 11
#define T_Q4_K 12
#define T_Q5_K 13
#define T_Q6_K 14
#define T_IQ2_XXS 16
#define T_IQ2_XS 17
#define T_IQ3_XXS 18
#define T_IQ4_NL 20
#define T_IQ3_S 21
#define T_IQ2_S 22
#define T_IQ4_XS 23
#define T_BF16 30
#define T_MXFP4 39

// Geometry: QK values per block, BYTES per block. Plain types use 8-value "blocks" so
// that every type shares the chunk-of-8 decode.
template <int T> struct TypeInfo;
#define TYPEINFO(t, qk, bytes)                 \
	template <> struct TypeInfo<t> {           \
		static constexpr int QK = qk;          \
		static constexpr int BYTES = bytes;    \
		static constexpr int CPB = qk / 8;     \
	};
TYPEINFO(T_F32, 8, 32)
TYPEINFO(T_F16, 8, 16)
TYPEINFO(T_BF16, 8, 16)
TYPEINFO(T_Q4_0, 32, 18)
TYPEINFO(T_Q4_1, 32, 20)
TYPEINFO(T_Q5_0, 32, 22)
TYPEINFO(T_Q5_1, 32, 24)
TYPEINFO(T_Q8_0, 32, 34)
TYPEINFO(T_IQ4_NL, 32, 18)
TYPEINFO(T_MXFP4, 32, 17)
TYPEINFO(T_Q2_K, 256, 84)
TYPEINFO(T_Q3_K, 256, 110)
TYPEINFO(T_Q4_K, 256, 144)
TYPEINFO(T_Q5_K, 256, 176)
TYPEINFO(T_Q6_K, 256, 210)
TYPEINFO(T_IQ4_XS, 256, 136)
TYPEINFO(T_IQ2_XXS, 256, 66)
TYPEINFO(T_IQ2_XS, 256, 74)
TYPEINFO(T_IQ2_S, 256, 82)
TYPEINFO(T_IQ3_XXS, 256, 98)
TYPEINFO(T_IQ3_S, 256, 110)
#undef TYPEINFO

static __device__ __forceinline__ float ld_half(const uint8_t *p) {
	return __half2float(__ushort_as_half(*(const uint16_t *)p));
}
static __device__ __forceinline__ uint16_t ld_u16(const uint8_t *p) { return *(const uint16_t *)p; }

// 8 bytes from a 2-byte aligned address, as two 32-bit words.
static __device__ __forceinline__ void ld8_a2(const uint8_t *p, uint32_t &lo, uint32_t &hi) {
	const uint16_t *q = (const uint16_t *)p;
	lo = (uint32_t)q[0] | ((uint32_t)q[1] << 16);
	hi = (uint32_t)q[2] | ((uint32_t)q[3] << 16);
}
// 8 bytes from an 8-byte aligned address.
static __device__ __forceinline__ void ld8_a8(const uint8_t *p, uint32_t &lo, uint32_t &hi) {
	uint2 v = *(const uint2 *)p;
	lo = v.x;
	hi = v.y;
}
// 8 bytes from a 4-byte aligned address.
static __device__ __forceinline__ void ld8_a4(const uint8_t *p, uint32_t &lo, uint32_t &hi) {
	const uint32_t *q = (const uint32_t *)p;
	lo = q[0];
	hi = q[1];
}
// 8 bytes from any address: two or three aligned words and funnel shifts, never reading a
// word that holds none of the 8 bytes.
static __device__ __forceinline__ void ld8_a1(const uint8_t *p, uint32_t &lo, uint32_t &hi) {
	const uint32_t off = (uint32_t)((uintptr_t)p & 3);
	const uint32_t *w = (const uint32_t *)(p - off);
	const uint32_t w0 = w[0], w1 = w[1];
	const uint32_t w2 = off ? w[2] : 0u;
	lo = __funnelshift_r(w0, w1, 8 * off);
	hi = __funnelshift_r(w1, w2, 8 * off);
}
static __device__ __forceinline__ uint32_t byte_of(uint32_t lo, uint32_t hi, int i) {
	return ((i < 4 ? lo : hi) >> (8 * (i & 3))) & 0xFF;
}

// The two 16-entry codebooks as arithmetic on constants: an indexed local array would put
// the table on the stack and read it back a byte at a time.
static __device__ __forceinline__ float kv_iq4nl(int i) {
	// {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113} as bytes
	const uint32_t lo = __byte_perm(0xBFAD9881u, 0xF6EADDCFu, i & 7);
	const uint32_t hi = __byte_perm(0x26190D01u, 0x71594535u, i & 7);
	return (float)(int8_t)((i & 8 ? hi : lo) & 0xFF);
}
static __device__ __forceinline__ float kv_mxfp4(int i) {
	// magnitudes {0, 1, 2, 3, 4, 6, 8, 12} as nibbles; bit 3 is the sign
	const int mag = (int)((0xC8643210u >> (4 * (i & 7))) & 0xF);
	return (float)(i & 8 ? -mag : mag);
}
// E8M0 as 2^(e-128): the half scale that pairs with the doubled MXFP4 codebook.
static __device__ __forceinline__ float e8m0_half(uint32_t e) {
	return __uint_as_float(e < 2 ? (0x00200000u << e) : ((e - 1) << 23));
}

template <int T> static __device__ __forceinline__ void deq8(const uint8_t *b, int c, float (&v)[8]);

template <> __device__ __forceinline__ void deq8<T_F32>(const uint8_t *b, int, float (&v)[8]) {
	const float4 *p = (const float4 *)b;
	float4 a = p[0], d = p[1];
	v[0] = a.x; v[1] = a.y; v[2] = a.z; v[3] = a.w;
	v[4] = d.x; v[5] = d.y; v[6] = d.z; v[7] = d.w;
}
template <> __device__ __forceinline__ void deq8<T_F16>(const uint8_t *b, int, float (&v)[8]) {
	uint4 u = *(const uint4 *)b;
	const uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
	for (int i = 0; i < 4; i++) {
		float2 f = __half22float2(*(const __half2 *)&w[i]);
		v[2 * i] = f.x;
		v[2 * i + 1] = f.y;
	}
}
template <> __device__ __forceinline__ void deq8<T_BF16>(const uint8_t *b, int, float (&v)[8]) {
	uint4 u = *(const uint4 *)b;
	const uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
	for (int i = 0; i < 4; i++) {
		v[2 * i] = __uint_as_float(w[i] << 16);
		v[2 * i + 1] = __uint_as_float(w[i] & 0xFFFF0000u);
	}
}
// 32-value blocks: values 0..15 are the low nibbles of qs[0..15], 16..31 the high ones.
template <> __device__ __forceinline__ void deq8<T_Q4_0>(const uint8_t *b, int c, float (&v)[8]) {
	const float d = ld_half(b);
	uint32_t lo, hi;
	ld8_a2(b + 2 + (c & 1) * 8, lo, hi);
	const int sh = (c >> 1) * 4;
#pragma unroll
	for (int i = 0; i < 8; i++) v[i] = (float)((int)((byte_of(lo, hi, i) >> sh) & 0xF) - 8) * d;
}
template <> __device__ __forceinline__ void deq8<T_Q4_1>(const uint8_t *b, int c, float (&v)[8]) {
	const float d = ld_half(b), m = ld_half(b + 2);
	uint32_t lo, hi;
	ld8_a4(b + 4 + (c & 1) * 8, lo, hi);
	const int sh = (c >> 1) * 4;
#pragma unroll
	for (int i = 0; i < 8; i++) v[i] = (float)((byte_of(lo, hi, i) >> sh) & 0xF) * d + m;
}
template <> __device__ __forceinline__ void deq8<T_Q5_0>(const uint8_t *b, int c, float (&v)[8]) {
	const float d = ld_half(b);
	const uint32_t qh = (uint32_t)ld_u16(b + 2) | ((uint32_t)ld_u16(b + 4) << 16);
	uint32_t lo, hi;
	ld8_a2(b + 6 + (c & 1) * 8, lo, hi);
	const int sh = (c >> 1) * 4;
#pragma unroll
	for (int i = 0; i < 8; i++) {
		const int q = (int)(((byte_of(lo, hi, i) >> sh) & 0xF) | (((qh >> (8 * c + i)) & 1) << 4));
		v[i] = (float)(q - 16) * d;
	}
}
template <> __device__ __forceinline__ void deq8<T_Q5_1>(const uint8_t *b, int c, float (&v)[8]) {
	const float d = ld_half(b), m = ld_half(b + 2);
	const uint32_t qh = *(const uint32_t *)(b + 4);
	uint32_t lo, hi;
	ld8_a4(b + 8 + (c & 1) * 8, lo, hi);
	const int sh = (c >> 1) * 4;
#pragma unroll
	for (int i = 0; i < 8; i++) {
		const uint32_t q = ((byte_of(lo, hi, i) >> sh) & 0xF) | (((qh >> (8 * c + i)) & 1) << 4);
		v[i] = (float)q * d + m;
	}
}
template <> __device__ __forceinline__ void deq8<T_Q8_0>(const uint8_t *b, int c, float (&v)[8]) {
	const float d = ld_half(b);
	uint32_t lo, hi;
	ld8_a2(b + 2 + c * 8, lo, hi);
#pragma unroll
	for (int i = 0; i < 8; i++) v[i] = (float)(int8_t)byte_of(lo, hi, i) * d;
}
template <> __device__ __forceinline__ void deq8<T_IQ4_NL>(const uint8_t *b, int c, float (&v)[8]) {
	const float d = ld_half(b);
	uint32_t lo, hi;
	ld8_a2(b + 2 + (c & 1) * 8, lo, hi);
	const int sh = (c >> 1) * 4;
#pragma unroll
	for (int i = 0; i < 8; i++) v[i] = kv_iq4nl((byte_of(lo, hi, i) >> sh) & 0xF) * d;
}
template <> __device__ __forceinline__ void deq8<T_MXFP4>(const uint8_t *b, int c, float (&v)[8]) {
	const float d = e8m0_half(b[0]);
	uint32_t lo, hi;
	ld8_a1(b + 1 + (c & 1) * 8, lo, hi);
	const int sh = (c >> 1) * 4;
#pragma unroll
	for (int i = 0; i < 8; i++) v[i] = kv_mxfp4((byte_of(lo, hi, i) >> sh) & 0xF) * d;
}
// IQ4_XS: d, scales_h (u16), scales_l[4], qs[128]; 8 sub-blocks of 32 laid out as IQ4_NL.
template <> __device__ __forceinline__ void deq8<T_IQ4_XS>(const uint8_t *b, int c, float (&v)[8]) {
	const int ib = c >> 2, r = c & 3;
	const uint32_t sh_ = ld_u16(b + 2);
	const int ls = (int)(((b[4 + (ib >> 1)] >> (4 * (ib & 1))) & 0xF) | (((sh_ >> (2 * ib)) & 3) << 4));
	const float dl = ld_half(b) * (float)(ls - 32);
	uint32_t lo, hi;
	ld8_a8(b + 8 + 16 * ib + (r & 1) * 8, lo, hi);
	const int sh = (r >> 1) * 4;
#pragma unroll
	for (int i = 0; i < 8; i++) v[i] = kv_iq4nl((byte_of(lo, hi, i) >> sh) & 0xF) * dl;
}
// The 6-bit scale and min of sub-block j in Q4_K/Q5_K's 12 packed bytes (q 4-byte
// aligned), without branches so that the loads of several chunks can be in flight at once.
static __device__ __forceinline__ void scale_min_k4(int j, const uint8_t *q, float &sc, float &m) {
	const uint32_t *w = (const uint32_t *)q;
	const uint32_t w0 = w[0], w1 = w[1], w2 = w[2];
	const int s = 8 * (j & 3);
	const uint32_t a = (w0 >> s) & 0xFF, bb = (w1 >> s) & 0xFF, cc = (w2 >> s) & 0xFF;
	// j < 4: sc = q[j] & 63, m = q[j+4] & 63
	// j >= 4: sc = (q[j+4] & 15) | (q[j-4] >> 6) << 4, m = (q[j+4] >> 4) | (q[j] >> 6) << 4
	const uint32_t sc_hi = (cc & 0xF) | ((a >> 6) << 4), m_hi = (cc >> 4) | ((bb >> 6) << 4);
	sc = (float)(j < 4 ? (a & 63) : sc_hi);
	m = (float)(j < 4 ? (bb & 63) : m_hi);
}
// Q4_K: d, dmin, scales[12], qs[128]; sub-block j's values are nibble (j&1) of qs[32*(j/2)..].
template <> __device__ __forceinline__ void deq8<T_Q4_K>(const uint8_t *b, int c, float (&v)[8]) {
	const int j = c >> 2, r = c & 3;
	float sc, m;
	scale_min_k4(j, b + 4, sc, m);
	const float d1 = ld_half(b) * sc, m1 = ld_half(b + 2) * m;
	uint32_t lo, hi;
	ld8_a8(b + 16 + 32 * (j >> 1) + 8 * r, lo, hi);
	const int sh = (j & 1) * 4;
#pragma unroll
	for (int i = 0; i < 8; i++) v[i] = d1 * (float)((byte_of(lo, hi, i) >> sh) & 0xF) - m1;
}
// Q5_K: d, dmin, scales[12], qh[32], qs[128]; bit j of qh[l] is the fifth bit of value 32j+l.
template <> __device__ __forceinline__ void deq8<T_Q5_K>(const uint8_t *b, int c, float (&v)[8]) {
	const int j = c >> 2, r = c & 3;
	float sc, m;
	scale_min_k4(j, b + 4, sc, m);
	const float d1 = ld_half(b) * sc, m1 = ld_half(b + 2) * m;
	uint32_t lo, hi, hlo, hhi;
	ld8_a8(b + 48 + 32 * (j >> 1) + 8 * r, lo, hi);
	ld8_a8(b + 16 + 8 * r, hlo, hhi);
	const int sh = (j & 1) * 4;
#pragma unroll
	for (int i = 0; i < 8; i++) {
		const uint32_t q = ((byte_of(lo, hi, i) >> sh) & 0xF) | (((byte_of(hlo, hhi, i) >> j) & 1) << 4);
		v[i] = d1 * (float)q - m1;
	}
}
// Q6_K: ql[128], qh[64], scales[16] (int8), d. Value n: half h=n/128, quarter g, lane l.
template <> __device__ __forceinline__ void deq8<T_Q6_K>(const uint8_t *b, int c, float (&v)[8]) {
	const int n = 8 * c, h = n >> 7, g = (n >> 5) & 3, l = n & 31;
	const float d = ld_half(b + 208) * (float)(int8_t)b[192 + 8 * h + (l >> 4) + 2 * g];
	uint32_t lo, hi, hlo, hhi;
	ld8_a2(b + 64 * h + l + 32 * (g & 1), lo, hi);
	ld8_a2(b + 128 + 32 * h + l, hlo, hhi);
	const int sh = (g >> 1) * 4;
#pragma unroll
	for (int i = 0; i < 8; i++) {
		const int q = (int)(((byte_of(lo, hi, i) >> sh) & 0xF) | (((byte_of(hlo, hhi, i) >> (2 * g)) & 3) << 4));
		v[i] = d * (float)(q - 32);
	}
}
// Q2_K: scales[16] (4-bit scale | 4-bit min), qs[64], d, dmin.
template <> __device__ __forceinline__ void deq8<T_Q2_K>(const uint8_t *b, int c, float (&v)[8]) {
	const int n = 8 * c, h = n >> 7, j = (n >> 5) & 3, l = n & 31;
	const uint32_t s = b[8 * h + 2 * j + (l >> 4)];
	const float dl = ld_half(b + 80) * (float)(s & 0xF), ml = ld_half(b + 82) * (float)(s >> 4);
	uint32_t lo, hi;
	ld8_a4(b + 16 + 32 * h + l, lo, hi); // 84-byte blocks: only 4-byte aligned
#pragma unroll
	for (int i = 0; i < 8; i++) v[i] = dl * (float)((byte_of(lo, hi, i) >> (2 * j)) & 3) - ml;
}
// Q3_K: hmask[32], qs[64], scales[12] (6-bit, offset 32), d.
template <> __device__ __forceinline__ void deq8<T_Q3_K>(const uint8_t *b, int c, float (&v)[8]) {
	const int n = 8 * c, h = n >> 7, j = (n >> 5) & 3, l = n & 31;
	const int is = 8 * h + 2 * j + (l >> 4);
	const uint8_t *sc = b + 96;
	const int low = is < 8 ? (sc[is] & 0xF) : (sc[is - 8] >> 4);
	const int high = (sc[8 + (is & 3)] >> (2 * (is >> 2))) & 3;
	const float dl = ld_half(b + 108) * (float)((low | (high << 4)) - 32);
	uint32_t lo, hi, mlo, mhi;
	ld8_a2(b + 32 + 32 * h + l, lo, hi);
	ld8_a2(b + l, mlo, mhi);
	const int bit = 4 * h + j;
#pragma unroll
	for (int i = 0; i < 8; i++) {
		const int q = (int)((byte_of(lo, hi, i) >> (2 * j)) & 3) - (((byte_of(mlo, mhi, i) >> bit) & 1) ? 0 : 4);
		v[i] = dl * (float)q;
	}
}

#include "iq.cuh"

// Every type the kernels instantiate, as X(name, id).
#define STRATA_ALL_TYPES(X) \
	X(f32, T_F32)           \
	X(f16, T_F16)           \
	X(bf16, T_BF16)         \
	X(q4_0, T_Q4_0)         \
	X(q4_1, T_Q4_1)         \
	X(q5_0, T_Q5_0)         \
	X(q5_1, T_Q5_1)         \
	X(q8_0, T_Q8_0)         \
	X(iq4_nl, T_IQ4_NL)     \
	X(mxfp4, T_MXFP4)       \
	X(q2_K, T_Q2_K)         \
	X(q3_K, T_Q3_K)         \
	X(q4_K, T_Q4_K)         \
	X(q5_K, T_Q5_K)         \
	X(q6_K, T_Q6_K)         \
	X(iq4_xs, T_IQ4_XS)     \
	X(iq2_xxs, T_IQ2_XXS)   \
	X(iq2_xs, T_IQ2_XS)     \
	X(iq2_s, T_IQ2_S)       \
	X(iq3_xxs, T_IQ3_XXS)   \
	X(iq3_s, T_IQ3_S)

static __device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
	for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
	return v;
}
static __device__ __forceinline__ float warp_max(float v) {
#pragma unroll
	for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
	return v;
}

// The slot of a grouped GEMM's block (gemm_q in gemm.cu, gemm_q8.cu): slot e = blockIdx.z
// owns output rows slot_off[e] .. end (all n rows when slot_off is null), the block starts
// at row bm (tile rows bm_tile a block) and column bn (bn_tile), and multiplies expert
// slot_expert[e]'s weights W (0 when null). False: the slot has no rows for this block.
struct GemmSlot {
	int end, bm, bn;
	const uint8_t *W;
};
static __device__ __forceinline__ bool gemm_slot(const uint8_t *W, long long expert_stride, const int *slot_expert,
	const int *slot_off, int n, int bm_tile, int bn_tile, GemmSlot &s) {
	const int e = blockIdx.z;
	const int start = slot_off ? slot_off[e] : 0;
	s.end = slot_off ? slot_off[e + 1] : n;
	s.bm = start + blockIdx.y * bm_tile;
	s.bn = blockIdx.x * bn_tile;
	s.W = W + (slot_expert ? (long long)slot_expert[e] : 0ll) * expert_stride;
	return s.bm < s.end;
}

// 16 bytes from global to shared memory, of which the first n (0, 8 or 16) are read and the
// rest are zero: cp.async on sm_80+ (completed by cp_wait), a plain copy before.
static __device__ __forceinline__ void cp16(void *dst, const void *src, int n) {
#if __CUDA_ARCH__ >= 800
	const uint32_t d = (uint32_t)__cvta_generic_to_shared(dst);
	asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(src), "r"(n));
#else
	uint4 v = make_uint4(0, 0, 0, 0);
	if (n == 16) {
		v = *(const uint4 *)src;
	} else if (n == 8) {
		const uint2 h = *(const uint2 *)src;
		v.x = h.x;
		v.y = h.y;
	}
	*(uint4 *)dst = v;
#endif
}
static __device__ __forceinline__ void cp_commit() {
#if __CUDA_ARCH__ >= 800
	asm volatile("cp.async.commit_group;\n" ::);
#endif
}
// cp_wait<N>: all but the newest N committed groups have landed.
template <int N> static __device__ __forceinline__ void cp_wait() {
#if __CUDA_ARCH__ >= 800
	asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
#endif
}
