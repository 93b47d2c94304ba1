// mul_mat_vec_q8.cu: the fast decode matvec. x is first quantised to 8 bits per 32 values
// (quantize_q8: int8 q[cols], then one float scale per 32 values, the row padded to 16
// bytes), and each weight type takes integer dot products of 4 values at a time (dp4a)
// against it. A thread handles units of 16 or 32 weights (Q8Dot<T>::UNITS per block); a
// block of 128 threads handles rpb rows (1, 2 or 4, chosen per shape by the launcher), so
// a row has 128/rpb threads: few rows (k and v) still fill the GPU, and each thread has
// several units' loads in flight (the loops are unrolled).
// The MoE form is as in mul_mat_vec.cu: blockIdx.y is the routed slot, ids[e] the expert,
// xq advances by xq_stride bytes per slot (0: shared).
#include "common.cuh"
#include "q8.cuh"

#define MMVQ_THREADS 128

// x quantised: 32 values per group, scale d = max|x| / 127 (quantize_q8_group, q8.cuh).
extern "C" __global__ void quantize_q8(const float *x, int8_t *xq, int cols, int row_bytes) {
	grid_dependency_entry();
	quantize_q8_group<false>(x, xq, cols, row_bytes);
}

// Per type: UNITS units (of 16 or 32 weights) per block; dot(b, u, xq, xd) is the unit's sum
// of w_i * x_i, where xq/xd point at the block's first value / first 32-group scale.
template <int T> struct Q8Dot;

// Q8_0 unit u: values 16u..16u+15.
template <> struct Q8Dot<T_Q8_0> {
	static constexpr int UNITS = 2;
	static __device__ __forceinline__ float dot(const uint8_t *b, int u, const int8_t *xq, const float *xd) {
		uint32_t w[4];
		int x[4];
		ld16_a2w(b + 2 + 16 * u, w);
		ld16_i(xq + 16 * u, x);
		int s = 0;
#pragma unroll
		for (int i = 0; i < 4; i++) s = dp4a((int)w[i], x[i], s);
		return ld_half(b) * xd[0] * (float)s;
	}
};

// Q4_0: one unit, the whole block (low nibbles values 0..15, high 16..31).
template <> struct Q8Dot<T_Q4_0> {
	static constexpr int UNITS = 1;
	static __device__ __forceinline__ float dot(const uint8_t *b, int, const int8_t *xq, const float *xd) {
		uint32_t w[4];
		int x0[4], x1[4];
		ld16_a2w(b + 2, w);
		ld16_i(xq, x0);
		ld16_i(xq + 16, x1);
		int s = 0, sx = 0;
#pragma unroll
		for (int i = 0; i < 4; i++) {
			s = dp4a((int)(w[i] & 0x0F0F0F0Fu), x0[i], s);
			s = dp4a((int)((w[i] >> 4) & 0x0F0F0F0Fu), x1[i], s);
			sx = dp4a(0x01010101, x0[i], dp4a(0x01010101, x1[i], sx));
		}
		return ld_half(b) * xd[0] * (float)(s - 8 * sx);
	}
};

// MXFP4: one unit, the whole 17-byte block.
template <> struct Q8Dot<T_MXFP4> {
	static constexpr int UNITS = 1;
	static __device__ __forceinline__ float dot(const uint8_t *b, int, const int8_t *xq, const float *xd) {
		uint32_t w[4];
		const uint32_t e = ld_mxfp4(b, w);
		int x0[4], x1[4];
		ld16_i(xq, x0);
		ld16_i(xq + 16, x1);
		int s = 0;
#pragma unroll
		for (int i = 0; i < 4; i++) {
			s = dp4a(lut_mxfp4(w[i] & 0x0F0F0F0Fu), x0[i], s);
			s = dp4a(lut_mxfp4((w[i] >> 4) & 0x0F0F0F0Fu), x1[i], s);
		}
		return e8m0_half(e) * xd[0] * (float)s;
	}
};

