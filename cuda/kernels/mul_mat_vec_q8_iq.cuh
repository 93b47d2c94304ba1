// mul_mat_vec_q8_iq.cuh: the 8-bit-activation dot products (Q8Dot, see mul_mat_vec_q8.cu)
// of the IQ2/IQ3 grid types and of Q2_K and Q3_K. Every one works in units of 16 weights
// that share one scale: the grid bytes with their signs applied are int8, dotted with dp4a.
// Included by mul_mat_vec_q8.cu after its helpers.
#pragma once

// IQ unit u: chunks 2u and 2u+1 of iq.cuh (one 16-value scale group, one 32-value x group).
template <float (*CHUNK)(const uint8_t *, int, uint32_t &, uint32_t &)> struct Q8DotIQ {
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
template <> struct Q8Dot<T_IQ2_XXS> : Q8DotIQ<iq2xxs_chunk> {};
template <> struct Q8Dot<T_IQ2_XS> : Q8DotIQ<iq2xs_chunk> {};
template <> struct Q8Dot<T_IQ2_S> : Q8DotIQ<iq2s_chunk> {};
template <> struct Q8Dot<T_IQ3_XXS> : Q8DotIQ<iq3xxs_chunk> {};
template <> struct Q8Dot<T_IQ3_S> : Q8DotIQ<iq3s_chunk> {};

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
