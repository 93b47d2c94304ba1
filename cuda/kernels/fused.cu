// fused.cu: decode steps fused into one launch each, so a layer's small kernels stop costing
// a launch and a pass over the row apiece (rms_norm_q8, the norm that also quantises, is in
// norm.cu with the norm it must match).
//
// qk_norm_rope: Qwen3's per-head RMSNorm of q and k (as rms_norm with dim = head size) and
// the NeoX rotation that follows (as rope_neox), one block per (token, head) of q then k;
// with a cache, k's heads and v's go to the f16 KV cache at their positions (as kv_write).
#include "common.cuh"

extern "C" __global__ void __launch_bounds__(256) qk_norm_rope(float *q, float *k, const float *v, const float *qw, const float *kw, const int *pos,
	__half *k_cache, __half *v_cache, int ring, int heads, int kv_heads, int head_dim, int rope_dim, float freq_base, float eps) {
	grid_dependency_entry();
	__shared__ float part[8];
	extern __shared__ float hv[]; // the normed head
	const int tok = blockIdx.x, h = blockIdx.y, half_rd = rope_dim / 2;
	const bool isq = h < heads;
	float *xr = isq ? q + ((long long)tok * heads + h) * head_dim : k + ((long long)tok * kv_heads + (h - heads)) * head_dim;
	const float *w = isq ? qw : kw;
	float ss = 0.f;
	for (int i = threadIdx.x; i < head_dim; i += blockDim.x) ss += xr[i] * xr[i];
	ss = warp_sum(ss);
	if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = ss;
	__syncthreads();
	if (threadIdx.x < 32) {
		float s = threadIdx.x < (blockDim.x >> 5) ? part[threadIdx.x] : 0.f;
		s = warp_sum(s);
		if (threadIdx.x == 0) part[0] = s;
	}
	__syncthreads();
	const float scale = rsqrtf(part[0] / (float)head_dim + eps);
	for (int i = threadIdx.x; i < head_dim; i += blockDim.x) hv[i] = xr[i] * scale * (w ? w[i] : 1.f);
	__syncthreads();
	const float p = (float)pos[tok];
	const long long row = (long long)kv_heads * head_dim;
	const long long slot = ring > 0 ? pos[tok] % ring : pos[tok];
	__half *kc = !isq && k_cache ? k_cache + slot * row + (long long)(h - heads) * head_dim : nullptr;
	for (int i = threadIdx.x; i < head_dim; i += blockDim.x) {
		float out = hv[i];
		if (i < rope_dim) {
			const int j = i < half_rd ? i : i - half_rd;
			const float inv_freq = 1.0f / powf(freq_base, (float)(2 * j) / (float)rope_dim);
			float s, c;
			sincosf(p * inv_freq, &s, &c);
			const float a = hv[j], b = hv[j + half_rd];
			out = i < half_rd ? a * c - b * s : a * s + b * c;
		}
		xr[i] = out;
		if (kc) {
			kc[i] = __float2half_rn(out);
			v_cache[slot * row + (long long)(h - heads) * head_dim + i] = __float2half_rn(v[tok * row + (long long)(h - heads) * head_dim + i]);
		}
	}
}
