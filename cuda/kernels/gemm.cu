// gemm.cu: Y[n x m] = X[n x k] * W[m x k]^T for prefill, W in f16 (quantised weights are
// dequantised to f16 first, see dequantize.cu), X f32 or f16, Y f32.
// Tensor cores: mma.sync m16n8k16 on sm_80+, two m16n8k8 on sm_75. A 128-thread block
// computes a 64x64 tile of Y; each warp a 32x32 quarter. The next k-tile is fetched into
// registers while the current one is multiplied from shared memory. k must be a multiple of 8.
#include "common.cuh"

#define GB_M 64
#define GB_N 64
#define GB_K 32
#define GB_PAD 8

static __device__ __forceinline__ void mma_16816(float (&c)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
	uint32_t b0, uint32_t b1) {
#if __CUDA_ARCH__ >= 800
	asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
		: "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
		: "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
#else
	asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%0,%1,%2,%3};\n"
		: "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
		: "r"(a0), "r"(a1), "r"(b0));
	asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%0,%1,%2,%3};\n"
		: "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
		: "r"(a2), "r"(a3), "r"(b1));
#endif
}

// Register staging of one 64x32 tile of 16-bit values: 2 x 16 bytes per thread.
struct Stage16 {
	uint4 v[2];
};

static __device__ __forceinline__ void load_tile_f16(Stage16 &s, const __half *__restrict__ src, int rows, int k,
	int row0, int k0) {
#pragma unroll
	for (int i = 0; i < 2; i++) {
		const int idx = threadIdx.x + 128 * i;
		const int r = row0 + (idx >> 2), kk = k0 + (idx & 3) * 8;
		if (r < rows && kk < k) {
			s.v[i] = *(const uint4 *)(src + (long long)r * k + kk);
		} else {
			s.v[i] = make_uint4(0, 0, 0, 0);
		}
	}
}
static __device__ __forceinline__ void store_tile_f16(const Stage16 &s, __half (*dst)[GB_K + GB_PAD]) {
#pragma unroll
	for (int i = 0; i < 2; i++) {
		const int idx = threadIdx.x + 128 * i;
		*(uint4 *)&dst[idx >> 2][(idx & 3) * 8] = s.v[i];
	}
}
// f32 activations: 4 x float4 per thread, converted to f16 on the way into shared memory.
struct Stage32 {
	float4 v[4];
};
static __device__ __forceinline__ void load_tile_f32(Stage32 &s, const float *__restrict__ src, int rows, int k,
	int row0, int k0) {
#pragma unroll
	for (int i = 0; i < 4; i++) {
		const int idx = threadIdx.x + 128 * i;
		const int r = row0 + (idx >> 3), kk = k0 + (idx & 7) * 4;
		if (r < rows && kk < k) {
			s.v[i] = *(const float4 *)(src + (long long)r * k + kk);
		} else {
			s.v[i] = make_float4(0.f, 0.f, 0.f, 0.f);
		}
	}
}
static __device__ __forceinline__ void store_tile_f32(const Stage32 &s, __half (*dst)[GB_K + GB_PAD]) {
#pragma unroll
	for (int i = 0; i < 4; i++) {
		const int idx = threadIdx.x + 128 * i;
		__half2 h[2] = {__floats2half2_rn(s.v[i].x, s.v[i].y), __floats2half2_rn(s.v[i].z, s.v[i].w)};
		*(uint2 *)&dst[idx >> 3][(idx & 7) * 4] = *(const uint2 *)h;
	}
}

