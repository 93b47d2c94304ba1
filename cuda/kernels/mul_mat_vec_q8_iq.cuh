// mul_mat_vec_q8_iq.cuh: the 8-bit-activation dot products (Q8Dot, see mul_mat_vec_q8.cu)
// of the IQ2/IQ3 grid types and of Q2_K and Q3_K, in units of 16 or 32 weights: the grid
// bytes with their signs applied are int8, dotted with dp4a.
// Included by mul_mat_vec_q8.cu after its helpers.
#pragma once

// IQ units of 32 values (Q8DotIQ32): the group's grid loads are in flight together. On the
// H200 (BenchmarkMatVecQ8, 4096x4096) they took IQ2_XXS 7.98 -> 6.78 us, IQ2_XS 8.02 -> 6.46,
// IQ2_S 9.54 -> 7.75, IQ3_XXS 8.56 -> 7.91 against 16-value units (Q8DotIQ16), but IQ3_S
// 9.71 -> 12.01, so IQ3_S keeps 16.

// Unit u: the 32 values of group u (chunks 4u..4u+3: one x group, one or two scales).
template <float (*CHUNK)(const uint8_t *, int, uint32_t &, uint32_t &)> struct Q8DotIQ32 {
	static constexpr int UNITS = 8;
	static __device__ __forceinline__ float dot(const uint8_t *b, int u, const int8_t *xq, const float *xd) {
		uint32_t w[8];
		const float d0 = CHUNK(b, 4 * u, w[0], w[1]);
		CHUNK(b, 4 * u + 1, w[2], w[3]);
		const float d1 = CHUNK(b, 4 * u + 2, w[4], w[5]);
		CHUNK(b, 4 * u + 3, w[6], w[7]);
		int x0[4], x1[4];
		ld16_i(xq + 32 * u, x0);
		ld16_i(xq + 32 * u + 16, x1);
		const int s0 = dp4a((int)w[0], x0[0], dp4a((int)w[1], x0[1], dp4a((int)w[2], x0[2], dp4a((int)w[3], x0[3], 0))));
		const int s1 = dp4a((int)w[4], x1[0], dp4a((int)w[5], x1[1], dp4a((int)w[6], x1[2], dp4a((int)w[7], x1[3], 0))));
		return (d0 * (float)s0 + d1 * (float)s1) * xd[u];
	}
};

// Unit u: chunks 2u and 2u+1 (one 16-value scale group, half a 32-value x group).
template <float (*CHUNK)(const uint8_t *, int, uint32_t &, uint32_t &)> struct Q8DotIQ16 {
	static constexpr int UNITS = 16;
	static __device__ __forceinline__ float dot(const uint8_t *b, int u, const int8_t *xq, const float *xd) {
		uint32_t a0, a1, b0, b1;
		const float db = CHUNK(b, 2 * u, a0, a1);
		CHUNK(b, 2 * u + 1, b0, b1);
		int x[4];
		ld16_i(xq + 16 * u, x);
		const int s = dp4a((int)a0, x[0], dp4a((int)a1, x[1], dp4a((int)b0, x[2], dp4a((int)b1, x[3], 0))));
		return db * xd[u >> 1] * (float)s;
	}
};

template <> struct Q8Dot<T_IQ2_XXS> : Q8DotIQ32<iq2xxs_chunk> {};
template <> struct Q8Dot<T_IQ2_XS> : Q8DotIQ32<iq2xs_chunk> {};
template <> struct Q8Dot<T_IQ2_S> : Q8DotIQ32<iq2s_chunk> {};
template <> struct Q8Dot<T_IQ3_XXS> : Q8DotIQ32<iq3xxs_chunk> {};
template <> struct Q8Dot<T_IQ3_S> : Q8DotIQ16<iq3s_chunk> {};

// Q2_K unit u: values 16u.. (half h, shift pair j, lanes l..l+15), whose scale/min byte is
// scales[u]: x = d*(sc&15)*q - dmin*(sc>>4).
template <> struct Q8Dot<T_Q2_K> {
	static constexpr int UNITS = 16;
	static __device__ __forceinline__ float dot(const uint8_t *b, int u, const int8_t *xq, const float *xd) {
		const int h = u >> 3, j = (u >> 1) & 3, l = 16 * (u & 1);
		const uint32_t *q = (const uint32_t *)(b + 16 + 32 * h + l); // 84-byte blocks: 4-byte aligned
		int x[4];
		ld16_i(xq + 16 * u, x);
		int s = 0, sx = 0;
#pragma unroll
		for (int i = 0; i < 4; i++) {
			s = dp4a((int)((q[i] >> (2 * j)) & 0x03030303u), x[i], s);
			sx = dp4a(0x01010101, x[i], sx);
		}
		const uint32_t sc = b[u];
		return xd[u >> 1] * (ld_half(b + 80) * (float)(sc & 0xF) * (float)s - ld_half(b + 82) * (float)(sc >> 4) * (float)sx);
	}
};

// Q3_K unit u: as Q2_K, with q - 4 where the hmask bit (4h+j) is clear and a 6-bit scale.
template <> struct Q8Dot<T_Q3_K> {
	static constexpr int UNITS = 16;
	static __device__ __forceinline__ float dot(const uint8_t *b, int u, const int8_t *xq, const float *xd) {
		const int h = u >> 3, j = (u >> 1) & 3, l = 16 * (u & 1), bit = 4 * h + j;
		int q[4], m[4], x[4];
		ld16_a2(b + 32 + 32 * h + l, q);
		ld16_a2(b + l, m);
		ld16_i(xq + 16 * u, x);
		int s = 0;
#pragma unroll
		for (int i = 0; i < 4; i++) {
			const uint32_t lo = ((uint32_t)q[i] >> (2 * j)) & 0x03030303u;
			const uint32_t sub = (~((uint32_t)m[i] >> bit) & 0x01010101u) << 2;
			s = dp4a((int)__vsub4(lo, sub), x[i], s);
		}
		const uint8_t *sc = b + 96;
		const int low = u < 8 ? (sc[u] & 0xF) : (sc[u - 8] >> 4);
		const int high = (sc[8 + (u & 3)] >> (2 * (u >> 2))) & 3;
		return ld_half(b + 108) * (float)((low | (high << 4)) - 32) * xd[u >> 1] * (float)s;
	}
};
