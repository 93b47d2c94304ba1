// attention.cu: causal attention against an f16 KV cache laid out [position][kv_head][head_dim],
// GQA (query head h reads kv head h / (n_head / n_kv)). q and out are [tokens][n_head][head_dim]
// f32; pos[t] is the position of query t, which attends to positions 0..pos[t] (its own row
// must already be in the cache). Softmax is computed online in float32, 32 positions at a
// time: lane i scores position base+i, then the warp accumulates V with each lane owning
// head_dim/32 output values. head_dim is 64, 128 or 256 (one kernel each).
#include "common.cuh"

#define ATT_WARPS 4

template <int DPL>
struct AttState {
	float m, l, acc[DPL];
	__device__ __forceinline__ void init() {
		m = -INFINITY;
		l = 0.f;
#pragma unroll
		for (int i = 0; i < DPL; i++) acc[i] = 0.f;
	}
};

// acc += p * v[0..DPL) with one 4-, 8- or 16-byte load.
template <int DPL>
static __device__ __forceinline__ void att_accum_v(AttState<DPL> &st, float p, const __half *v) {
	uint32_t w[DPL / 2];
	if constexpr (DPL == 2) {
		w[0] = *(const uint32_t *)v;
	} else if constexpr (DPL == 4) {
		const uint2 u = *(const uint2 *)v;
		w[0] = u.x;
		w[1] = u.y;
	} else {
#pragma unroll
		for (int i = 0; i < DPL / 8; i++) {
			const uint4 u = ((const uint4 *)v)[i];
			w[4 * i] = u.x;
			w[4 * i + 1] = u.y;
			w[4 * i + 2] = u.z;
			w[4 * i + 3] = u.w;
		}
	}
#pragma unroll
	for (int i = 0; i < DPL / 2; i++) {
		const float2 f = __half22float2(*(const __half2 *)&w[i]);
		st.acc[2 * i] += p * f.x;
		st.acc[2 * i + 1] += p * f.y;
	}
}

// One chunk of 32 positions starting at base (last is the last position attended).
// kp(j) points at the K row of position base+j, vp(j) at its V row.
template <int DPL, typename KP, typename VP>
static __device__ __forceinline__ void att_chunk(AttState<DPL> &st, const float *qs, int base, int last, KP kp, VP vp) {
	const int lane = threadIdx.x & 31, hd = DPL * 32;
	const int p = base + lane;
	float s = -INFINITY;
	if (p <= last) {
		const __half *k = kp(lane);
		float d = 0.f;
#pragma unroll
		for (int i = 0; i < hd; i += 8) {
			const uint4 u = *(const uint4 *)(k + i);
			const uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
			for (int j = 0; j < 4; j++) {
				const float2 f = __half22float2(*(const __half2 *)&w[j]);
				d += f.x * qs[i + 2 * j] + f.y * qs[i + 2 * j + 1];
			}
		}
		s = d;
	}
	const float m_new = fmaxf(st.m, warp_max(s));
	const float corr = expf(st.m - m_new);
	const float pe = p <= last ? expf(s - m_new) : 0.f;
	st.l = st.l * corr + warp_sum(pe);
	st.m = m_new;
#pragma unroll
	for (int i = 0; i < DPL; i++) st.acc[i] *= corr;
	const int n = min(32, last - base + 1);
	const __half *v0 = vp(0) + lane * DPL;
	const long long vstride = vp(1) - vp(0); // elements between consecutive positions' V rows
	if (n == 32) {
		// unrolled so that many V loads are in flight at once
#pragma unroll 8
		for (int j = 0; j < 32; j++) att_accum_v<DPL>(st, __shfl_sync(0xffffffffu, pe, j), v0 + j * vstride);
	} else {
		for (int j = 0; j < n; j++) att_accum_v<DPL>(st, __shfl_sync(0xffffffffu, pe, j), v0 + j * vstride);
	}
}

// Decode: one query token. Block (h, sp) takes query head h and the sp-th of gridDim.y
// equal spans of positions 0..pos[0] (split-K, so a long context fills the GPU); its 4 warps
// split the span and merge their softmax states. With one span the block writes out;
// otherwise it writes its state (m, l, acc[hd]) to part for attention_merge.
template <int DPL>
static __device__ __forceinline__ void att_decode_body(const float *q, const __half *kc, const __half *vc, float *out,
	const int *pos, int n_head, int n_kv, float scale, float *part) {
	constexpr int hd = DPL * 32;
	__shared__ float qs[hd];
	__shared__ float wm[ATT_WARPS], wl[ATT_WARPS];
	__shared__ float wacc[ATT_WARPS][hd];
	const int h = blockIdx.x, kvh = h / (n_head / n_kv);
	const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
	const int last = pos[0];
	const int n_split = gridDim.y, sp = blockIdx.y;
	const int span = (last + 1 + n_split - 1) / n_split;
	const int first = sp * span, end = min(first + span, last + 1) - 1;
	for (int i = threadIdx.x; i < hd; i += blockDim.x) qs[i] = q[(long long)h * hd + i] * scale;
	__syncthreads();
	const long long row = (long long)n_kv * hd;
	AttState<DPL> st;
	st.init();
	for (int base = first + warp * 32; base <= end; base += ATT_WARPS * 32) {
		att_chunk<DPL>(st, qs, base, end,
			[&](int j) { return kc + (long long)(base + j) * row + (long long)kvh * hd; },
			[&](int j) { return vc + (long long)(base + j) * row + (long long)kvh * hd; });
	}
	if (lane == 0) {
		wm[warp] = st.m;
		wl[warp] = st.l;
	}
#pragma unroll
	for (int i = 0; i < DPL; i++) wacc[warp][lane * DPL + i] = st.acc[i];
	__syncthreads();
	float M = -INFINITY;
	for (int w = 0; w < ATT_WARPS; w++) M = fmaxf(M, wm[w]);
	float L = 0.f;
	for (int w = 0; w < ATT_WARPS; w++) L += wm[w] == -INFINITY ? 0.f : wl[w] * expf(wm[w] - M);
	float *pp = part + ((long long)h * n_split + sp) * (hd + 2);
	if (n_split > 1 && threadIdx.x == 0) {
		pp[0] = M;
		pp[1] = L;
	}
	for (int i = threadIdx.x; i < hd; i += blockDim.x) {
		float o = 0.f;
		for (int w = 0; w < ATT_WARPS; w++)
			if (wm[w] != -INFINITY) o += wacc[w][i] * expf(wm[w] - M);
		if (n_split == 1) out[(long long)h * hd + i] = o / L;
		else pp[2 + i] = o;
	}
}

