// elementwise.cu: SwiGLU (plain and gpt-oss's clamped one), adds and biases, the MoE
// combine, KV-cache writes and f32 -> f16.
#include "common.cuh"

#define GRID_STRIDE(i, n) for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (long long)gridDim.x * blockDim.x)

// y = silu(g) * u. y may alias g or u.
extern "C" __global__ void swiglu(const float *g, const float *u, float *y, long long n) {
	GRID_STRIDE(i, n) {
		const float a = g[i];
		y[i] = a / (1.f + expf(-a)) * u[i];
	}
}

// y = a + b (residual add). y may alias a or b.
extern "C" __global__ void add_f32(const float *a, const float *b, float *y, long long n) {
	grid_dependency_entry();
	GRID_STRIDE(i, n) y[i] = a[i] + b[i];
}

// y += w[w_index] * x, the weight read on the device (a router weight, no host sync).
extern "C" __global__ void scaled_add(float *y, const float *x, const float *w, int w_index, long long n) {
	const float s = w[w_index];
	GRID_STRIDE(i, n) y[i] += s * x[i];
}

// MoE combine for token blockIdx.y: y[t] (+)= sum_e w[t][e] * x[t][e][:], with x [tokens][k][n]
// and w [tokens][k]; accumulate=0 overwrites y.
extern "C" __global__ void moe_combine(const float *x, const float *w, float *y, int n, int k, int accumulate) {
	const long long t = blockIdx.y;
	for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
		float s = accumulate ? y[t * n + i] : 0.f;
		for (int e = 0; e < k; e++) s += w[t * k + e] * x[(t * k + e) * n + i];
		y[t * n + i] = s;
	}
}

// KV cache write: cache row pos[t] (row_elems f16 values; row pos[t] % ring on a ring layer,
// ring > 0) = src row t. Grid.y = tokens.
extern "C" __global__ void kv_write(const float *src, __half *cache, const int *pos, int row_elems, int ring) {
	const long long t = blockIdx.y;
	const long long p = ring > 0 ? pos[t] % ring : pos[t];
	for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < row_elems; i += gridDim.x * blockDim.x)
		cache[p * row_elems + i] = __float2half_rn(src[t * row_elems + i]);
}

// kv_write_int8 stores src [tokens][row_elems] f32 into int8 cache rows pos[t] (pos[t] % ring
// when ring > 0) with a float32 scale per block of `block` values, [slot][row_elems / block],
// exactly as engine/kv quantises: scale = max|x| / 127, value = round(x * (1 / scale)) half
// away from zero, an all-zero block scale 0. One warp per block.
extern "C" __global__ void kv_write_int8(const float *src, int8_t *cache, float *scales, const int *pos, int row_elems, int block, int ring) {
	const long long t = blockIdx.y;
	const long long p = ring > 0 ? pos[t] % ring : pos[t];
	const int nb = row_elems / block;
	const int b = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5), lane = threadIdx.x & 31;
	if (b >= nb) return; // the whole warp
	const float *x = src + t * row_elems + (long long)b * block;
	int8_t *y = cache + p * row_elems + (long long)b * block;
	float amax = 0.f;
	for (int i = lane; i < block; i += 32) amax = fmaxf(amax, fabsf(x[i]));
	amax = warp_max(amax);
	const float scale = amax / 127.f, inv = amax == 0.f ? 0.f : 1.f / scale;
	for (int i = lane; i < block; i += 32) y[i] = (int8_t)fmaxf(-127.f, fminf(127.f, roundf(x[i] * inv)));
	if (lane == 0) scales[p * nb + b] = scale;
}

extern "C" __global__ void f32_to_f16(const float *x, __half *y, long long n) {
	GRID_STRIDE(i, n) y[i] = __float2half_rn(x[i]);
}

// gpt-oss's clamped SwiGLU: g = min(g, limit), u = clamp(u, -limit, limit),
// y = g * sigmoid(alpha * g) * (u + 1). y may alias g or u.
extern "C" __global__ void swiglu_clamped(const float *g, const float *u, float *y, long long n, float limit, float alpha) {
	GRID_STRIDE(i, n) {
		const float a = fminf(g[i], limit);
		const float b = fmaxf(fminf(u[i], limit), -limit);
		y[i] = a / (1.f + expf(-alpha * a)) * (b + 1.f);
	}
}

// x[r][i] += bias[i] over n = rows * cols values.
extern "C" __global__ void add_bias(float *x, const float *bias, int cols, long long n) {
	GRID_STRIDE(i, n) x[i] += bias[i % cols];
}

// Per-expert biases: row r of x [rows][n] (rows = gridDim.y) gets expert ids[r]'s bias,
// bias + ids[r] * stride.
extern "C" __global__ void expert_bias(float *x, const float *bias, const int *ids, int n, long long stride) {
	const long long r = blockIdx.y;
	const float *b = bias + (long long)ids[r] * stride;
	for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) x[r * n + i] += b[i];
}
