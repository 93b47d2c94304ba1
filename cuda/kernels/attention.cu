// attention.cu: causal attention against an f16 KV cache laid out [slot][kv_head][head_dim],
// GQA (query head h reads kv head h / (n_head / n_kv)). q and out are [tokens][n_head][head_dim]
// f32; pos[t] is the position of query t, which attends to positions first..pos[t] (its own
// row must already be in the cache), first being 0, or pos[t]-window+1 with a sliding window.
// Position p lives in slot p, or p % ring on a ring layer (which keeps only its latest ring
// positions). sinks (null: none) holds one logit per query head that joins the softmax's
// denominator only (gpt-oss). Softmax is computed online in float32, 32 positions at a time:
// lane i scores position base+i, then the warp accumulates V with each lane owning
// ceil(head_dim/32) consecutive output values. head_dim is any multiple of 16 up to 256 (one
// kernel each).
#include "common.cuh"

#define ATT_WARPS 4

template <int HD>
struct AttState {
	static constexpr int DPL = (HD + 31) / 32;
	float m, l, acc[DPL];
	__device__ __forceinline__ void init() {
		m = -INFINITY;
		l = 0.f;
#pragma unroll
		for (int i = 0; i < DPL; i++) acc[i] = 0.f;
	}
};

static __device__ __forceinline__ long long att_slot(int p, int ring) { return ring > 0 ? p % ring : p; }

// acc += p * v[0..DPL) of this lane's values (v points at the lane's first one): one 4-, 8-
// or 16-byte load where the lanes tile the head exactly, element loads otherwise.
template <int HD>
static __device__ __forceinline__ void att_accum_v(AttState<HD> &st, float p, const __half *v) {
	constexpr int DPL = AttState<HD>::DPL;
	if constexpr (DPL * 32 == HD && (DPL == 2 || DPL == 4 || DPL == 8)) {
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
	} else {
		const int e0 = (threadIdx.x & 31) * DPL;
#pragma unroll
		for (int i = 0; i < DPL; i++)
			if (e0 + i < HD) st.acc[i] += p * __half2float(v[i]);
	}
}

