// dequantize.cu: whole tensors to f16 (for the prefill GEMM) and single rows to f32
// (embedding gather).
#include "common.cuh"

// dst[i] = value i of src, for n values (a whole number of blocks); one thread per chunk of 8.
template <int T>
static __device__ __forceinline__ void dequantize_f16_body(const uint8_t *__restrict__ src, __half *__restrict__ dst, long long n) {
	typedef TypeInfo<T> TI;
	const long long c = (long long)blockIdx.x * blockDim.x + threadIdx.x;
	if (c >= n / 8) return;
	float v[8];
	deq8<T>(src + (c / TI::CPB) * TI::BYTES, (int)(c % TI::CPB), v);
	__half2 h[4];
#pragma unroll
	for (int i = 0; i < 4; i++) h[i] = __floats2half2_rn(v[2 * i], v[2 * i + 1]);
	*(uint4 *)(dst + 8 * c) = *(const uint4 *)h;
}

// out[i][:] = row ids[i] of W (cols values per row), as f32. Grid: (chunk blocks, len(ids)).
template <int T>
static __device__ __forceinline__ void get_rows_body(const uint8_t *__restrict__ W, const int *__restrict__ ids,
	float *__restrict__ out, int cols) {
	typedef TypeInfo<T> TI;
	const int c = blockIdx.x * blockDim.x + threadIdx.x;
	if (c >= cols / 8) return;
	const long long row = ids[blockIdx.y];
	const long long row_bytes = (long long)(cols / TI::QK) * TI::BYTES;
	float v[8];
	deq8<T>(W + row * row_bytes + (long long)(c / TI::CPB) * TI::BYTES, c % TI::CPB, v);
	float4 *o = (float4 *)(out + (long long)blockIdx.y * cols + 8 * c);
	o[0] = make_float4(v[0], v[1], v[2], v[3]);
	o[1] = make_float4(v[4], v[5], v[6], v[7]);
}

#define DEQ_KERNELS(name, t)                                                                              \
	extern "C" __global__ void dequantize_##name##_f16(const uint8_t *src, __half *dst, long long n) {   \
		dequantize_f16_body<t>(src, dst, n);                                                             \
	}                                                                                                     \
	extern "C" __global__ void get_rows_##name(const uint8_t *W, const int *ids, float *out, int cols) { \
		get_rows_body<t>(W, ids, out, cols);                                                             \
	}
STRATA_ALL_TYPES(DEQ_KERNELS)
#undef DEQ_KERNELS
