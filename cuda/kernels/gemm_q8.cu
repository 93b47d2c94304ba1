// gemm_q8.cu: the prompt's expert GEMMs on the integer tensor cores, the grouped form of
// gemm_q (gemm.cu) with its slots and gathered rows: slot e = blockIdx.z multiplies expert
// slot_expert[e] with output rows slot_off[e] .. slot_off[e+1], row r reading activation row
// row_idx[r] (all three null: the plain Y[n x m] = X W^T).
// The activations come quantised by quantize_q8_sums (per row: int8 q[k], then float2
// (d, d * sum q) per 32 values); each 32-value group of a weight row is decoded once per
// tile into int8 values and a float scale (Q4_K: and a min; Q6_K: a scale per 16), as llama.cpp's MMQ does, so
// mma.sync m16n8k32.s8 sums a group exactly in int32 and the group's scales go on in f32:
// y += c * dx * dw - (dx * sum q) * min. gemm_q instead decodes every weight to f16 for each
// 64-token tile, and its 32-deep stages left the warps waiting on memory (35-54 TFLOP/s on
// the H200 against the peer's 78 for the same MoE shapes, cuda/BENCH.md).
// A 128-thread block computes BM tokens (32 or 64) x 64 outputs in stages of 128 values of k:
// the next stage's activations arrive by cp.async while this one's weights are decoded into
// shared memory and multiplied.
#include "common.cuh"
#include "q8.cuh"

#define GQ_BN 64            // outputs (weight rows) a block
#define GQ_KS 128           // values of k a stage
#define GQ_G (GQ_KS / 32)   // 32-groups a stage
#define GQ_LD (GQ_KS + 16)  // bytes between rows in shared memory: 36 words, so the eight rows
                            // and four lanes of a fragment load hit 32 different banks

extern "C" __global__ void quantize_q8_sums(const float *x, int8_t *xq, int cols, int row_bytes) {
	quantize_q8_group<true>(x, xq, cols, row_bytes);
}

// Per type: decode(row, grp, q, dm) turns 32-group grp of a weight row into 8 words of 4
// int8 values and dm: with SUB16 false, (scale, min), the group's weights being dm.x * q -
// dm.y (MIN: dm.y may be nonzero); with SUB16, the scales of its two halves of 16 (Q6_K).
template <int T> struct Q8Tile;

// The nibbles of 16 bytes w as two words of int8 each: lo[i] the low nibbles of w[i],
// hi[i] the high ones (values 0..15 and 16..31 of the 32-value blocks), less off each.
static __device__ __forceinline__ void q8_nibbles(const uint32_t (&w)[4], uint32_t off, int (&q)[8]) {
#pragma unroll
	for (int i = 0; i < 4; i++) {
		q[i] = (int)__vsub4(w[i] & 0x0F0F0F0Fu, off);
		q[4 + i] = (int)__vsub4((w[i] >> 4) & 0x0F0F0F0Fu, off);
	}
}
// Bits 4i..4i+3 of h as the fifth bit (16) of four bytes.
static __device__ __forceinline__ uint32_t q8_bit5(uint32_t h, int i) {
	return ((((h >> (4 * i)) & 0xFu) * 0x00204081u) & 0x01010101u) << 4;
}
// The 5-bit 32-value blocks (Q5_0, Q5_1): nibbles of qs, fifth bits from qh (bit l: value l).
static __device__ __forceinline__ void q8_fivebit(const uint8_t *qh, const uint8_t *qs, uint32_t off, int (&q)[8]) {
	uint32_t w[4];
	ld16_a2w(qs, w);
	const uint32_t h = (uint32_t)ld_u16(qh) | ((uint32_t)ld_u16(qh + 2) << 16);
#pragma unroll
	for (int i = 0; i < 4; i++) {
		q[i] = (int)__vsub4((w[i] & 0x0F0F0F0Fu) | q8_bit5(h, i), off);
		q[4 + i] = (int)__vsub4(((w[i] >> 4) & 0x0F0F0F0Fu) | q8_bit5(h, 4 + i), off);
	}
}