// One chunk of 32 positions starting at base; positions first..last are attended.
// kp(j) points at the K row of position base+j, vp(j) at its V row.
template <int HD, typename KP, typename VP>
static __device__ __forceinline__ void att_chunk(AttState<HD> &st, const float *qs, int base, int first, int last, KP kp, VP vp) {
	constexpr int DPL = AttState<HD>::DPL;
	const int lane = threadIdx.x & 31;
	const int p = base + lane;
	const bool in = p >= first && p <= last;
	float s = -INFINITY;
	if (in) {
		const __half *k = kp(lane);
		float d = 0.f;
#pragma unroll
		for (int i = 0; i < HD; i += 8) {
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
	if (m_new == -INFINITY) return; // nothing attended yet (a chunk wholly before first)
	const float corr = expf(st.m - m_new);
	const float pe = in ? expf(s - m_new) : 0.f;
	st.l = st.l * corr + warp_sum(pe);
	st.m = m_new;
#pragma unroll
	for (int i = 0; i < DPL; i++) st.acc[i] *= corr;
	const int j0 = max(0, first - base), n = min(32, last - base + 1);
	const int e0 = lane * DPL;
	if (j0 == 0 && n == 32) {
		// unrolled so that many V loads are in flight at once
#pragma unroll 8
		for (int j = 0; j < 32; j++) att_accum_v<HD>(st, __shfl_sync(0xffffffffu, pe, j), vp(j) + e0);
	} else {
		for (int j = j0; j < n; j++) att_accum_v<HD>(st, __shfl_sync(0xffffffffu, pe, j), vp(j) + e0);
	}
}

// The sink's part of the denominator for max M (0 without sinks); M is raised to the sink.
static __device__ __forceinline__ float att_sink(const float *sinks, int h, float &M) {
	if (sinks == nullptr) return 0.f;
	const float sk = sinks[h];
	const float M2 = fmaxf(M, sk);
	const float e = expf(sk - M2);
	M = M2;
	return e;
}

// Decode: one query token. Block (h, sp) takes query head h and the sp-th of gridDim.y
// equal spans of positions first..pos[0] (split-K, so a long context fills the GPU); its 4
// warps split the span and merge their softmax states. With one span the block writes out;
// otherwise it writes its state (m, l, acc[hd]) to part for attention_merge.
template <int HD>
static __device__ __forceinline__ void att_decode_body(const float *q, const __half *kc, const __half *vc, float *out,
	const int *pos, int n_head, int n_kv, float scale, float *part, const float *sinks, int window, int ring) {
	constexpr int DPL = AttState<HD>::DPL;
	__shared__ float qs[HD];
	__shared__ float wm[ATT_WARPS], wl[ATT_WARPS];
	__shared__ float wacc[ATT_WARPS][DPL * 32];
	const int h = blockIdx.x, kvh = h / (n_head / n_kv);
	const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
	const int last = pos[0];
	const int lo = window > 0 ? max(0, last - window + 1) : 0;
	const int n_split = gridDim.y, sp = blockIdx.y;
	const int span = (last - lo + 1 + n_split - 1) / n_split;
	const int first = lo + sp * span, end = min(first + span, last + 1) - 1;
	for (int i = threadIdx.x; i < HD; i += blockDim.x) qs[i] = q[(long long)h * HD + i] * scale;
	__syncthreads();
	const long long row = (long long)n_kv * HD;
	AttState<HD> st;
	st.init();
	for (int base = first + warp * 32; base <= end; base += ATT_WARPS * 32) {
		att_chunk<HD>(st, qs, base, base, end,
			[&](int j) { return kc + att_slot(base + j, ring) * row + (long long)kvh * HD; },
			[&](int j) { return vc + att_slot(base + j, ring) * row + (long long)kvh * HD; });
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
	float *pp = part + ((long long)h * n_split + sp) * (HD + 2);
	if (n_split > 1 && threadIdx.x == 0) {
		pp[0] = M;
		pp[1] = L;
	}
	float Mo = M;
	const float es = n_split == 1 ? att_sink(sinks, h, Mo) : 0.f;
	const float c = M == -INFINITY ? 0.f : expf(M - Mo);
	for (int i = threadIdx.x; i < HD; i += blockDim.x) {
		float o = 0.f;
		for (int w = 0; w < ATT_WARPS; w++)
			if (wm[w] != -INFINITY) o += wacc[w][i] * expf(wm[w] - M);
		if (n_split == 1) out[(long long)h * HD + i] = o * c / (L * c + es);
		else pp[2 + i] = o;
	}
}

// One kernel per head size: each has its own static shared memory.
#define ATT_DECODE(hd)                                                                                        \
	extern "C" __global__ void __launch_bounds__(ATT_WARPS * 32) attention_decode_##hd(const float *q,        \
		const __half *kc, const __half *vc, float *out, const int *pos, int n_head, int n_kv, float scale,   \
		float *part, const float *sinks, int window, int ring) {                                              \
		att_decode_body<hd>(q, kc, vc, out, pos, n_head, n_kv, scale, part, sinks, window, ring);            \
	}
#define ATT_SIZES(X) X(16) X(32) X(48) X(64) X(80) X(96) X(112) X(128) X(144) X(160) X(176) X(192) X(208) X(224) X(240) X(256)
ATT_SIZES(ATT_DECODE)
#undef ATT_DECODE

// attention_merge combines the n_split partial states of each head (block h, hd threads),
// adding head h's sink (sinks may be null) to the denominator.
extern "C" __global__ void attention_merge(const float *part, float *out, int n_split, int hd, const float *sinks) {
	const int h = blockIdx.x;
	const float *p = part + (long long)h * n_split * (hd + 2);
	float M = -INFINITY;
	for (int s = 0; s < n_split; s++) M = fmaxf(M, p[s * (hd + 2)]);
	if (sinks != nullptr) M = fmaxf(M, sinks[h]);
	float L = sinks != nullptr ? expf(sinks[h] - M) : 0.f;
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
template <int HD>
static __device__ __forceinline__ void att_prefill_body(const float *q, const __half *kc, const __half *vc, float *out,
	const int *pos, int n_tok, int n_head, int n_kv, float scale, const float *sinks, int window, int ring) {
	constexpr int DPL = AttState<HD>::DPL;
	constexpr int W = DPL * 32; // a tile row, so that every lane's loads stay inside it
	__shared__ float qs[ATT_WARPS][HD];
	__shared__ __align__(16) __half ks[32][W + ATT_PAD];
	__shared__ __align__(16) __half vs[32][W + ATT_PAD];
	__shared__ int block_first, block_last;
	const int h = blockIdx.x, kvh = h / (n_head / n_kv);
	const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
	const int t = blockIdx.y * ATT_WARPS + warp;
	const bool active = t < n_tok;
	const int last = active ? pos[t] : -1;
	const int first = active && window > 0 ? max(0, last - window + 1) : 0;
	if (threadIdx.x == 0) {
		block_first = 0x7fffffff;
		block_last = -1;
	}
	__syncthreads();
	if (lane == 0 && active) {
		atomicMax(&block_last, last);
		atomicMin(&block_first, first);
	}
	if (active)
		for (int i = lane; i < HD; i += 32) qs[warp][i] = q[((long long)t * n_head + h) * HD + i] * scale;
	__syncthreads();
	const int bfirst = block_first, blast = block_last;
	const long long row = (long long)n_kv * HD;
	AttState<HD> st;
	st.init();
	for (int base = bfirst; base <= blast; base += 32) {
		// 32 rows x HD halves of K and of V, 16 bytes per thread per step.
		for (int idx = threadIdx.x; idx < 32 * HD / 8; idx += blockDim.x) {
			const int r = idx / (HD / 8), cofs = (idx % (HD / 8)) * 8;
			uint4 kv = make_uint4(0, 0, 0, 0), vv = make_uint4(0, 0, 0, 0);
			if (base + r <= blast) {
				const long long off = att_slot(base + r, ring) * row + (long long)kvh * HD + cofs;
				kv = *(const uint4 *)(kc + off);
				vv = *(const uint4 *)(vc + off);
			}
			*(uint4 *)&ks[r][cofs] = kv;
			*(uint4 *)&vs[r][cofs] = vv;
		}
		__syncthreads();
		if (active && base <= last && base + 31 >= first)
			att_chunk<HD>(st, qs[warp], base, first, last, [&](int j) { return &ks[j][0]; }, [&](int j) { return &vs[j][0]; });
		__syncthreads();
	}
	if (active) {
		float M = st.m;
		const float es = att_sink(sinks, h, M);
		const float c = expf(st.m - M);
		const float inv = 1.f / (st.l * c + es);
#pragma unroll
		for (int i = 0; i < DPL; i++)
			if (lane * DPL + i < HD) out[((long long)t * n_head + h) * HD + lane * DPL + i] = st.acc[i] * c * inv;
	}
}

#define ATT_PREFILL(hd)                                                                                          \
	extern "C" __global__ void __launch_bounds__(ATT_WARPS * 32) attention_prefill_##hd(const float *q,          \
		const __half *kc, const __half *vc, float *out, const int *pos, int n_tok, int n_head, int n_kv,       \
		float scale, const float *sinks, int window, int ring) {                                               \
		att_prefill_body<hd>(q, kc, vc, out, pos, n_tok, n_head, n_kv, scale, sinks, window, ring);            \
	}
ATT_SIZES(ATT_PREFILL)
#undef ATT_PREFILL
#undef ATT_SIZES