// IQ4_XS unit u: sub-block u (32 values: low nibbles 0..15, high 16..31).
template <> struct Q8Dot<T_IQ4_XS> {
	static constexpr int UNITS = 8;
	static __device__ __forceinline__ float dot(const uint8_t *b, int ib, const int8_t *xq, const float *xd) {
		const uint32_t sh_ = ld_u16(b + 2);
		const int ls = (int)(((b[4 + (ib >> 1)] >> (4 * (ib & 1))) & 0xF) | (((sh_ >> (2 * ib)) & 3) << 4));
		uint32_t l0, h0, l1, h1;
		ld8_a8(b + 8 + 16 * ib, l0, h0);
		ld8_a8(b + 16 + 16 * ib, l1, h1);
		const uint32_t w[4] = {l0, h0, l1, h1};
		int x0[4], x1[4];
		ld16_i(xq + 32 * ib, x0);
		ld16_i(xq + 32 * ib + 16, x1);
		int s = 0;
#pragma unroll
		for (int i = 0; i < 4; i++) {
			s = dp4a(lut_iq4nl(w[i] & 0x0F0F0F0Fu), x0[i], s);
			s = dp4a(lut_iq4nl((w[i] >> 4) & 0x0F0F0F0Fu), x1[i], s);
		}
		return ld_half(b) * (float)(ls - 32) * xd[ib] * (float)s;
	}
};

// The Q4_K/Q5_K header (d, dmin, 12 bytes of 6-bit scales and mins; 16-byte aligned, as
// the 144- and 176-byte blocks are) in one load: the scale and min of sub-blocks j and j+1
// (j even), and d, dmin.
static __device__ __forceinline__ void k4_header(const uint8_t *b, int j, float &d, float &dmin, float &sc0, float &m0, float &sc1, float &m1) {
	const uint4 h = *(const uint4 *)b;
	const float2 dm = __half22float2(*(const __half2 *)&h.x);
	d = dm.x;
	dmin = dm.y;
	// j < 4: sc = q[j] & 63, m = q[j+4] & 63
	// j >= 4: sc = (q[j+4] & 15) | (q[j-4] >> 6) << 4, m = (q[j+4] >> 4) | (q[j] >> 6) << 4
	const uint32_t s0 = 8 * (j & 3), s1 = 8 * ((j + 1) & 3);
	const uint32_t a0 = (h.y >> s0) & 0xFF, b0 = (h.z >> s0) & 0xFF, c0 = (h.w >> s0) & 0xFF;
	const uint32_t a1 = (h.y >> s1) & 0xFF, b1 = (h.z >> s1) & 0xFF, c1 = (h.w >> s1) & 0xFF;
	sc0 = (float)(j < 4 ? (a0 & 63) : ((c0 & 0xF) | ((a0 >> 6) << 4)));
	m0 = (float)(j < 4 ? (b0 & 63) : ((c0 >> 4) | ((b0 >> 6) << 4)));
	sc1 = (float)(j < 4 ? (a1 & 63) : ((c1 & 0xF) | ((a1 >> 6) << 4)));
	m1 = (float)(j < 4 ? (b1 & 63) : ((c1 >> 4) | ((b1 >> 6) << 4)));
}

// Q4_K unit u: pair p = u/2 of sub-blocks (2p, 2p+1), half r = u%2: the 16 bytes
// qs[32p + 16r ..] hold values 16r.. of sub-block 2p (low nibbles) and of 2p+1 (high).
template <> struct Q8Dot<T_Q4_K> {
	static constexpr int UNITS = 8;
	static __device__ __forceinline__ float dot(const uint8_t *b, int u, const int8_t *xq, const float *xd) {
		const int p = u >> 1, r = u & 1;
		float d, dmin, sc0, m0, sc1, m1;
		k4_header(b, 2 * p, d, dmin, sc0, m0, sc1, m1);
		const uint4 q = *(const uint4 *)(b + 16 + 32 * p + 16 * r);
		const uint32_t w[4] = {q.x, q.y, q.z, q.w};
		int xa[4], xb[4];
		ld16_i(xq + 64 * p + 16 * r, xa);
		ld16_i(xq + 64 * p + 32 + 16 * r, xb);
		const float2 dx = *(const float2 *)(xd + 2 * p);
		int sa = 0, sb = 0, na = 0, nb = 0;
#pragma unroll
		for (int i = 0; i < 4; i++) {
			sa = dp4a((int)(w[i] & 0x0F0F0F0Fu), xa[i], sa);
			sb = dp4a((int)((w[i] >> 4) & 0x0F0F0F0Fu), xb[i], sb);
			na = dp4a(0x01010101, xa[i], na);
			nb = dp4a(0x01010101, xb[i], nb);
		}
		return dx.x * (d * sc0 * (float)sa - dmin * m0 * (float)na) + dx.y * (d * sc1 * (float)sb - dmin * m1 * (float)nb);
	}
};