template <> struct Q8Tile<T_Q4_0> {
	static constexpr bool MIN = false, SUB16 = false;
	static __device__ __forceinline__ void decode(const uint8_t *row, int grp, int (&q)[8], float2 &dm) {
		const uint8_t *b = row + (long long)grp * 18;
		uint32_t w[4];
		ld16_a2w(b + 2, w);
		q8_nibbles(w, 0x08080808u, q);
		dm = make_float2(ld_half(b), 0.f);
	}
};
// Q4_1: d * q + m, so the "min" is -m.
template <> struct Q8Tile<T_Q4_1> {
	static constexpr bool MIN = true, SUB16 = false;
	static __device__ __forceinline__ void decode(const uint8_t *row, int grp, int (&q)[8], float2 &dm) {
		const uint8_t *b = row + (long long)grp * 20;
		uint32_t w[4];
		ld16_a2w(b + 4, w);
		q8_nibbles(w, 0u, q);
		dm = make_float2(ld_half(b), -ld_half(b + 2));
	}
};
template <> struct Q8Tile<T_Q5_0> {
	static constexpr bool MIN = false, SUB16 = false;
	static __device__ __forceinline__ void decode(const uint8_t *row, int grp, int (&q)[8], float2 &dm) {
		const uint8_t *b = row + (long long)grp * 22;
		q8_fivebit(b + 2, b + 6, 0x10101010u, q);
		dm = make_float2(ld_half(b), 0.f);
	}
};
template <> struct Q8Tile<T_Q5_1> {
	static constexpr bool MIN = true, SUB16 = false;
	static __device__ __forceinline__ void decode(const uint8_t *row, int grp, int (&q)[8], float2 &dm) {
		const uint8_t *b = row + (long long)grp * 24;
		q8_fivebit(b + 4, b + 8, 0u, q);
		dm = make_float2(ld_half(b), -ld_half(b + 2));
	}
};
// IQ4_NL: the codebook's int8 values, one scale.
template <> struct Q8Tile<T_IQ4_NL> {
	static constexpr bool MIN = false, SUB16 = false;
	static __device__ __forceinline__ void decode(const uint8_t *row, int grp, int (&q)[8], float2 &dm) {
		const uint8_t *b = row + (long long)grp * 18;
		uint32_t w[4];
		ld16_a2w(b + 2, w);
#pragma unroll
		for (int i = 0; i < 4; i++) {
			q[i] = lut_iq4nl(w[i] & 0x0F0F0F0Fu);
			q[4 + i] = lut_iq4nl((w[i] >> 4) & 0x0F0F0F0Fu);
		}
		dm = make_float2(ld_half(b), 0.f);
	}
};
// IQ4_XS: sub-block j = grp % 8 of a 136-byte block, its 6-bit scale (less 32) from
// scales_l and scales_h, its 16 bytes of codebook nibbles at qs[16j].
template <> struct Q8Tile<T_IQ4_XS> {
	static constexpr bool MIN = false, SUB16 = false;
	static __device__ __forceinline__ void decode(const uint8_t *row, int grp, int (&q)[8], float2 &dm) {
		const uint8_t *b = row + (long long)(grp >> 3) * 136;
		const int j = grp & 7;
		const uint32_t sh = ld_u16(b + 2);
		const int ls = (int)(((b[4 + (j >> 1)] >> (4 * (j & 1))) & 0xF) | (((sh >> (2 * j)) & 3) << 4));
		const uint2 v0 = *(const uint2 *)(b + 8 + 16 * j), v1 = *(const uint2 *)(b + 16 + 16 * j);
		const uint32_t w[4] = {v0.x, v0.y, v1.x, v1.y};
#pragma unroll
		for (int i = 0; i < 4; i++) {
			q[i] = lut_iq4nl(w[i] & 0x0F0F0F0Fu);
			q[4 + i] = lut_iq4nl((w[i] >> 4) & 0x0F0F0F0Fu);
		}
		dm = make_float2(ld_half(b) * (float)(ls - 32), 0.f);
	}
};
// Q5_K: Q4_K's scales and nibbles (at qs = b + 48) and fifth bits, bit j of qh[l] for value l
// of sub-block j.
template <> struct Q8Tile<T_Q5_K> {
	static constexpr bool MIN = true, SUB16 = false;
	static __device__ __forceinline__ void decode(const uint8_t *row, int grp, int (&q)[8], float2 &dm) {
		const uint8_t *b = row + (long long)(grp >> 3) * 176;
		const int j = grp & 7, sh = 4 * (j & 1);
		float sc, m;
		scale_min_k4(j, b + 4, sc, m);
		dm = make_float2(ld_half(b) * sc, ld_half(b + 2) * m);
		const uint4 *p = (const uint4 *)(b + 48 + 32 * (j >> 1)), *ph = (const uint4 *)(b + 16);
		const uint4 v0 = p[0], v1 = p[1], h0 = ph[0], h1 = ph[1];
		const uint32_t w[8] = {v0.x, v0.y, v0.z, v0.w, v1.x, v1.y, v1.z, v1.w};
		const uint32_t h[8] = {h0.x, h0.y, h0.z, h0.w, h1.x, h1.y, h1.z, h1.w};
#pragma unroll
		for (int i = 0; i < 8; i++) q[i] = (int)(((w[i] >> sh) & 0x0F0F0F0Fu) | (((h[i] >> j) & 0x01010101u) << 4));
	}
};
// Q6_K: group j = grp % 8 is quarter g = j % 4 of half h = j / 4 (value 128h + 32g + l):
// low bits from nibble g / 2 of ql[64h + 32(g % 2) + l], high from bits 2g of qh[32h + l],
// less 32; an int8 scale for each half of 16 (the only type here with two a group).
template <> struct Q8Tile<T_Q6_K> {
	static constexpr bool MIN = false, SUB16 = true;
	static __device__ __forceinline__ void decode(const uint8_t *row, int grp, int (&q)[8], float2 &dm) {
		const uint8_t *b = row + (long long)(grp >> 3) * 210;
		const int j = grp & 7, h = j >> 2, g = j & 3;
		int l0[4], l1[4], h0[4], h1[4];
		ld16_a2(b + 64 * h + 32 * (g & 1), l0);
		ld16_a2(b + 64 * h + 32 * (g & 1) + 16, l1);
		ld16_a2(b + 128 + 32 * h, h0);
		ld16_a2(b + 128 + 32 * h + 16, h1);
		const int shl = 4 * (g >> 1), shh = 2 * g;
#pragma unroll
		for (int i = 0; i < 8; i++) {
			const uint32_t lo = (uint32_t)(i < 4 ? l0[i] : l1[i - 4]), hi = (uint32_t)(i < 4 ? h0[i] : h1[i - 4]);
			q[i] = (int)__vsub4(((lo >> shl) & 0x0F0F0F0Fu) | (((hi >> shh) & 0x03030303u) << 4), 0x20202020u);
		}
		const float d = ld_half(b + 208);
		dm = make_float2(d * (float)(int8_t)b[192 + 8 * h + 2 * g], d * (float)(int8_t)b[193 + 8 * h + 2 * g]);
	}
};

