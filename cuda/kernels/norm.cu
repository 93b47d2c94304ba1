// norm.cu: RMSNorm over rows of dim values, y = x / sqrt(mean(x^2) + eps) * w (rms_norm),
// and its decode form rms_norm_q8, which first makes x the residual sum x += add (as
// add_f32, written back) and also writes y quantised to 8 bits (as quantize_q8: 32 values a
// group, d = max|y| / 127) for the dp4a matvecs that read it next. Per-head norm (Qwen3's
// q/k norm) is rms_norm with dim = head size and one row per head. w may be null (no
// weight); y may alias x (not with add). One block per row.
//
// A row takes one of three forms, chosen by dim and the block alone, so that rms_norm and
// rms_norm_q8 sum a row in the same order and give the same y bit for bit:
//   - short rows (dim <= blockDim.x, the per-head norms): one value per thread, as
//     qk_norm_rope sums them;
//   - vector rows (dim a multiple of 4, up to 4 * NORM_V4 * blockDim.x: every model's hidden
//     size): thread t holds float4s t, t + blockDim.x, ... in registers. Everything it reads
//     (x, the residual, w) is loaded before anything is stored, so the loads are in flight
//     together and the row costs one trip to memory; storing x between loads, as a loop over
//     the row does, makes every load wait for the last store (x and add may alias) and a
//     2048 row took 8 serial trips. A warp's 8-lane groups hold 32 consecutive values: one
//     8-bit group;
//   - other rows (rms_norm only): a strided loop, reading x twice.
// The block's sum: each warp's shuffle sum, then every warp sums the partials in the same
// order (one barrier, no broadcast through shared memory).
#include "common.cuh"
#include "q8.cuh"

#define NORM_V4 8 // float4s per thread in a vector row: 8192 values with 256 threads

// norm_block_sum is the sum of v over the block, in every thread; part holds 32 floats and
// is free again after the next barrier.
static __device__ __forceinline__ float norm_block_sum(float v, float *part) {
	v = warp_sum(v);
	if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = v;
	__syncthreads();
	const int lane = threadIdx.x & 31;
	return warp_sum(lane < (blockDim.x >> 5) ? part[lane] : 0.f);
}

static __device__ __forceinline__ bool norm_vector_row(int dim) {
	return dim > (int)blockDim.x && (dim & 3) == 0 && dim <= 4 * NORM_V4 * (int)blockDim.x;
}

static __device__ __forceinline__ float4 norm_ld4(const float *p, bool aligned) {
	if (aligned) return *(const float4 *)p;
	return make_float4(p[0], p[1], p[2], p[3]);
}

static __device__ __forceinline__ void norm_st4(float *p, float4 v, bool aligned) {
	if (aligned) {
		*(float4 *)p = v;
		return;
	}
	p[0] = v.x;
	p[1] = v.y;
	p[2] = v.z;
	p[3] = v.w;
}