// Q5_K: as Q4_K with the fifth bits from qh[16r ..], bit j for sub-block j.
template <> struct Q8Dot<T_Q5_K> {
	static constexpr int UNITS = 8;
	static __device__ __forceinline__ float dot(const uint8_t *b, int u, const int8_t *xq, const float *xd) {
		const int p = u >> 1, r = u & 1;
		float d, dmin, sc0, m0, sc1, m1;
		k4_header(b, 2 * p, d, dmin, sc0, m0, sc1, m1);
		const uint4 q = *(const uint4 *)(b + 48 + 32 * p + 16 * r);
		const uint4 qh = *(const uint4 *)(b + 16 + 16 * r);
		const uint32_t w[4] = {q.x, q.y, q.z, q.w}, hb[4] = {qh.x, qh.y, qh.z, qh.w};
		int xa[4], xb[4];
		ld16_i(xq + 64 * p + 16 * r, xa);
		ld16_i(xq + 64 * p + 32 + 16 * r, xb);
		const float2 dx = *(const float2 *)(xd + 2 * p);
		const int j0 = 2 * p, j1 = 2 * p + 1;
		int sa = 0, sb = 0, na = 0, nb = 0;
#pragma unroll
		for (int i = 0; i < 4; i++) {
			const int qa = (int)((w[i] & 0x0F0F0F0Fu) | (((hb[i] >> j0) & 0x01010101u) << 4));
			const int qb = (int)(((w[i] >> 4) & 0x0F0F0F0Fu) | (((hb[i] >> j1) & 0x01010101u) << 4));
			sa = dp4a(qa, xa[i], sa);
			sb = dp4a(qb, xb[i], sb);
			na = dp4a(0x01010101, xa[i], na);
			nb = dp4a(0x01010101, xb[i], nb);
		}
		return dx.x * (d * sc0 * (float)sa - dmin * m0 * (float)na) + dx.y * (d * sc1 * (float)sb - dmin * m1 * (float)nb);
	}
};

// Q6_K unit u: values 16u..16u+15, which share one scale: half h, quarter g, lanes l0..l0+15.
template <> struct Q8Dot<T_Q6_K> {
	static constexpr int UNITS = 16;
	static __device__ __forceinline__ float dot(const uint8_t *b, int u, const int8_t *xq, const float *xd) {
		const int h = u >> 3, g = (u >> 1) & 3, l0 = 16 * (u & 1);
		int ql[4], qh[4], x[4];
		ld16_a2(b + 64 * h + l0 + 32 * (g & 1), ql);
		ld16_a2(b + 128 + 32 * h + l0, qh);
		ld16_i(xq + 16 * u, x);
		const int shl = 4 * (g >> 1), shh = 2 * g;
		int s = 0, sx = 0;
#pragma unroll
		for (int i = 0; i < 4; i++) {
			const int q = (int)((((uint32_t)ql[i] >> shl) & 0x0F0F0F0Fu) | ((((uint32_t)qh[i] >> shh) & 0x03030303u) << 4));
			s = dp4a(q, x[i], s);
			sx = dp4a(0x01010101, x[i], sx);
		}
		const float sc = (float)(int8_t)b[192 + 8 * h + (l0 >> 4) + 2 * g];
		return ld_half(b + 208) * sc * xd[u >> 1] * (float)(s - 32 * sx);
	}
};

#include "mul_mat_vec_q8_iq.cuh"