// One kernel per head size: each has its own static shared memory.
#define ATT_DECODE(hd, dpl)                                                                                   \
	extern "C" __global__ void __launch_bounds__(ATT_WARPS * 32) attention_decode_##hd(const float *q,        \
		const __half *kc, const __half *vc, float *out, const int *pos, int n_head, int n_kv, float scale,   \
		float *part) {                                                                                        \
		att_decode_body<dpl>(q, kc, vc, out, pos, n_head, n_kv, scale, part);                                \
	}
ATT_DECODE(64, 2)
ATT_DECODE(128, 4)
ATT_DECODE(256, 8)
#undef ATT_DECODE

// attention_merge combines the n_split partial states of each head (block h, hd threads).
extern "C" __global__ void attention_merge(const float *part, float *out, int n_split, int hd) {
	const int h = blockIdx.x;
	const float *p = part + (long long)h * n_split * (hd + 2);
	float M = -INFINITY;
	for (int s = 0; s < n_split; s++) M = fmaxf(M, p[s * (hd + 2)]);
	float L = 0.f;
	for (int s = 0; s < n_split; s++) {
		const float m = p[s * (hd + 2)];
		if (m != -INFINITY) L += p[s * (hd + 2) + 1] * expf(m - M);
	}
	for (int i = threadIdx.x; i < hd; i += blockDim.x) {
		float o = 0.f;
		for (int s = 0; s < n_split; s++) {
			const float m = p[s * (hd + 2)];
			if (m != -INFINITY) o += p[s * (hd + 2) + 2 + i] * expf(m - M);
		}
		out[(long long)h * hd + i] = o / L;
	}
}

// Prefill: a block takes 4 query tokens of one head (a warp each) and streams the K/V
// cache through shared memory 32 positions at a time, each tile shared by the 4 queries.
#define ATT_PAD 8
template <int DPL>
static __device__ __forceinline__ void att_prefill_body(const float *q, const __half *kc, const __half *vc, float *out,
	const int *pos, int n_tok, int n_head, int n_kv, float scale) {
	constexpr int hd = DPL * 32;
	__shared__ float qs[ATT_WARPS][hd];
	__shared__ __align__(16) __half ks[32][hd + ATT_PAD];
	__shared__ __align__(16) __half vs[32][hd + ATT_PAD];
	__shared__ int block_last;
	const int h = blockIdx.x, kvh = h / (n_head / n_kv);
	const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
	const int t = blockIdx.y * ATT_WARPS + warp;
	const bool active = t < n_tok;
	const int last = active ? pos[t] : -1;
	if (threadIdx.x == 0) block_last = -1;
	__syncthreads();
	if (lane == 0) atomicMax(&block_last, last);
	if (active)
		for (int i = lane; i < hd; i += 32) qs[warp][i] = q[((long long)t * n_head + h) * hd + i] * scale;
	__syncthreads();
	const int blast = block_last;
	const long long row = (long long)n_kv * hd;
	AttState<DPL> st;
	st.init();
	for (int base = 0; base <= blast; base += 32) {
		// 32 rows x hd halves of K and of V, 16 bytes per thread per step.
		for (int idx = threadIdx.x; idx < 32 * hd / 8; idx += blockDim.x) {
			const int r = idx / (hd / 8), cofs = (idx % (hd / 8)) * 8;
			uint4 kv = make_uint4(0, 0, 0, 0), vv = make_uint4(0, 0, 0, 0);
			if (base + r <= blast) {
				const long long off = (long long)(base + r) * row + (long long)kvh * hd + cofs;
				kv = *(const uint4 *)(kc + off);
				vv = *(const uint4 *)(vc + off);
			}
			*(uint4 *)&ks[r][cofs] = kv;
			*(uint4 *)&vs[r][cofs] = vv;
		}
		__syncthreads();
		if (active && base <= last)
			att_chunk<DPL>(st, qs[warp], base, last, [&](int j) { return &ks[j][0]; }, [&](int j) { return &vs[j][0]; });
		__syncthreads();
	}
	if (active) {
		const float inv = 1.f / st.l;
#pragma unroll
		for (int i = 0; i < DPL; i++) out[((long long)t * n_head + h) * hd + lane * DPL + i] = st.acc[i] * inv;
	}
}

#define ATT_PREFILL(hd, dpl)                                                                                     \
	extern "C" __global__ void __launch_bounds__(ATT_WARPS * 32) attention_prefill_##hd(const float *q,          \
		const __half *kc, const __half *vc, float *out, const int *pos, int n_tok, int n_head, int n_kv,       \
		float scale) {                                                                                          \
		att_prefill_body<dpl>(q, kc, vc, out, pos, n_tok, n_head, n_kv, scale);                                 \
	}
ATT_PREFILL(64, 2)
ATT_PREFILL(128, 4)
ATT_PREFILL(256, 8)
#undef ATT_PREFILL