// norm_row_vec is a vector row. qr is the row's 8-bit copy (Q8 only, 4-byte aligned, as
// quantize_q8's rows are): dim int8 values, then dim / 32 float scales.
template <bool Q8>
static __device__ __forceinline__ void norm_row_vec(float *xr, const float *ar, const float *w, float *yr, int8_t *qr, int dim, float eps, float *part) {
	const int n4 = dim >> 2, t = threadIdx.x, nb = blockDim.x;
	const bool al = (((uintptr_t)xr | (uintptr_t)ar | (uintptr_t)w | (uintptr_t)yr) & 15) == 0;
	float4 v[NORM_V4], a[NORM_V4], g[NORM_V4];
#pragma unroll
	for (int k = 0; k < NORM_V4; k++) {
		const int i = t + k * nb;
		v[k] = a[k] = make_float4(0.f, 0.f, 0.f, 0.f);
		g[k] = make_float4(1.f, 1.f, 1.f, 1.f);
		if (i < n4) {
			v[k] = norm_ld4(xr + 4 * i, al);
			if (ar) a[k] = norm_ld4(ar + 4 * i, al);
			if (w) g[k] = norm_ld4(w + 4 * i, al);
		}
	}
	float ss = 0.f;
#pragma unroll
	for (int k = 0; k < NORM_V4; k++) {
		const int i = t + k * nb;
		if (i < n4) {
			if (ar) {
				v[k] = make_float4(v[k].x + a[k].x, v[k].y + a[k].y, v[k].z + a[k].z, v[k].w + a[k].w);
				norm_st4(xr + 4 * i, v[k], al);
			}
			ss += v[k].x * v[k].x;
			ss += v[k].y * v[k].y;
			ss += v[k].z * v[k].z;
			ss += v[k].w * v[k].w;
		}
	}
	const float scale = rsqrtf(norm_block_sum(ss, part) / (float)dim + eps);
#pragma unroll
	for (int k = 0; k < NORM_V4; k++) {
		const int i = t + k * nb;
		if (k * nb >= n4) break; // the whole block is past the row
		float4 y = make_float4(v[k].x * scale * g[k].x, v[k].y * scale * g[k].y, v[k].z * scale * g[k].z, v[k].w * scale * g[k].w);
		if (i < n4) norm_st4(yr + 4 * i, y, al);
		if (Q8) {
			// 8 lanes hold a group; a group is wholly in the row or past it (dim % 32 == 0).
			float m = fmaxf(fmaxf(fabsf(y.x), fabsf(y.y)), fmaxf(fabsf(y.z), fabsf(y.w)));
#pragma unroll
			for (int o = 1; o < 8; o <<= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
			const float d = q8_scale(m);
			if (i < n4) {
				const int q0 = q8_value(y.x, d), q1 = q8_value(y.y, d), q2 = q8_value(y.z, d), q3 = q8_value(y.w, d);
				*(uint32_t *)(qr + 4 * i) = (uint32_t)(q0 & 0xFF) | ((uint32_t)(q1 & 0xFF) << 8) | ((uint32_t)(q2 & 0xFF) << 16) | ((uint32_t)(q3 & 0xFF) << 24);
				if ((i & 7) == 0) ((float *)(qr + dim))[i >> 3] = d;
			}
		}
	}
}

// norm_row_short is a short row: value t in thread t.
template <bool Q8>
static __device__ __forceinline__ void norm_row_short(float *xr, const float *ar, const float *w, float *yr, int8_t *qr, int dim, float eps, float *part) {
	const int i = threadIdx.x;
	const bool in = i < dim;
	float v = in ? xr[i] : 0.f;
	const float a = ar && in ? ar[i] : 0.f;
	const float g = w && in ? w[i] : 1.f;
	if (ar && in) {
		v = v + a;
		xr[i] = v;
	}
	float ss = 0.f;
	if (in) ss += v * v;
	const float scale = rsqrtf(norm_block_sum(ss, part) / (float)dim + eps);
	const float y = v * scale * g;
	if (in) yr[i] = y;
	if (Q8 && i - (i & 31) < dim) { // a warp is one group (dim % 32 == 0)
		float d;
		qr[i] = (int8_t)q8_warp(y, d);
		if ((i & 31) == 0) ((float *)(qr + dim))[i >> 5] = d;
	}
}

extern "C" __global__ void __launch_bounds__(256) rms_norm(const float *x, const float *w, float *y, int dim, float eps) {
	__shared__ float part[32];
	const long long row = blockIdx.x;
	float *xr = (float *)x + row * dim; // read only: no residual
	float *yr = y + row * dim;
	if (dim <= (int)blockDim.x) {
		norm_row_short<false>(xr, nullptr, w, yr, nullptr, dim, eps, part);
		return;
	}
	if (norm_vector_row(dim)) {
		norm_row_vec<false>(xr, nullptr, w, yr, nullptr, dim, eps, part);
		return;
	}
	float ss = 0.f;
	for (int i = threadIdx.x; i < dim; i += blockDim.x) ss += xr[i] * xr[i];
	const float scale = rsqrtf(norm_block_sum(ss, part) / (float)dim + eps);
	for (int i = threadIdx.x; i < dim; i += blockDim.x) yr[i] = xr[i] * scale * (w ? w[i] : 1.f);
}

// rms_norm_q8 takes short and vector rows of whole 32-value groups (RMSNormQ8Fits).
extern "C" __global__ void __launch_bounds__(256) rms_norm_q8(float *x, const float *add, const float *w, float *y, int8_t *yq, int dim, int row_bytes, float eps) {
	grid_dependency_entry();
	__shared__ float part[32];
	const long long row = blockIdx.x;
	float *xr = x + row * dim;
	const float *ar = add ? add + row * dim : nullptr;
	float *yr = y + row * dim;
	int8_t *qr = yq + row * row_bytes;
	if (dim <= (int)blockDim.x)
		norm_row_short<true>(xr, ar, w, yr, qr, dim, eps, part);
	else if (norm_vector_row(dim))
		norm_row_vec<true>(xr, ar, w, yr, qr, dim, eps, part);
}