// The sum of a row's dot products over its threads units t, t+tpr, ... of nunits; w, xq and
// xd at the row's first block. The unrolled loop keeps several units' loads in flight.
template <int T>
static __device__ __forceinline__ float row_dot(const uint8_t *__restrict__ w, const int8_t *__restrict__ xq,
	const float *__restrict__ xd, int nunits, int t, int tpr) {
	typedef TypeInfo<T> TI;
	typedef Q8Dot<T> D;
	float acc = 0.f;
#pragma unroll 4
	for (int c = t; c < nunits; c += tpr) {
		const int blk = c / D::UNITS, u = c % D::UNITS;
		acc += D::dot(w + (long long)blk * TI::BYTES, u, xq + blk * TI::QK, xd + blk * (TI::QK / 32));
	}
	return acc;
}

// The sum of v over the tpr threads of each row of the block (tpr = 32, 64 or 128: whole
// warps), valid in the row's first thread; every thread of the block calls it. The warps'
// partial sums add in warp order, so the result does not depend on timing.
static __device__ __forceinline__ float row_sum(float v, int tpr, float *part) {
	v = warp_sum(v);
	if (tpr == 32) return v;
	const int w = threadIdx.x >> 5;
	if ((threadIdx.x & 31) == 0) part[w] = v;
	__syncthreads();
	if (threadIdx.x % tpr == 0) {
		v = part[w];
		for (int i = 1; i < tpr / 32; i++) v += part[w + i];
	}
	__syncthreads(); // part is reused by the caller's next sum
	return v;
}

// Up to three matrices of the same type and width reading the same x (q, k and v), one
// launch: the row blocks of w0, then w1's, then w2's (rows 0: none). With ids (MoE), only
// w0: blockIdx.y is the slot. A bias (null: none) is added to the sum, as a separate bias
// add would. (Separate parameters, not a struct: the launcher passes 8-byte slots.)
#define MMVQ_PARAMS                                                                                                  \
	const uint8_t *w0, const uint8_t *w1, const uint8_t *w2, float *y0, float *y1, float *y2, const float *b0,       \
		const float *b1, const float *b2, int rows0, int rows1, int rows2, int rpb, long long expert_stride,          \
		const int *ids, const int8_t *xq, long long xq_stride, int cols
template <int T>
static __device__ __forceinline__ void mmvq_body(MMVQ_PARAMS) {
	grid_dependency_entry();
	typedef TypeInfo<T> TI;
	typedef Q8Dot<T> D;
	__shared__ float part[MMVQ_THREADS / 32];
	const int tpr = MMVQ_THREADS / rpb;
	int rb = blockIdx.x;
	const int nb0 = (rows0 + rpb - 1) / rpb, nb1 = (rows1 + rpb - 1) / rpb;
	const int mi = rb < nb0 ? 0 : rb < nb0 + nb1 ? 1 : 2;
	rb -= mi == 0 ? 0 : mi == 1 ? nb0 : nb0 + nb1;
	const uint8_t *W = mi == 0 ? w0 : mi == 1 ? w1 : w2;
	float *Y = mi == 0 ? y0 : mi == 1 ? y1 : y2;
	const float *bias = mi == 0 ? b0 : mi == 1 ? b1 : b2;
	const int rows = mi == 0 ? rows0 : mi == 1 ? rows1 : rows2;
	const int row = rb * rpb + threadIdx.x / tpr, t = threadIdx.x % tpr;
	const bool valid = row < rows;
	const int e = blockIdx.y;
	const long long expert = ids ? (long long)ids[e] : (long long)e;
	const long long row_bytes = (long long)(cols / TI::QK) * TI::BYTES;
	const uint8_t *w = W + expert * expert_stride + (long long)(valid ? row : 0) * row_bytes;
	xq += (long long)e * xq_stride;
	const float *xd = (const float *)(xq + cols);
	float acc = row_dot<T>(w, xq, xd, valid ? cols / TI::QK * D::UNITS : 0, t, tpr);
	acc = row_sum(acc, tpr, part);
	if (valid && t == 0) Y[(long long)e * rows + row] = bias ? acc + bias[row] : acc;
}

#define MMVQ_KERNEL(name, t)                                                                                         \
	extern "C" __global__ void __launch_bounds__(MMVQ_THREADS) mul_mat_vec_q8_##name(MMVQ_PARAMS) {              \
		mmvq_body<t>(w0, w1, w2, y0, y1, y2, b0, b1, b2, rows0, rows1, rows2, rpb, expert_stride, ids, xq, xq_stride, \
			cols);                                                                                                   \
	}
