// iq.cuh: the IQ2/IQ3 grid types (ggml-common.h's block_iq2_xxs, block_iq2_xs, block_iq2_s,
// block_iq3_xxs, block_iq3_s). Values come 8 (IQ2) or 4 (IQ3) at a time as an index into a
// grid of unsigned byte vectors (iq_grids.cuh), with one sign bit per value and a 4-bit scale
// per 32 (IQ2_XS, IQ2_S: per 16) values:
//   IQ2_*:   x = d * (0.5 + s) / 4 * grid * sign
//   IQ3_XXS: x = d * (0.5 + s) / 2 * grid * sign
//   IQ3_S:   x = d * (1 + 2s)      * grid * sign
// IQ2_XXS, IQ2_XS and IQ3_XXS store 7 sign bits per 8 values; the 8th makes the count even.
// Included by common.cuh: deq8 here; the 8-bit dot products are in mul_mat_vec_q8_iq.cuh.
#pragma once

#include "iq_grids.cuh"

// The 8 signs of a 7-bit sign index: the 8th bit is the parity of the 7.
static __device__ __forceinline__ uint32_t ksigns7(uint32_t s) {
	s &= 127u;
	return s | ((__popc(s) & 1u) << 7);
}

// Byte j of w (4 grid bytes, all < 128) negated where bit j of s is set, as int8.
static __device__ __forceinline__ uint32_t sign4(uint32_t w, uint32_t s) {
	const uint32_t m = (((s & 0xFu) * 0x00204081u) & 0x01010101u) * 0xFFu;
	return __vsub4(w ^ m, m);
}

// A uint32 from a 2-byte aligned address.
static __device__ __forceinline__ uint32_t ld_u32_a2(const uint8_t *p) {
	return (uint32_t)ld_u16(p) | ((uint32_t)ld_u16(p + 2) << 16);
}

// Chunk c (values 8c..8c+7) of each type: group ib = c/4, position l = c%4 in it. Every
// function returns the chunk's 8 signed grid bytes as two words and its float scale.

// IQ2_XXS (66 bytes): d; per 32 values 4 grid index bytes, then a uint32 of four 7-bit sign
// indices and the 4-bit scale on top.
static __device__ __forceinline__ float iq2xxs_chunk(const uint8_t *b, int c, uint32_t &lo, uint32_t &hi) {
	const int ib = c >> 2, l = c & 3;
	const uint32_t aux = ld_u32_a2(b + 2 + 8 * ib + 4);
	const uint64_t g = iq2xxs_grid[b[2 + 8 * ib + l]];
	const uint32_t s = ksigns7(aux >> (7 * l));
	lo = sign4((uint32_t)g, s);
	hi = sign4((uint32_t)(g >> 32), s >> 4);
	return ld_half(b) * (0.5f + (float)(aux >> 28)) * 0.25f;
}
// IQ2_XS (74 bytes): d; 32 uint16 (9-bit grid index, 7-bit sign index); 8 scale bytes, two
// 4-bit scales each (values 0..15 and 16..31 of the group).
static __device__ __forceinline__ float iq2xs_chunk(const uint8_t *b, int c, uint32_t &lo, uint32_t &hi) {
	const int ib = c >> 2, l = c & 3;
	const uint32_t q = ld_u16(b + 2 + 2 * c);
	const uint64_t g = iq2xs_grid[q & 511];
	const uint32_t s = ksigns7(q >> 9);
	lo = sign4((uint32_t)g, s);
	hi = sign4((uint32_t)(g >> 32), s >> 4);
	return ld_half(b) * (0.5f + (float)((b[66 + ib] >> (4 * (l >> 1))) & 0xF)) * 0.25f;
}
// IQ2_S (82 bytes): d; qs[32] low index bytes; signs[32]; qh[8] (2 high index bits per 8
// values); scales[8] as IQ2_XS.
static __device__ __forceinline__ float iq2s_chunk(const uint8_t *b, int c, uint32_t &lo, uint32_t &hi) {
	const int ib = c >> 2, l = c & 3;
	const uint32_t idx = b[2 + c] | (((uint32_t)b[66 + ib] << (8 - 2 * l)) & 0x300u);
	const uint64_t g = iq2s_grid[idx];
	const uint32_t s = b[34 + c];
	lo = sign4((uint32_t)g, s);
	hi = sign4((uint32_t)(g >> 32), s >> 4);
	return ld_half(b) * (0.5f + (float)((b[74 + ib] >> (4 * (l >> 1))) & 0xF)) * 0.25f;
}
// IQ3_XXS (98 bytes): d; 64 grid index bytes (4 values each); per 32 values a uint32 of four
// 7-bit sign indices and the scale on top.
static __device__ __forceinline__ float iq3xxs_chunk(const uint8_t *b, int c, uint32_t &lo, uint32_t &hi) {
	const int ib = c >> 2, l = c & 3;
	const uint32_t aux = ld_u32_a2(b + 66 + 4 * ib);
	const uint32_t s = ksigns7(aux >> (7 * l));
	lo = sign4(iq3xxs_grid[b[2 + 2 * c]], s);
	hi = sign4(iq3xxs_grid[b[3 + 2 * c]], s >> 4);
	return ld_half(b) * (0.5f + (float)(aux >> 28)) * 0.5f;
}
// IQ3_S (110 bytes): d; qs[64] low index bytes; qh[8] (the 9th bits); signs[32]; scales[4]
// (two 4-bit scales each).
static __device__ __forceinline__ float iq3s_chunk(const uint8_t *b, int c, uint32_t &lo, uint32_t &hi) {
	const int ib = c >> 2, l = c & 3;
	const uint32_t qh = b[66 + ib];
	const uint32_t i0 = b[2 + 2 * c] | ((qh << (8 - 2 * l)) & 256u);
	const uint32_t i1 = b[3 + 2 * c] | ((qh << (7 - 2 * l)) & 256u);
	const uint32_t s = b[74 + c];
	lo = sign4(iq3s_grid[i0], s);
	hi = sign4(iq3s_grid[i1], s >> 4);
	return ld_half(b) * (float)(1 + 2 * ((b[106 + (ib >> 1)] >> (4 * (ib & 1))) & 0xF));
}

#define IQ_DEQ8(t, chunk)                                                                           \
	template <> __device__ __forceinline__ void deq8<t>(const uint8_t *b, int c, float (&v)[8]) { \
		uint32_t lo, hi;                                                                            \
		const float db = chunk(b, c, lo, hi);                                                       \
		_Pragma("unroll") for (int i = 0; i < 4; i++) {                                             \
			v[i] = db * (float)(int8_t)(lo >> (8 * i));                                             \
			v[4 + i] = db * (float)(int8_t)(hi >> (8 * i));                                         \
		}                                                                                           \
	}
IQ_DEQ8(T_IQ2_XXS, iq2xxs_chunk)
IQ_DEQ8(T_IQ2_XS, iq2xs_chunk)
IQ_DEQ8(T_IQ2_S, iq2s_chunk)
IQ_DEQ8(T_IQ3_XXS, iq3xxs_chunk)
IQ_DEQ8(T_IQ3_S, iq3s_chunk)
#undef IQ_DEQ8
