// rope.cu: NeoX rotary embedding in place. x is [tokens][heads][head_dim]; the first
// rope_dim values of each head rotate in pairs (i, i + rope_dim/2) by pos[token] *
// base^(-2i/rope_dim), computed in float32 the way the reference implementations do.
#include "common.cuh"

extern "C" __global__ void rope_neox(float *x, const int *pos, int heads, int head_dim, int rope_dim, float freq_base) {
	// One block per (token, head), one thread per rotated pair: decode has a single token,
	// so a block per token alone left all but one SM idle.
	const int tok = blockIdx.x, h = blockIdx.y, half_rd = rope_dim / 2;
	const float p = (float)pos[tok];
	float *v = x + ((long long)tok * heads + h) * head_dim;
	for (int i = threadIdx.x; i < half_rd; i += blockDim.x) {
		const float inv_freq = 1.0f / powf(freq_base, (float)(2 * i) / (float)rope_dim);
		float s, c;
		sincosf(p * inv_freq, &s, &c);
		const float a = v[i], b = v[i + half_rd];
		v[i] = a * c - b * s;
		v[i + half_rd] = a * s + b * c;
	}
}

// rope_table: the NeoX rotation by a frequency table (YaRN's, say): pairs (i, i + half) of
// each head turn by pos[token] * inv_freq[i] (the angle in float32, as transformers
// multiplies it; cos and sin in double), both times scale (YaRN's attention factor); values
// past 2*half stay as they are.
extern "C" __global__ void rope_table(float *x, const int *pos, const float *inv_freq, int heads, int head_dim, int half, float scale) {
	const int tok = blockIdx.x, h = blockIdx.y;
	const float p = (float)pos[tok];
	float *v = x + ((long long)tok * heads + h) * head_dim;
	for (int i = threadIdx.x; i < half; i += blockDim.x) {
		const float a = __fmul_rn(p, inv_freq[i]);
		double s, c;
		sincos((double)a, &s, &c);
		const float cf = (float)c * scale, sf = (float)s * scale;
		const float x0 = v[i], x1 = v[i + half];
		v[i] = x0 * cf - x1 * sf;
		v[i + half] = x1 * cf + x0 * sf;
	}
}

// rope_table_store: rope_table of q [tokens][heads][head_dim] and k [tokens][kv_heads][head_dim]
// in one launch, one block per (token, head) of q then k, and k's heads (rotated) and v's
// written to the f16 KV cache rows pos[t] (pos[t] % ring when ring > 0) as kv_write writes
// them: gpt-oss's four launches (q, k, the two cache writes) as one. The same arithmetic as
// rope_table, so the same values.
extern "C" __global__ void rope_table_store(float *q, float *k, const float *v, const int *pos, const float *inv_freq, __half *k_cache, __half *v_cache,
	int ring, int heads, int kv_heads, int head_dim, int half, float scale) {
	const int tok = blockIdx.x, h = blockIdx.y;
	const bool isq = h < heads;
	const int kh = h - heads;
	float *x = isq ? q + ((long long)tok * heads + h) * head_dim : k + ((long long)tok * kv_heads + kh) * head_dim;
	const float p = (float)pos[tok];
	const long long row = (long long)kv_heads * head_dim;
	const long long slot = ring > 0 ? pos[tok] % ring : pos[tok];
	__half *kc = isq ? nullptr : k_cache + slot * row + (long long)kh * head_dim;
	for (int i = threadIdx.x; i < half; i += blockDim.x) {
		const float a = __fmul_rn(p, inv_freq[i]);
		double s, c;
		sincos((double)a, &s, &c);
		const float cf = (float)c * scale, sf = (float)s * scale;
		const float x0 = x[i], x1 = x[i + half];
		const float y0 = x0 * cf - x1 * sf, y1 = x1 * cf + x0 * sf;
		x[i] = y0;
		x[i + half] = y1;
		if (kc) {
			kc[i] = __float2half_rn(y0);
			kc[i + half] = __float2half_rn(y1);
		}
	}
	if (isq) return;
	for (int i = 2 * half + threadIdx.x; i < head_dim; i += blockDim.x) kc[i] = __float2half_rn(x[i]);
	const float *vr = v + (long long)tok * row + (long long)kh * head_dim;
	__half *vc = v_cache + slot * row + (long long)kh * head_dim;
	for (int i = threadIdx.x; i < head_dim; i += blockDim.x) vc[i] = __float2half_rn(vr[i]);
}