MMVQ_KERNEL(q4_0, T_Q4_0)
MMVQ_KERNEL(q8_0, T_Q8_0)
MMVQ_KERNEL(mxfp4, T_MXFP4)
MMVQ_KERNEL(iq4_xs, T_IQ4_XS)
MMVQ_KERNEL(q4_K, T_Q4_K)
MMVQ_KERNEL(q5_K, T_Q5_K)
MMVQ_KERNEL(q6_K, T_Q6_K)
MMVQ_KERNEL(q2_K, T_Q2_K)
MMVQ_KERNEL(q3_K, T_Q3_K)
MMVQ_KERNEL(iq2_xxs, T_IQ2_XXS)
MMVQ_KERNEL(iq2_xs, T_IQ2_XS)
MMVQ_KERNEL(iq2_s, T_IQ2_S)
MMVQ_KERNEL(iq3_xxs, T_IQ3_XXS)
MMVQ_KERNEL(iq3_s, T_IQ3_S)
#undef MMVQ_KERNEL
#undef MMVQ_PARAMS

// ---------------------------------------------------------------------------------------
// Fused MoE decode. moe_gate_up_q8: for routed slot e (blockIdx.y) and row r, h[e][r] =
// silu(Wg[ids[e]] x)[r] * (Wu[ids[e]] x)[r], the two matrices sharing the x loads (same
// type, same expert stride). moe_down_q8: y[r] += sum_e w[e] * (Wd[ids[e]] h[e])[r], the
// row's threads over all k slots' units, with h quantised per slot (rows xq_stride bytes
// apart): the down projection, the router-weighted sum and the residual add in one launch.
// Both take rpb rows per block of 128 threads, as mul_mat_vec_q8.
// gpt-oss's extras (null / 0: none): per-expert bias stacks (b_stride floats from one expert
// to the next) added to the gate and up products and, weighted, to the down product; and the
// clamped SwiGLU when limit > 0 (g = min(g, limit), u = clamp(u, +-limit),
// h = g * sigmoid(alpha*g) * (u + 1)).
template <int T>
static __device__ __forceinline__ void moe_gate_up_body(const uint8_t *__restrict__ Wg, const uint8_t *__restrict__ Wu,
	long long expert_stride, const int *__restrict__ ids, const int8_t *__restrict__ xq, float *__restrict__ h,
	int rows, int cols, const float *__restrict__ bg, const float *__restrict__ bu, long long b_stride, float limit, float alpha,
	int rpb) {
	grid_dependency_entry();
	typedef TypeInfo<T> TI;
	typedef Q8Dot<T> D;
	__shared__ float part[MMVQ_THREADS / 32];
	const int tpr = MMVQ_THREADS / rpb;
	const int e = blockIdx.y;
	const int row = blockIdx.x * rpb + threadIdx.x / tpr, t = threadIdx.x % tpr;
	const bool valid = row < rows;
	const long long row_bytes = (long long)(cols / TI::QK) * TI::BYTES;
	const long long off = (long long)ids[e] * expert_stride + (long long)(valid ? row : 0) * row_bytes;
	const uint8_t *wg = Wg + off, *wu = Wu + off;
	const float *xd = (const float *)(xq + cols);
	const int nunits = valid ? cols / TI::QK * D::UNITS : 0;
	float ag = 0.f, au = 0.f;
#pragma unroll 4
	for (int c = t; c < nunits; c += tpr) {
		const int blk = c / D::UNITS, u = c % D::UNITS;
		const int8_t *xb = xq + blk * TI::QK;
		const float *db = xd + blk * (TI::QK / 32);
		ag += D::dot(wg + (long long)blk * TI::BYTES, u, xb, db);
		au += D::dot(wu + (long long)blk * TI::BYTES, u, xb, db);
	}
	ag = row_sum(ag, tpr, part);
	au = row_sum(au, tpr, part);
	if (!valid || t != 0) return;
	if (bg != nullptr) ag += bg[(long long)ids[e] * b_stride + row];
	if (bu != nullptr) au += bu[(long long)ids[e] * b_stride + row];
	if (limit > 0.f) {
		ag = fminf(ag, limit);
		au = fmaxf(fminf(au, limit), -limit);
		h[(long long)e * rows + row] = ag / (1.f + expf(-alpha * ag)) * (au + 1.f);
	} else {
		h[(long long)e * rows + row] = ag / (1.f + expf(-ag)) * au;
	}
}

