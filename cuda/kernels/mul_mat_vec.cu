// mul_mat_vec.cu: y = W x for decode, W in any block format, x and y float32.
// One block of 128 threads per row; thread i decodes chunks i, i+128, ... (8 values
// each), so a warp reads a contiguous stretch of the row and x with 16-byte loads, and
// a row has 4 warps of loads in flight.
//
// The same kernel serves MoE decode: blockIdx.y picks slot e of the k routed experts,
// W is the tensor holding all experts (expert_stride bytes apart), ids[e] is the expert,
// x advances by x_stride floats per slot (0: all slots share x), y by rows per slot.
// bias (null: none) is added to each row's sum, as a separate bias add would.
#include "common.cuh"

#define MMV_THREADS 128

template <int T>
static __device__ __forceinline__ void mmv_body(const uint8_t *__restrict__ W, long long expert_stride,
	const int *__restrict__ ids, const float *__restrict__ x, long long x_stride, float *__restrict__ y,
	int rows, int cols, const float *__restrict__ bias) {
	typedef TypeInfo<T> TI;
	__shared__ float part[MMV_THREADS / 32];
	const int e = blockIdx.y;
	const int row = blockIdx.x;
	const long long expert = ids ? (long long)ids[e] : (long long)e;
	const long long row_bytes = (long long)(cols / TI::QK) * TI::BYTES;
	const uint8_t *w = W + expert * expert_stride + (long long)row * row_bytes;
	x += (long long)e * x_stride;
	const int nchunks = cols / 8;
	float acc = 0.0f;
#pragma unroll 4
	for (int c = threadIdx.x; c < nchunks; c += MMV_THREADS) {
		float v[8];
		deq8<T>(w + (long long)(c / TI::CPB) * TI::BYTES, c % TI::CPB, v);
		const float4 x0 = *(const float4 *)(x + 8 * c);
		const float4 x1 = *(const float4 *)(x + 8 * c + 4);
		acc += v[0] * x0.x + v[1] * x0.y + v[2] * x0.z + v[3] * x0.w;
		acc += v[4] * x1.x + v[5] * x1.y + v[6] * x1.z + v[7] * x1.w;
	}
	acc = warp_sum(acc);
	if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = acc;
	__syncthreads();
	if (threadIdx.x == 0) {
		float s = 0.f;
#pragma unroll
		for (int i = 0; i < MMV_THREADS / 32; i++) s += part[i];
		y[(long long)e * rows + row] = bias ? s + bias[row] : s;
	}
}

#define MMV_KERNEL(name, t)                                                                          \
	extern "C" __global__ void __launch_bounds__(MMV_THREADS) mul_mat_vec_##name(                 \
		const uint8_t *W, long long expert_stride, const int *ids, const float *x, long long x_stride, \
		float *y, int rows, int cols, const float *bias) {                                           \
		mmv_body<t>(W, expert_stride, ids, x, x_stride, y, rows, cols, bias);                        \
	}
STRATA_ALL_TYPES(MMV_KERNEL)
#undef MMV_KERNEL
