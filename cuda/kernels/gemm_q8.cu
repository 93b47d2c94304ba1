// gemm_q8.cu: the prompt's expert GEMMs on the integer tensor cores, the grouped form of
// gemm_q (gemm.cu) with its slots and gathered rows: slot e = blockIdx.z multiplies expert
// slot_expert[e] with output rows slot_off[e] .. slot_off[e+1], row r reading activation row
// row_idx[r] (all three null: the plain Y[n x m] = X W^T).
// The activations come quantised by quantize_q8_sums (per row: int8 q[k], then float2
// (d, d * sum q) per 32 values); each 32-value group of a weight row is decoded once per
// tile into int8 values and a float scale (Q4_K: and a min), as llama.cpp's MMQ does, so
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
// int8 values and dm = (scale, min): the group's weights are dm.x * q - dm.y.
template <int T> struct Q8Tile;

template <> struct Q8Tile<T_Q8_0> {
	static constexpr bool MIN = false;
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
	static constexpr bool MIN = false;
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
	static constexpr bool MIN = true;
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
	const int e = blockIdx.z;
	const int start = slot_off ? slot_off[e] : 0, end = slot_off ? slot_off[e + 1] : n;
	const int bm = start + blockIdx.y * BM, bn = blockIdx.x * GQ_BN;
	if (bm >= end) return; // the whole block: this slot has fewer rows
	const long long row_bytes = (long long)(k / TI::QK) * TI::BYTES;
	W += (slot_expert ? (long long)slot_expert[e] : 0ll) * expert_stride;
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
GEMM_Q8_KERNELS(q8_0, T_Q8_0)
GEMM_Q8_KERNELS(mxfp4, T_MXFP4)
GEMM_Q8_KERNELS(q4_K, T_Q4_K)
#undef GEMM_Q8_KERNELS
#undef GEMM_Q8_KERNEL