template <int T>
static __device__ __forceinline__ void moe_down_body(const uint8_t *__restrict__ Wd, long long expert_stride,
	const int *__restrict__ ids, const float *__restrict__ wts, const int8_t *__restrict__ hq, long long hq_stride,
	float *__restrict__ y, int rows, int cols, int k, const float *__restrict__ bd, long long b_stride, int rpb) {
	grid_dependency_entry();
	typedef TypeInfo<T> TI;
	typedef Q8Dot<T> D;
	__shared__ float part[MMVQ_THREADS / 32];
	const int tpr = MMVQ_THREADS / rpb;
	const int row = blockIdx.x * rpb + threadIdx.x / tpr, t = threadIdx.x % tpr;
	const bool valid = row < rows;
	const long long row_bytes = (long long)(cols / TI::QK) * TI::BYTES;
	const uint8_t *wrow = Wd + (long long)(valid ? row : 0) * row_bytes;
	const int per = cols / TI::QK * D::UNITS;
	const int nunits = valid ? per * k : 0;
	float acc = 0.f;
#pragma unroll 4
	for (int c = t; c < nunits; c += tpr) {
		const int e = c / per, cu = c - e * per;
		const int blk = cu / D::UNITS, u = cu % D::UNITS;
		const uint8_t *w = wrow + (long long)ids[e] * expert_stride;
		const int8_t *x = hq + e * hq_stride;
		acc += wts[e] * D::dot(w + (long long)blk * TI::BYTES, u, x + blk * TI::QK, (const float *)(x + cols) + blk * (TI::QK / 32));
	}
	acc = row_sum(acc, tpr, part);
	if (!valid || t != 0) return;
	if (bd != nullptr)
		for (int e = 0; e < k; e++) acc += wts[e] * bd[(long long)ids[e] * b_stride + row];
	y[row] += acc;
}

#define MOE_KERNELS(name, t)                                                                                      \
	extern "C" __global__ void __launch_bounds__(MMVQ_THREADS) moe_gate_up_q8_##name(const uint8_t *Wg,           \
		const uint8_t *Wu, long long expert_stride, const int *ids, const int8_t *xq, float *h, int rows,        \
		int cols, const float *bg, const float *bu, long long b_stride, float limit, float alpha, int rpb) {      \
		moe_gate_up_body<t>(Wg, Wu, expert_stride, ids, xq, h, rows, cols, bg, bu, b_stride, limit, alpha, rpb); \
	}                                                                                                             \
	extern "C" __global__ void __launch_bounds__(MMVQ_THREADS) moe_down_q8_##name(const uint8_t *Wd,              \
		long long expert_stride, const int *ids, const float *wts, const int8_t *hq, long long hq_stride,        \
		float *y, int rows, int cols, int k, const float *bd, long long b_stride, int rpb) {                      \
		moe_down_body<t>(Wd, expert_stride, ids, wts, hq, hq_stride, y, rows, cols, k, bd, b_stride, rpb);        \
	}
MOE_KERNELS(q4_0, T_Q4_0)
MOE_KERNELS(q8_0, T_Q8_0)
MOE_KERNELS(mxfp4, T_MXFP4)
MOE_KERNELS(iq4_xs, T_IQ4_XS)
MOE_KERNELS(q4_K, T_Q4_K)
MOE_KERNELS(q5_K, T_Q5_K)
MOE_KERNELS(q6_K, T_Q6_K)
MOE_KERNELS(q2_K, T_Q2_K)
MOE_KERNELS(q3_K, T_Q3_K)
MOE_KERNELS(iq2_xxs, T_IQ2_XXS)
MOE_KERNELS(iq2_xs, T_IQ2_XS)
MOE_KERNELS(iq2_s, T_IQ2_S)
MOE_KERNELS(iq3_xxs, T_IQ3_XXS)
MOE_KERNELS(iq3_s, T_IQ3_S)
#undef MOE_KERNELS