template <bool XF32>
static __device__ __forceinline__ void gemm_body(const __half *__restrict__ W, const void *__restrict__ Xv,
	float *__restrict__ Y, int m, int n, int k) {
	__shared__ __align__(16) __half As[GB_M][GB_K + GB_PAD]; // X tile (rows = tokens)
	__shared__ __align__(16) __half Bs[GB_N][GB_K + GB_PAD]; // W tile (rows = output features)
	const int bn = blockIdx.x * GB_N, bm = blockIdx.y * GB_M;
	const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
	const int wm = warp >> 1, wn = warp & 1;
	const int g = lane >> 2, t = lane & 3;
	float acc[2][4][4];
#pragma unroll
	for (int i = 0; i < 2; i++)
#pragma unroll
		for (int j = 0; j < 4; j++)
#pragma unroll
			for (int q = 0; q < 4; q++) acc[i][j][q] = 0.f;

	Stage16 sw;
	Stage32 sx32;
	Stage16 sx16;
	load_tile_f16(sw, W, m, k, bn, 0);
	if (XF32) load_tile_f32(sx32, (const float *)Xv, n, k, bm, 0);
	else load_tile_f16(sx16, (const __half *)Xv, n, k, bm, 0);

	for (int k0 = 0; k0 < k; k0 += GB_K) {
		store_tile_f16(sw, Bs);
		if (XF32) store_tile_f32(sx32, As);
		else store_tile_f16(sx16, As);
		__syncthreads();
		if (k0 + GB_K < k) { // fetch the next tile while this one is multiplied
			load_tile_f16(sw, W, m, k, bn, k0 + GB_K);
			if (XF32) load_tile_f32(sx32, (const float *)Xv, n, k, bm, k0 + GB_K);
			else load_tile_f16(sx16, (const __half *)Xv, n, k, bm, k0 + GB_K);
		}
#pragma unroll
		for (int kk = 0; kk < GB_K; kk += 16) {
			uint32_t a[2][4], b[4][2];
#pragma unroll
			for (int i = 0; i < 2; i++) {
				const int r = wm * 32 + i * 16 + g;
				a[i][0] = *(const uint32_t *)&As[r][kk + 2 * t];
				a[i][1] = *(const uint32_t *)&As[r + 8][kk + 2 * t];
				a[i][2] = *(const uint32_t *)&As[r][kk + 2 * t + 8];
				a[i][3] = *(const uint32_t *)&As[r + 8][kk + 2 * t + 8];
			}
#pragma unroll
			for (int j = 0; j < 4; j++) {
				const int c = wn * 32 + j * 8 + g;
				b[j][0] = *(const uint32_t *)&Bs[c][kk + 2 * t];
				b[j][1] = *(const uint32_t *)&Bs[c][kk + 2 * t + 8];
			}
#pragma unroll
			for (int i = 0; i < 2; i++)
#pragma unroll
				for (int j = 0; j < 4; j++) mma_16816(acc[i][j], a[i][0], a[i][1], a[i][2], a[i][3], b[j][0], b[j][1]);
		}
		__syncthreads();
	}
#pragma unroll
	for (int i = 0; i < 2; i++)
#pragma unroll
		for (int j = 0; j < 4; j++) {
			const int r = bm + wm * 32 + i * 16 + g;
			const int c = bn + wn * 32 + j * 8 + 2 * t;
#pragma unroll
			for (int h = 0; h < 2; h++) {
				const int rr = r + 8 * h;
				if (rr >= n) continue;
				if (c < m) Y[(long long)rr * m + c] = acc[i][j][2 * h];
				if (c + 1 < m) Y[(long long)rr * m + c + 1] = acc[i][j][2 * h + 1];
			}
		}
}

extern "C" __global__ void __launch_bounds__(128) gemm_f16_f32(const __half *W, const float *X, float *Y, int m, int n, int k) {
	gemm_body<true>(W, X, Y, m, n, k);
}
extern "C" __global__ void __launch_bounds__(128) gemm_f16_f16(const __half *W, const __half *X, float *Y, int m, int n, int k) {
	gemm_body<false>(W, X, Y, m, n, k);
}

// ---------------------------------------------------------------------------------------
// Quantised weights, dequantised tile by tile inside the kernel (no f16 copy of W), and
// the grouped MoE form. Slot e = blockIdx.z multiplies expert slot_expert[e] with the rows
// slot_off[e] .. slot_off[e+1] of the output; output row r reads X row row_idx[r]. With
// slot_expert, row_idx and slot_off all null it is the plain Y[n x m] = X W^T.

// One 64x32 W tile: 256 chunks of 8 values, 2 per thread, decoded into registers.
struct StageQ {
	float v[2][8];
};
template <int T>
static __device__ __forceinline__ void load_tile_q(StageQ &s, const uint8_t *__restrict__ W, long long row_bytes, int rows,
	int k, int row0, int k0) {
	typedef TypeInfo<T> TI;
#pragma unroll
	for (int i = 0; i < 2; i++) {
		const int idx = threadIdx.x + 128 * i;
		const int r = row0 + (idx >> 2), kk = k0 + (idx & 3) * 8;
		if (r < rows && kk < k) {
			const int c = kk / 8;
			deq8<T>(W + (long long)r * row_bytes + (long long)(c / TI::CPB) * TI::BYTES, c % TI::CPB, s.v[i]);
		} else {
#pragma unroll
			for (int j = 0; j < 8; j++) s.v[i][j] = 0.f;
		}
	}
}
static __device__ __forceinline__ void store_tile_q(const StageQ &s, __half (*dst)[GB_K + GB_PAD]) {
#pragma unroll
	for (int i = 0; i < 2; i++) {
		const int idx = threadIdx.x + 128 * i;
		__half2 h[4];
#pragma unroll
		for (int j = 0; j < 4; j++) h[j] = __floats2half2_rn(s.v[i][2 * j], s.v[i][2 * j + 1]);
		*(uint4 *)&dst[idx >> 2][(idx & 3) * 8] = *(const uint4 *)h;
	}
}
// X tile rows gathered through row_idx: each thread loads rows (tid>>3) + 16i, i < 4.
static __device__ __forceinline__ void load_tile_x_rows(Stage32 &s, const float *const (&xr)[4], int k, int k0) {
#pragma unroll
	for (int i = 0; i < 4; i++) {
		const int kk = k0 + (threadIdx.x & 7) * 4;
		if (xr[i] && kk < k) {
			s.v[i] = *(const float4 *)(xr[i] + kk);
		} else {
			s.v[i] = make_float4(0.f, 0.f, 0.f, 0.f);
		}
	}
}

