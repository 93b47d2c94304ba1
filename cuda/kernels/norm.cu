// norm.cu: RMSNorm over rows of dim values, y = x / sqrt(mean(x^2) + eps) * w.
// Per-head norm (Qwen3's q/k norm) is the same kernel with dim = head size and one row
// per head. w may be null (no weight). y may alias x. One block of 256 threads per row.
#include "common.cuh"

extern "C" __global__ void __launch_bounds__(256) rms_norm(const float *x, const float *w, float *y, int dim, float eps) {
	__shared__ float part[8];
	const long long row = blockIdx.x;
	const float *xr = x + row * dim;
	float *yr = y + row * dim;
	float ss = 0.f;
	for (int i = threadIdx.x; i < dim; i += blockDim.x) ss += xr[i] * xr[i];
	ss = warp_sum(ss);
	if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = ss;
	__syncthreads();
	if (threadIdx.x < 32) {
		float v = threadIdx.x < (blockDim.x >> 5) ? part[threadIdx.x] : 0.f;
		v = warp_sum(v);
		if (threadIdx.x == 0) part[0] = v;
	}
	__syncthreads();
	const float scale = rsqrtf(part[0] / (float)dim + eps);
	for (int i = threadIdx.x; i < dim; i += blockDim.x) yr[i] = xr[i] * scale * (w ? w[i] : 1.f);
}
