// mul_mat_vec_q8.cu: the fast decode matvec. x is first quantised to 8 bits per 32 values
// (quantize_q8: int8 q[cols], then one float scale per 32 values, the row padded to 16
// bytes), and each weight type takes integer dot products of 4 values at a time (dp4a)
// against it. A lane handles units of 16 weights; one warp per row, 4 rows per block.
// The MoE form is as in mul_mat_vec.cu: blockIdx.y is the routed slot, ids[e] the expert,
// xq advances by xq_stride bytes per slot (0: shared).
#include "common.cuh"

#define MMVQ_WARPS 4

// x quantised: 32 values per group, scale d = max|x| / 127.
extern "C" __global__ void quantize_q8(const float *x, int8_t *xq, int cols, int row_bytes) {
	const int g = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5), lane = threadIdx.x & 31;
	if (g >= cols / 32) return;
	const long long r = blockIdx.y;
	const float v = x[r * cols + g * 32 + lane];
	const float amax = warp_max(fabsf(v));
	const float d = amax / 127.f;
	const int q = d > 0.f ? __float2int_rn(v / d) : 0;
	int8_t *row = xq + r * row_bytes;
	row[g * 32 + lane] = (int8_t)q;
	if (lane == 0) ((float *)(row + cols))[g] = d;
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
static __device__ __forceinline__ void ld8_i(const int8_t *p, int &a, int &b) {
	const int2 v = *(const int2 *)p;
	a = v.x;
	b = v.y;
}
static __device__ __forceinline__ void ld16_i(const int8_t *p, int (&w)[4]) {
	const int4 v = *(const int4 *)p;
	w[0] = v.x; w[1] = v.y; w[2] = v.z; w[3] = v.w;
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

// Per type: UNITS units of 16 weights per block; dot(b, u, xq, xd) is the unit's sum of
// w_i * x_i, where xq/xd point at the block's first value / first 32-group scale.
template <int T> struct Q8Dot;

template <> struct Q8Dot<T_Q8_0> {
	static constexpr int UNITS = 2;
	static __device__ __forceinline__ float dot(const uint8_t *b, int u, const int8_t *xq, const float *xd) {
		int w[4], x[4];
		ld16_a2(b + 2 + 16 * u, w);
		ld16_i(xq + 16 * u, x);
		int s = 0;
#pragma unroll
		for (int i = 0; i < 4; i++) s = dp4a(w[i], x[i], s);
		return ld_half(b) * xd[0] * (float)s;
	}
};

template <> struct Q8Dot<T_Q4_0> {
	static constexpr int UNITS = 2;
	static __device__ __forceinline__ float dot(const uint8_t *b, int u, const int8_t *xq, const float *xd) {
		int w[4], x[4];
		ld16_a2(b + 2, w);
		ld16_i(xq + 16 * u, x);
		int s = 0, sx = 0;
#pragma unroll
		for (int i = 0; i < 4; i++) {
			s = dp4a((w[i] >> (4 * u)) & 0x0F0F0F0F, x[i], s);
			sx = dp4a(0x01010101, x[i], sx);
		}
		return ld_half(b) * xd[0] * (float)(s - 8 * sx);
	}
};

template <> struct Q8Dot<T_MXFP4> {
	static constexpr int UNITS = 2;
	static __device__ __forceinline__ float dot(const uint8_t *b, int u, const int8_t *xq, const float *xd) {
		// kvalues_mxfp4 {0,1,2,3,4,6,8,12,0,-1,-2,-3,-4,-6,-8,-12} as 4 little-endian words
		const uint32_t t0 = 0x03020100u, t1 = 0x0C080604u, t2 = 0xFDFEFF00u, t3 = 0xF4F8FAFCu;
		uint32_t lo0, hi0, lo1, hi1;
		ld8_a1(b + 1, lo0, hi0);
		ld8_a1(b + 9, lo1, hi1);
		const uint32_t w[4] = {lo0, hi0, lo1, hi1};
		int x[4];
		ld16_i(xq + 16 * u, x);
		int s = 0;
#pragma unroll
		for (int i = 0; i < 4; i++) s = dp4a(lut16((w[i] >> (4 * u)) & 0x0F0F0F0Fu, t0, t1, t2, t3), x[i], s);
		return e8m0_half(b[0]) * xd[0] * (float)s;
	}
};

template <> struct Q8Dot<T_IQ4_XS> {
	static constexpr int UNITS = 16;
	static __device__ __forceinline__ float dot(const uint8_t *b, int u, const int8_t *xq, const float *xd) {
		// kvalues_iq4nl {-127,-104,-83,-65,-49,-35,-22,-10,1,13,25,38,53,69,89,113}
		const uint32_t t0 = 0xBFAD9881u, t1 = 0xF6EADDCFu, t2 = 0x26190D01u, t3 = 0x71594535u;
		const int ib = u >> 1, half = u & 1;
		const uint32_t sh_ = ld_u16(b + 2);
		const int ls = (int)(((b[4 + (ib >> 1)] >> (4 * (ib & 1))) & 0xF) | (((sh_ >> (2 * ib)) & 3) << 4));
		uint32_t l0, h0, l1, h1;
		ld8_a8(b + 8 + 16 * ib, l0, h0);
		ld8_a8(b + 16 + 16 * ib, l1, h1);
		const uint32_t w[4] = {l0, h0, l1, h1};
		int x[4];
		ld16_i(xq + 32 * ib + 16 * half, x);
		int s = 0;
#pragma unroll
		for (int i = 0; i < 4; i++) s = dp4a(lut16((w[i] >> (4 * half)) & 0x0F0F0F0Fu, t0, t1, t2, t3), x[i], s);
		return ld_half(b) * (float)(ls - 32) * xd[ib] * (float)s;
	}
};

// Q4_K unit u: pair p = u/4 of sub-blocks (2p, 2p+1), quarter r = u%4: the 8 bytes
// qs[32p + 8r ..] hold values 8r.. of sub-block 2p (low nibbles) and of 2p+1 (high).
template <> struct Q8Dot<T_Q4_K> {
	static constexpr int UNITS = 16;
	static __device__ __forceinline__ float dot(const uint8_t *b, int u, const int8_t *xq, const float *xd) {
		const int p = u >> 2, r = u & 3;
		float sc0, m0, sc1, m1;
		scale_min_k4(2 * p, b + 4, sc0, m0);
		scale_min_k4(2 * p + 1, b + 4, sc1, m1);
		uint32_t lo, hi;
		ld8_a8(b + 16 + 32 * p + 8 * r, lo, hi);
		int xa0, xa1, xb0, xb1;
		ld8_i(xq + 64 * p + 8 * r, xa0, xa1);
		ld8_i(xq + 64 * p + 32 + 8 * r, xb0, xb1);
		const int one = 0x01010101;
		const int sa = dp4a((int)(lo & 0x0F0F0F0Fu), xa0, dp4a((int)(hi & 0x0F0F0F0Fu), xa1, 0));
		const int sb = dp4a((int)((lo >> 4) & 0x0F0F0F0Fu), xb0, dp4a((int)((hi >> 4) & 0x0F0F0F0Fu), xb1, 0));
		const int na = dp4a(one, xa0, dp4a(one, xa1, 0)), nb = dp4a(one, xb0, dp4a(one, xb1, 0));
		const float d = ld_half(b), dmin = ld_half(b + 2);
		const float da = xd[2 * p], db = xd[2 * p + 1];
		return da * (d * sc0 * (float)sa - dmin * m0 * (float)na) + db * (d * sc1 * (float)sb - dmin * m1 * (float)nb);
	}
};

// Q5_K: as Q4_K with the fifth bits from qh[8r ..], bit j for sub-block j.
template <> struct Q8Dot<T_Q5_K> {
	static constexpr int UNITS = 16;
	static __device__ __forceinline__ float dot(const uint8_t *b, int u, const int8_t *xq, const float *xd) {
		const int p = u >> 2, r = u & 3;
		float sc0, m0, sc1, m1;
		scale_min_k4(2 * p, b + 4, sc0, m0);
		scale_min_k4(2 * p + 1, b + 4, sc1, m1);
		uint32_t lo, hi, hlo, hhi;
		ld8_a8(b + 48 + 32 * p + 8 * r, lo, hi);
		ld8_a8(b + 16 + 8 * r, hlo, hhi);
		int xa0, xa1, xb0, xb1;
		ld8_i(xq + 64 * p + 8 * r, xa0, xa1);
		ld8_i(xq + 64 * p + 32 + 8 * r, xb0, xb1);
		const int j0 = 2 * p, j1 = 2 * p + 1;
		const int qa0 = (int)((lo & 0x0F0F0F0Fu) | (((hlo >> j0) & 0x01010101u) << 4));
		const int qa1 = (int)((hi & 0x0F0F0F0Fu) | (((hhi >> j0) & 0x01010101u) << 4));
		const int qb0 = (int)(((lo >> 4) & 0x0F0F0F0Fu) | (((hlo >> j1) & 0x01010101u) << 4));
		const int qb1 = (int)(((hi >> 4) & 0x0F0F0F0Fu) | (((hhi >> j1) & 0x01010101u) << 4));
		const int one = 0x01010101;
		const int sa = dp4a(qa0, xa0, dp4a(qa1, xa1, 0)), sb = dp4a(qb0, xb0, dp4a(qb1, xb1, 0));
		const int na = dp4a(one, xa0, dp4a(one, xa1, 0)), nb = dp4a(one, xb0, dp4a(one, xb1, 0));
		const float d = ld_half(b), dmin = ld_half(b + 2);
		const float da = xd[2 * p], db = xd[2 * p + 1];
		return da * (d * sc0 * (float)sa - dmin * m0 * (float)na) + db * (d * sc1 * (float)sb - dmin * m1 * (float)nb);
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

template <int T>
static __device__ __forceinline__ void mmvq_body(const uint8_t *__restrict__ W, long long expert_stride,
	const int *__restrict__ ids, const int8_t *__restrict__ xq, long long xq_stride, float *__restrict__ y,
	int rows, int cols) {
	typedef TypeInfo<T> TI;
	typedef Q8Dot<T> D;
	const int e = blockIdx.y;
	const int row = blockIdx.x * MMVQ_WARPS + (threadIdx.x >> 5);
	if (row >= rows) return;
	const int lane = threadIdx.x & 31;
	const long long expert = ids ? (long long)ids[e] : (long long)e;
	const long long row_bytes = (long long)(cols / TI::QK) * TI::BYTES;
	const uint8_t *w = W + expert * expert_stride + (long long)row * row_bytes;
	xq += (long long)e * xq_stride;
	const float *xd = (const float *)(xq + cols);
	const int nunits = cols / TI::QK * D::UNITS;
	float acc = 0.f;
#pragma unroll 2
	for (int c = lane; c < nunits; c += 32) {
		const int blk = c / D::UNITS, u = c % D::UNITS;
		acc += D::dot(w + (long long)blk * TI::BYTES, u, xq + blk * TI::QK, xd + blk * (TI::QK / 32));
	}
	acc = warp_sum(acc);
	if (lane == 0) y[(long long)e * rows + row] = acc;
}

#define MMVQ_KERNEL(name, t)                                                                               \
	extern "C" __global__ void __launch_bounds__(MMVQ_WARPS * 32) mul_mat_vec_q8_##name(                   \
		const uint8_t *W, long long expert_stride, const int *ids, const int8_t *xq, long long xq_stride, \
		float *y, int rows, int cols) {                                                                    \
		mmvq_body<t>(W, expert_stride, ids, xq, xq_stride, y, rows, cols);                                 \
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

// ---------------------------------------------------------------------------------------
// Fused MoE decode. moe_gate_up_q8: for routed slot e (blockIdx.y) and row r, h[e][r] =
// silu(Wg[ids[e]] x)[r] * (Wu[ids[e]] x)[r], the two matrices sharing the x loads (same
// type, same expert stride). moe_down_q8: y[r] += sum_e w[e] * (Wd[ids[e]] h[e])[r], one warp
// per row over all k slots, with h quantised per slot (rows xq_stride bytes apart): the
// down projection, the router-weighted sum and the residual add in one launch.
// gpt-oss's extras (null / 0: none): per-expert bias stacks (b_stride floats from one expert
// to the next) added to the gate and up products and, weighted, to the down product; and the
// clamped SwiGLU when limit > 0 (g = min(g, limit), u = clamp(u, +-limit),
// h = g * sigmoid(alpha*g) * (u + 1)).
template <int T>
static __device__ __forceinline__ void moe_gate_up_body(const uint8_t *__restrict__ Wg, const uint8_t *__restrict__ Wu,
	long long expert_stride, const int *__restrict__ ids, const int8_t *__restrict__ xq, float *__restrict__ h,
	int rows, int cols, const float *__restrict__ bg, const float *__restrict__ bu, long long b_stride, float limit, float alpha) {
	typedef TypeInfo<T> TI;
	typedef Q8Dot<T> D;
	const int e = blockIdx.y;
	const int row = blockIdx.x * MMVQ_WARPS + (threadIdx.x >> 5);
	if (row >= rows) return;
	const int lane = threadIdx.x & 31;
	const long long row_bytes = (long long)(cols / TI::QK) * TI::BYTES;
	const long long off = (long long)ids[e] * expert_stride + (long long)row * row_bytes;
	const uint8_t *wg = Wg + off, *wu = Wu + off;
	const float *xd = (const float *)(xq + cols);
	const int nunits = cols / TI::QK * D::UNITS;
	float ag = 0.f, au = 0.f;
#pragma unroll 2
	for (int c = lane; c < nunits; c += 32) {
		const int blk = c / D::UNITS, u = c % D::UNITS;
		const int8_t *xb = xq + blk * TI::QK;
		const float *db = xd + blk * (TI::QK / 32);
		ag += D::dot(wg + (long long)blk * TI::BYTES, u, xb, db);
		au += D::dot(wu + (long long)blk * TI::BYTES, u, xb, db);
	}
	ag = warp_sum(ag);
	au = warp_sum(au);
	if (lane != 0) return;
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
	float *__restrict__ y, int rows, int cols, int k, const float *__restrict__ bd, long long b_stride) {
	typedef TypeInfo<T> TI;
	typedef Q8Dot<T> D;
	const int row = blockIdx.x * MMVQ_WARPS + (threadIdx.x >> 5);
	if (row >= rows) return;
	const int lane = threadIdx.x & 31;
	const long long row_bytes = (long long)(cols / TI::QK) * TI::BYTES;
	const int per = cols / TI::QK * D::UNITS;
	const int nunits = per * k;
	float acc = 0.f;
#pragma unroll 2
	for (int c = lane; c < nunits; c += 32) {
		const int e = c / per, cu = c % per;
		const int blk = cu / D::UNITS, u = cu % D::UNITS;
		const uint8_t *w = Wd + (long long)ids[e] * expert_stride + (long long)row * row_bytes;
		const int8_t *x = hq + e * hq_stride;
		acc += wts[e] * D::dot(w + (long long)blk * TI::BYTES, u, x + blk * TI::QK, (const float *)(x + cols) + blk * (TI::QK / 32));
	}
	acc = warp_sum(acc);
	if (lane != 0) return;
	if (bd != nullptr)
		for (int e = 0; e < k; e++) acc += wts[e] * bd[(long long)ids[e] * b_stride + row];
	y[row] += acc;
}

#define MOE_KERNELS(name, t)                                                                                   \
	extern "C" __global__ void __launch_bounds__(MMVQ_WARPS * 32) moe_gate_up_q8_##name(const uint8_t *Wg,     \
		const uint8_t *Wu, long long expert_stride, const int *ids, const int8_t *xq, float *h, int rows,     \
		int cols, const float *bg, const float *bu, long long b_stride, float limit, float alpha) {            \
		moe_gate_up_body<t>(Wg, Wu, expert_stride, ids, xq, h, rows, cols, bg, bu, b_stride, limit, alpha);    \
	}                                                                                                          \
	extern "C" __global__ void __launch_bounds__(MMVQ_WARPS * 32) moe_down_q8_##name(const uint8_t *Wd,        \
		long long expert_stride, const int *ids, const float *wts, const int8_t *hq, long long hq_stride,     \
		float *y, int rows, int cols, int k, const float *bd, long long b_stride) {                            \
		moe_down_body<t>(Wd, expert_stride, ids, wts, hq, hq_stride, y, rows, cols, k, bd, b_stride);          \
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