template <> struct Q8Tile<T_Q8_0> {
	static constexpr bool MIN = false, SUB16 = false;
	static __device__ __forceinline__ void decode(const uint8_t *row, int grp, int (&q)[8], float2 &dm) {
		const uint8_t *b = row + (long long)grp * 34;
		int lo[4], hi[4];
		ld16_a2(b + 2, lo);
		ld16_a2(b + 18, hi);
#pragma unroll
		for (int i = 0; i < 4; i++) {
			q[i] = lo[i];
			q[4 + i] = hi[i];
		}
		dm = make_float2(ld_half(b), 0.f);
	}
};

// MXFP4: the doubled codebook and the halved exponent, as in mul_mat_vec_q8.cu.
template <> struct Q8Tile<T_MXFP4> {
	static constexpr bool MIN = false, SUB16 = false;
	static __device__ __forceinline__ void decode(const uint8_t *row, int grp, int (&q)[8], float2 &dm) {
		uint32_t w[4];
		const uint32_t e = ld_mxfp4(row + (long long)grp * 17, w);
#pragma unroll
		for (int i = 0; i < 4; i++) {
			q[i] = lut_mxfp4(w[i] & 0x0F0F0F0Fu);
			q[4 + i] = lut_mxfp4((w[i] >> 4) & 0x0F0F0F0Fu);
		}
		dm = make_float2(e8m0_half(e), 0.f);
	}
};

// Q4_K: sub-block j = grp % 8 of super-block grp / 8 is nibble j & 1 of qs[32 * (j / 2) ..].
template <> struct Q8Tile<T_Q4_K> {
	static constexpr bool MIN = true, SUB16 = false;
	static __device__ __forceinline__ void decode(const uint8_t *row, int grp, int (&q)[8], float2 &dm) {
		const uint8_t *b = row + (long long)(grp >> 3) * 144;
		const int j = grp & 7, sh = 4 * (j & 1);
		float sc, m;
		scale_min_k4(j, b + 4, sc, m);
		dm = make_float2(ld_half(b) * sc, ld_half(b + 2) * m);
		const uint4 *p = (const uint4 *)(b + 16 + 32 * (j >> 1));
		const uint4 v0 = p[0], v1 = p[1];
		const uint32_t w[8] = {v0.x, v0.y, v0.z, v0.w, v1.x, v1.y, v1.z, v1.w};
#pragma unroll
		for (int i = 0; i < 8; i++) q[i] = (int)((w[i] >> sh) & 0x0F0F0F0Fu);
	}
};