template <int T>
static __device__ __forceinline__ void gemm_q_body(const uint8_t *__restrict__ W, long long expert_stride,
	const int *__restrict__ slot_expert, const float *__restrict__ X, const int *__restrict__ row_idx,
	const int *__restrict__ slot_off, float *__restrict__ Y, int m, int n, int k) {
	typedef TypeInfo<T> TI;
	__shared__ __align__(16) __half As[GB_M][GB_K + GB_PAD];
	__shared__ __align__(16) __half Bs[GB_N][GB_K + GB_PAD];
	GemmSlot slot;
	if (!gemm_slot(W, expert_stride, slot_expert, slot_off, n, GB_M, GB_N, slot)) return; // the whole block
	const int end = slot.end, bm = slot.bm, bn = slot.bn;
	W = slot.W;
	const long long row_bytes = (long long)(k / TI::QK) * TI::BYTES;
	const float *xr[4];
#pragma unroll
	for (int i = 0; i < 4; i++) {
		const int r = bm + (threadIdx.x >> 3) + 16 * i;
		xr[i] = r < end ? X + (long long)(row_idx ? row_idx[r] : r) * k : nullptr;
	}
	const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
	const int wm = warp >> 1, wn = warp & 1;
	const int g = lane >> 2, t = lane & 3;
	float acc[2][4][4];
#pragma unroll
	for (int i = 0; i < 2; i++)
#pragma unroll
		for (int j = 0; j < 4; j++)
#pragma unroll
			for (int q = 0; q < 4; q++) acc[i][j][q] = 0.f;
	StageQ sw;
	Stage32 sx;
	load_tile_q<T>(sw, W, row_bytes, m, k, bn, 0);
	load_tile_x_rows(sx, xr, k, 0);
	for (int k0 = 0; k0 < k; k0 += GB_K) {
		store_tile_q(sw, Bs);
		store_tile_f32(sx, As);
		__syncthreads();
		if (k0 + GB_K < k) {
			load_tile_q<T>(sw, W, row_bytes, m, k, bn, k0 + GB_K);
			load_tile_x_rows(sx, xr, k, k0 + GB_K);
		}
#pragma unroll
		for (int kk = 0; kk < GB_K; kk += 16) {
			uint32_t a[2][4], b[4][2];
#pragma unroll
			for (int i = 0; i < 2; i++) {
				const int r = wm * 32 + i * 16 + g;
				a[i][0] = *(const uint32_t *)&As[r][kk + 2 * t];
				a[i][1] = *(const uint32_t *)&As[r + 8][kk + 2 * t];
				a[i][2] = *(const uint32_t *)&As[r][kk + 2 * t + 8];
				a[i][3] = *(const uint32_t *)&As[r + 8][kk + 2 * t + 8];
			}
#pragma unroll
			for (int j = 0; j < 4; j++) {
				const int c = wn * 32 + j * 8 + g;
				b[j][0] = *(const uint32_t *)&Bs[c][kk + 2 * t];
				b[j][1] = *(const uint32_t *)&Bs[c][kk + 2 * t + 8];
			}
#pragma unroll
			for (int i = 0; i < 2; i++)
#pragma unroll
				for (int j = 0; j < 4; j++) mma_16816(acc[i][j], a[i][0], a[i][1], a[i][2], a[i][3], b[j][0], b[j][1]);
		}
		__syncthreads();
	}
#pragma unroll
	for (int i = 0; i < 2; i++)
#pragma unroll
		for (int j = 0; j < 4; j++) {
			const int r = bm + wm * 32 + i * 16 + g;
			const int c = bn + wn * 32 + j * 8 + 2 * t;
#pragma unroll
			for (int h = 0; h < 2; h++) {
				const int rr = r + 8 * h;
				if (rr >= end) continue;
				if (c < m) Y[(long long)rr * m + c] = acc[i][j][2 * h];
				if (c + 1 < m) Y[(long long)rr * m + c + 1] = acc[i][j][2 * h + 1];
			}
		}
}

#define GEMM_Q_KERNEL(name, t)                                                                                   \
	extern "C" __global__ void __launch_bounds__(128) gemm_q_##name(const uint8_t *W, long long expert_stride,   \
		const int *slot_expert, const float *X, const int *row_idx, const int *slot_off, float *Y, int m, int n, \
		int k) {                                                                                                 \
		gemm_q_body<t>(W, expert_stride, slot_expert, X, row_idx, slot_off, Y, m, n, k);                         \
	}
STRATA_ALL_TYPES(GEMM_Q_KERNEL)
#undef GEMM_Q_KERNEL