// c += A B for one 16x8 tile over 32 values of k (fragments as PTX lays out m16n8k32: a
// holds rows g and g+8 at k 4t.. and 16+4t.., b column g at the same k). sm_75 has no
// m16n8k32; its four m8n8k16 products fill the same registers.
static __device__ __forceinline__ void mma_s8_16832(int (&c)[4], const int (&a)[4], const int (&b)[2]) {
#if __CUDA_ARCH__ >= 800
	asm volatile("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
		: "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
		: "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#else
	asm volatile("mma.sync.aligned.m8n8k16.row.col.s32.s8.s8.s32 {%0,%1}, {%2}, {%3}, {%0,%1};\n"
		: "+r"(c[0]), "+r"(c[1]) : "r"(a[0]), "r"(b[0]));
	asm volatile("mma.sync.aligned.m8n8k16.row.col.s32.s8.s8.s32 {%0,%1}, {%2}, {%3}, {%0,%1};\n"
		: "+r"(c[0]), "+r"(c[1]) : "r"(a[2]), "r"(b[1]));
	asm volatile("mma.sync.aligned.m8n8k16.row.col.s32.s8.s8.s32 {%0,%1}, {%2}, {%3}, {%0,%1};\n"
		: "+r"(c[2]), "+r"(c[3]) : "r"(a[1]), "r"(b[0]));
	asm volatile("mma.sync.aligned.m8n8k16.row.col.s32.s8.s8.s32 {%0,%1}, {%2}, {%3}, {%0,%1};\n"
		: "+r"(c[2]), "+r"(c[3]) : "r"(a[3]), "r"(b[1]));
#endif
}

// The same for 16 values of k: c += A B over (a0, a1) and b0, the first half of a 32-group's
// fragments (the second is (a2, a3) and b1), for the types with a scale per 16 (Q6_K).
static __device__ __forceinline__ void mma_s8_16816(int (&c)[4], int a0, int a1, int b0) {
#if __CUDA_ARCH__ >= 800
	asm volatile("mma.sync.aligned.m16n8k16.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%0,%1,%2,%3};\n"
		: "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
		: "r"(a0), "r"(a1), "r"(b0));
#else
	asm volatile("mma.sync.aligned.m8n8k16.row.col.s32.s8.s8.s32 {%0,%1}, {%2}, {%3}, {%0,%1};\n"
		: "+r"(c[0]), "+r"(c[1]) : "r"(a0), "r"(b0));
	asm volatile("mma.sync.aligned.m8n8k16.row.col.s32.s8.s8.s32 {%0,%1}, {%2}, {%3}, {%0,%1};\n"
		: "+r"(c[2]), "+r"(c[3]) : "r"(a1), "r"(b0));
#endif
}

template <int BM> struct GemmQ8Smem {
	int8_t x[2][BM][GQ_LD];   // the activations of two stages (cp.async fills the next)
	float2 xd[2][BM][GQ_G];   // their (d, d * sum q) per group
	int8_t w[GQ_BN][GQ_LD];   // this stage's weights, decoded
	float2 wd[GQ_BN][GQ_G];   // their (scale, min) per group
	const int8_t *xrow[BM];   // each tile row's activation row (null past the slot's end)
};

// One stage's activations: BM rows x (8 chunks of values + 2 of scales) of 16 bytes.
template <int BM>
static __device__ __forceinline__ void gemm_q8_load_x(GemmQ8Smem<BM> &sm, int buf, const int8_t *xq0, int k, int stage) {
	const int groups = k / 32, g0 = stage * GQ_G;
#pragma unroll
	for (int i = 0; i < (BM * 10 + 127) / 128; i++) {
		const int c = threadIdx.x + 128 * i;
		if (BM * 10 % 128 != 0 && c >= BM * 10) break;
		const int r = c / 10, part = c % 10;
		const int8_t *row = sm.xrow[r];
		if (part < 8) {
			const bool ok = row && g0 + part / 2 < groups;
			cp16(&sm.x[buf][r][16 * part], ok ? row + 32 * g0 + 16 * part : xq0, ok ? 16 : 0);
		} else {
			const int g = g0 + 2 * (part - 8); // two groups' float2 a chunk
			const int n = row ? 8 * max(0, min(2, groups - g)) : 0;
			cp16(&sm.xd[buf][r][2 * (part - 8)], n ? row + k + 8 * g : xq0, n);
		}
	}
}

// One stage's weights: 64 rows x 4 groups, two per thread, decoded into sm.w and sm.wd.
template <int T, int BM>
static __device__ __forceinline__ void gemm_q8_load_w(GemmQ8Smem<BM> &sm, const uint8_t *W, long long row_bytes, int m,
	int k, int bn, int stage) {
#pragma unroll
	for (int i = 0; i < 2; i++) {
		const int u = threadIdx.x + 128 * i;
		const int r = u >> 2, gl = u & 3, grp = stage * GQ_G + gl;
		int q[8] = {0, 0, 0, 0, 0, 0, 0, 0};
		float2 dm = make_float2(0.f, 0.f);
		if (bn + r < m && grp < k / 32) Q8Tile<T>::decode(W + (long long)(bn + r) * row_bytes, grp, q, dm);
		*(int4 *)&sm.w[r][32 * gl] = make_int4(q[0], q[1], q[2], q[3]);
		*(int4 *)&sm.w[r][32 * gl + 16] = make_int4(q[4], q[5], q[6], q[7]);
		sm.wd[r][gl] = dm;
	}
}

template <int T, int BM>
static __device__ __forceinline__ void gemm_q8_body(const uint8_t *__restrict__ W, long long expert_stride,
	const int *__restrict__ slot_expert, const int8_t *__restrict__ xq, int xq_row_bytes, const int *__restrict__ row_idx,
	const int *__restrict__ slot_off, float *__restrict__ Y, int m, int n, int k) {
	typedef TypeInfo<T> TI;
	constexpr int WN = BM == 64 ? 2 : 4; // warps across the 64 outputs
	constexpr int MI = 2;                // 16-row tiles a warp (32 tokens)
	constexpr int NJ = GQ_BN / WN / 8;   // 8-column tiles a warp
	__shared__ __align__(16) GemmQ8Smem<BM> sm;
	GemmSlot slot;
	if (!gemm_slot(W, expert_stride, slot_expert, slot_off, n, BM, GQ_BN, slot)) return; // the whole block
	const int end = slot.end, bm = slot.bm, bn = slot.bn;
	W = slot.W;
	const long long row_bytes = (long long)(k / TI::QK) * TI::BYTES;
	for (int r = threadIdx.x; r < BM; r += 128) {
		sm.xrow[r] = bm + r < end ? xq + (long long)(row_idx ? row_idx[bm + r] : bm + r) * xq_row_bytes : nullptr;
	}
	__syncthreads();

	const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
	const int wm = warp / WN, wn = warp % WN;
	const int g = lane >> 2, t = lane & 3;
	float acc[MI][NJ][4];
#pragma unroll
	for (int i = 0; i < MI; i++)
#pragma unroll
		for (int j = 0; j < NJ; j++)
#pragma unroll
			for (int q = 0; q < 4; q++) acc[i][j][q] = 0.f;

	const int stages = (k / 32 + GQ_G - 1) / GQ_G;
	gemm_q8_load_x(sm, 0, xq, k, 0);
	cp_commit();
	for (int s = 0; s < stages; s++) {
		const int buf = s & 1;
		if (s + 1 < stages) gemm_q8_load_x(sm, buf ^ 1, xq, k, s + 1);
		cp_commit(); // (an empty group on the last stage keeps the count below uniform)
		gemm_q8_load_w<T>(sm, W, row_bytes, m, k, bn, s);
		cp_wait<1>();
		__syncthreads();
#pragma unroll 1
		for (int gl = 0; gl < GQ_G; gl++) {
			const int kk = 32 * gl;
			int a[MI][4], b[NJ][2];
			float2 xd[MI][2], wd[NJ][2];
#pragma unroll
			for (int i = 0; i < MI; i++) {
				const int r = wm * 32 + i * 16 + g;
				a[i][0] = *(const int *)&sm.x[buf][r][kk + 4 * t];
				a[i][1] = *(const int *)&sm.x[buf][r + 8][kk + 4 * t];
				a[i][2] = *(const int *)&sm.x[buf][r][kk + 16 + 4 * t];
				a[i][3] = *(const int *)&sm.x[buf][r + 8][kk + 16 + 4 * t];
				xd[i][0] = sm.xd[buf][r][gl];
				xd[i][1] = sm.xd[buf][r + 8][gl];
			}
#pragma unroll
			for (int j = 0; j < NJ; j++) {
				const int c = wn * NJ * 8 + j * 8;
				b[j][0] = *(const int *)&sm.w[c + g][kk + 4 * t];
				b[j][1] = *(const int *)&sm.w[c + g][kk + 16 + 4 * t];
				wd[j][0] = sm.wd[c + 2 * t][gl];
				wd[j][1] = sm.wd[c + 2 * t + 1][gl];
			}
#pragma unroll
			for (int i = 0; i < MI; i++)
#pragma unroll
				for (int j = 0; j < NJ; j++) {
					if constexpr (Q8Tile<T>::SUB16) {
						int c0[4] = {0, 0, 0, 0}, c1[4] = {0, 0, 0, 0};
						mma_s8_16816(c0, a[i][0], a[i][1], b[j][0]);
						mma_s8_16816(c1, a[i][2], a[i][3], b[j][1]);
#pragma unroll
						for (int q = 0; q < 4; q++) {
							const float2 x = xd[i][q >> 1], w = wd[j][q & 1];
							acc[i][j][q] = fmaf(fmaf((float)c0[q], w.x, (float)c1[q] * w.y), x.x, acc[i][j][q]);
						}
					} else {
						int c[4] = {0, 0, 0, 0};
						mma_s8_16832(c, a[i], b[j]);
#pragma unroll
						for (int q = 0; q < 4; q++) {
							const float2 x = xd[i][q >> 1], w = wd[j][q & 1];
							acc[i][j][q] = fmaf((float)c[q], x.x * w.x, acc[i][j][q]);
							if (Q8Tile<T>::MIN) acc[i][j][q] = fmaf(-x.y, w.y, acc[i][j][q]);
						}
					}
				}
		}
		__syncthreads(); // the next stage overwrites sm.w and this stage's activations
	}
#pragma unroll
	for (int i = 0; i < MI; i++)
#pragma unroll
		for (int j = 0; j < NJ; j++) {
			const int r = bm + wm * 32 + i * 16 + g;
			const int c = bn + wn * NJ * 8 + j * 8 + 2 * t;
#pragma unroll
			for (int h = 0; h < 2; h++) {
				const int rr = r + 8 * h;
				if (rr >= end) continue;
				if (c < m) Y[(long long)rr * m + c] = acc[i][j][2 * h];
				if (c + 1 < m) Y[(long long)rr * m + c + 1] = acc[i][j][2 * h + 1];
			}
		}
}

#define GEMM_Q8_KERNEL(name, t, bm)                                                                              \
	extern "C" __global__ void __launch_bounds__(128) gemm_q8_##name##_bm##bm(const uint8_t *W,                 \
		long long expert_stride, const int *slot_expert, const int8_t *xq, int xq_row_bytes, const int *row_idx, \
		const int *slot_off, float *Y, int m, int n, int k) {                                                    \
		gemm_q8_body<t, bm>(W, expert_stride, slot_expert, xq, xq_row_bytes, row_idx, slot_off, Y, m, n, k);    \
	}
#define GEMM_Q8_KERNELS(name, t) GEMM_Q8_KERNEL(name, t, 32) GEMM_Q8_KERNEL(name, t, 64)
GEMM_Q8_KERNELS(q4_0, T_Q4_0)
GEMM_Q8_KERNELS(q4_1, T_Q4_1)
GEMM_Q8_KERNELS(q5_0, T_Q5_0)
GEMM_Q8_KERNELS(q5_1, T_Q5_1)
GEMM_Q8_KERNELS(q8_0, T_Q8_0)
GEMM_Q8_KERNELS(iq4_nl, T_IQ4_NL)
GEMM_Q8_KERNELS(mxfp4, T_MXFP4)
GEMM_Q8_KERNELS(q4_K, T_Q4_K)
GEMM_Q8_KERNELS(q5_K, T_Q5_K)
GEMM_Q8_KERNELS(q6_K, T_Q6_K)
GEMM_Q8_KERNELS(iq4_xs, T_IQ4_XS)
#undef GEMM_Q8_KERNELS
#undef GEMM_Q8_KERNEL
