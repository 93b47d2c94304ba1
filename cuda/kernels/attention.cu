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
//
// The _int8 kernels read an int8 cache in place: values int8 [slot][kv_head][head_dim] and a
// float32 scale per block of each head's row, [slot][kv_head][head_dim / block], block being
// 32 (the whole row when head_dim is not a multiple of 32): engine/kv's layout, so both
// backends hold the same numbers. A key's dot product sums each block in float32 and then
// multiplies by its scale; a value row's scale joins the softmax weight.
#include "common.cuh"
#include "q8.cuh"

#define ATT_WARPS 4
// The decode kernels' value loop keeps DEC_V_UNROLL x 4 rows' loads in flight a lane; a build
// can try 4 (more registers) with -DDEC_V_UNROLL=4.
#ifndef DEC_V_UNROLL
#define DEC_V_UNROLL 2
#endif

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

// Values per scale in an int8 cache row of HD values (engine/kv.BlockSize).
template <int HD> struct I8Row {
	static constexpr int B = HD % 32 == 0 ? 32 : HD;
	static constexpr int NB = HD / B;
};

// The 4 int8 values of w as exact floats: each biased byte (x + 128) becomes the low byte
// of 2^23's mantissa, and 2^23 + 128 is subtracted (a byte permute and an add per value,
// where the converting instruction runs at a quarter of the FMA rate).
static __device__ __forceinline__ void i8x4_to_f32(uint32_t w, float f[4]) {
	const uint32_t u = w ^ 0x80808080u;
#pragma unroll
	for (int i = 0; i < 4; i++) f[i] = __uint_as_float(__byte_perm(u, 0x4b000000u, 0x7440 + i)) - 8388736.f;
}

// q.k for one int8 key row k with its scales ks: each block summed, then scaled.
template <int HD>
static __device__ __forceinline__ float att_dot_i8(const int8_t *k, const float *ks, const float *qs) {
	constexpr int B = I8Row<HD>::B;
	float d = 0.f;
#pragma unroll
	for (int b = 0; b < HD; b += B) {
		float db = 0.f;
#pragma unroll
		for (int i = b; i < b + B; i += 16) {
			const uint4 u = *(const uint4 *)(k + i);
			const uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
			for (int j = 0; j < 4; j++) {
				float f[4];
				i8x4_to_f32(w[j], f);
				db += f[0] * qs[i + 4 * j] + f[1] * qs[i + 4 * j + 1] + f[2] * qs[i + 4 * j + 2] + f[3] * qs[i + 4 * j + 3];
			}
		}
		d += db * ks[b / B];
	}
	return d;
}

// acc += p * v for this lane's values of one int8 value row v with its scales vs.
template <int HD>
static __device__ __forceinline__ void att_accum_v_i8(AttState<HD> &st, float p, const int8_t *v, const float *vs) {
	constexpr int DPL = AttState<HD>::DPL, B = I8Row<HD>::B;
	const int e0 = (threadIdx.x & 31) * DPL;
	if constexpr (DPL * 32 == HD && (DPL == 4 || DPL == 8)) {
		// the lane's values are in one block: one scale, one 4- or 8-byte load
		const float ps = p * vs[e0 / B];
		uint32_t w[DPL / 4];
		if constexpr (DPL == 4) {
			w[0] = *(const uint32_t *)(v + e0);
		} else {
			const uint2 u = *(const uint2 *)(v + e0);
			w[0] = u.x;
			w[1] = u.y;
		}
#pragma unroll
		for (int i = 0; i < DPL / 4; i++) {
			float f[4];
			i8x4_to_f32(w[i], f);
#pragma unroll
			for (int j = 0; j < 4; j++) st.acc[4 * i + j] += ps * f[j];
		}
	} else if constexpr (DPL * 32 == HD && 32 % DPL == 0) {
		const float ps = p * vs[e0 / B];
#pragma unroll
		for (int i = 0; i < DPL; i++) st.acc[i] += ps * (float)v[e0 + i];
	} else {
		// values that may straddle blocks (3, 5, 6 or 7 a lane) or a head narrower than the lanes
#pragma unroll
		for (int i = 0; i < DPL; i++)
			if (e0 + i < HD) st.acc[i] += p * vs[(e0 + i) / B] * (float)v[e0 + i];
	}
}

// Rows of an int8 cache (or of a tile of one) as attention reads them: score(r, qs) is q.k
// of key row r, accum(st, p, r) adds p times value row r to the lane's values.
template <int S, int SS> struct I8Rows { // S bytes (SS scales) from one row to the next
	const int8_t *k, *v;
	const float *ks, *vs;
	template <int HD> __device__ __forceinline__ float score(long long r, const float *qs) const {
		return att_dot_i8<HD>(k + r * S, ks + r * SS, qs);
	}
	template <int HD> __device__ __forceinline__ void accum(AttState<HD> &st, float p, long long r) const {
		att_accum_v_i8<HD>(st, p, v + r * S, vs + r * SS);
	}
};

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

// att_chunk over Rows: the key and value of position base+j are row row(j) of rows.
template <int HD, typename Rows, typename RowOf>
static __device__ __forceinline__ void att_chunk_rows(AttState<HD> &st, const float *qs, int base, int first, int last, const Rows &rows, RowOf row) {
	constexpr int DPL = AttState<HD>::DPL;
	const int lane = threadIdx.x & 31;
	const int p = base + lane;
	const bool in = p >= first && p <= last;
	float s = -INFINITY;
	if (in) s = rows.template score<HD>(row(lane), qs);
	const float m_new = fmaxf(st.m, warp_max(s));
	if (m_new == -INFINITY) return; // nothing attended yet (a chunk wholly before first)
	const float corr = expf(st.m - m_new);
	const float pe = in ? expf(s - m_new) : 0.f;
	st.l = st.l * corr + warp_sum(pe);
	st.m = m_new;
#pragma unroll
	for (int i = 0; i < DPL; i++) st.acc[i] *= corr;
	const int j0 = max(0, first - base), n = min(32, last - base + 1);
	if (j0 == 0 && n == 32) {
		// unrolled so that many V loads are in flight at once
#pragma unroll 8
		for (int j = 0; j < 32; j++) rows.template accum<HD>(st, __shfl_sync(0xffffffffu, pe, j), row(j));
	} else {
		for (int j = j0; j < n; j++) rows.template accum<HD>(st, __shfl_sync(0xffffffffu, pe, j), row(j));
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

// Decode (flash-decoding): one query token. The grid is fixed when a graph is captured, and
// the position comes from device memory, so each block works out its own span: block
// (x, sp) takes kv head x / ngrp, query heads of its GQA group (at most DEC_GMAX of them:
// the group's slice x % ngrp) and the sp-th span of dec_span's split of first..pos[0]. The
// block reads each K and V row of its span once, from global memory into registers, and
// uses it for every one of its query heads. Its 4 warps take 32-position chunks in turn
// (lane i scores position base+i for every head; then each lane accumulates its
// ceil(head_dim/32) output values of every head), and merge their states in shared memory.
// With one span the block writes out; otherwise its state (max, sum, acc[hd]) per head
// goes to part for attention_merge, which merges the spans dec_span says are used.
// Scores are kept in log2 units (q is scaled by log2 e) so that exp2f is one instruction.
#define DEC_WARPS 4
#define DEC_GMAX 8
#define DEC_CHUNK (32 * DEC_WARPS) // a span is a multiple of this: one chunk per warp
#define DEC_LOG2E 1.4426950408889634f

// The split of first..last into n_split spans: lo is the first attended position, span
// the positions each span takes (a multiple of chunk, the kernel's unit: DEC_CHUNK here,
// attention_decode_mma's tile), used how many spans hold any.
struct DecSpan {
	int lo, span, used;
};
static __device__ __forceinline__ DecSpan dec_span(int last, int window, int n_split, int chunk) {
	DecSpan d;
	d.lo = window > 0 ? max(0, last - window + 1) : 0;
	const int len = last - d.lo + 1;
	const int per = (len + n_split - 1) / n_split;
	d.span = (per + chunk - 1) / chunk * chunk;
	d.used = (len + d.span - 1) / d.span;
	return d;
}

// An f16 cache as decode reads it: row r (= slot * n_kv + kv head) holds HD halves.
template <int HD> struct DecF16 {
	static constexpr int DPL = (HD + 31) / 32;
	const __half *k, *v;
	// s[g] = q_g . k_r for g < gn; q is qs[g][0..HD).
	__device__ __forceinline__ void score(long long r, const float (*qs)[HD], int gn, float s[DEC_GMAX]) const {
		const __half *kr = k + r * HD;
		constexpr int NV = HD / 8, BATCH = NV < 8 ? NV : 8; // 16-byte loads per row, in flight at once
#pragma unroll
		for (int g = 0; g < DEC_GMAX; g++) s[g] = 0.f;
#pragma unroll
		for (int b0 = 0; b0 < NV; b0 += BATCH) {
			uint4 u[BATCH];
#pragma unroll
			for (int b = 0; b < BATCH; b++)
				if (b0 + b < NV) u[b] = *(const uint4 *)(kr + 8 * (b0 + b));
#pragma unroll
			for (int b = 0; b < BATCH; b++) {
				if (b0 + b >= NV) continue;
				const int i = 8 * (b0 + b);
				const uint32_t w[4] = {u[b].x, u[b].y, u[b].z, u[b].w};
				float f[8];
#pragma unroll
				for (int j = 0; j < 4; j++) {
					const float2 t = __half22float2(*(const __half2 *)&w[j]);
					f[2 * j] = t.x;
					f[2 * j + 1] = t.y;
				}
#pragma unroll
				for (int g = 0; g < DEC_GMAX; g++) {
					if (g >= gn) break;
					const float4 a = *(const float4 *)&qs[g][i], c = *(const float4 *)&qs[g][i + 4];
					s[g] += f[0] * a.x + f[1] * a.y + f[2] * a.z + f[3] * a.w + f[4] * c.x + f[5] * c.y + f[6] * c.z + f[7] * c.w;
				}
			}
		}
	}
	// f = this lane's DPL values of value row r (0 past HD).
	__device__ __forceinline__ void vals(long long r, float f[DPL]) const {
		const int e0 = (threadIdx.x & 31) * DPL;
		const __half *vr = v + r * HD + e0;
		if constexpr (DPL * 32 == HD && (DPL == 2 || DPL == 4 || DPL == 8)) {
			uint32_t w[DPL / 2];
			if constexpr (DPL == 2) {
				w[0] = *(const uint32_t *)vr;
			} else if constexpr (DPL == 4) {
				const uint2 t = *(const uint2 *)vr;
				w[0] = t.x;
				w[1] = t.y;
			} else {
				const uint4 t = *(const uint4 *)vr;
				w[0] = t.x;
				w[1] = t.y;
				w[2] = t.z;
				w[3] = t.w;
			}
#pragma unroll
			for (int i = 0; i < DPL / 2; i++) {
				const float2 t = __half22float2(*(const __half2 *)&w[i]);
				f[2 * i] = t.x;
				f[2 * i + 1] = t.y;
			}
		} else {
#pragma unroll
			for (int i = 0; i < DPL; i++) f[i] = e0 + i < HD ? __half2float(vr[i]) : 0.f;
		}
	}
};

// An int8 cache as decode reads it: row r holds HD int8 values and NB float scales.
template <int HD> struct DecI8 {
	static constexpr int DPL = (HD + 31) / 32, B = I8Row<HD>::B, NB = I8Row<HD>::NB;
	const int8_t *k, *v;
	const float *ks, *vs;
	__device__ __forceinline__ void score(long long r, const float (*qs)[HD], int gn, float s[DEC_GMAX]) const {
		const int8_t *kr = k + r * HD;
		const float *sr = ks + r * NB;
#pragma unroll
		for (int g = 0; g < DEC_GMAX; g++) s[g] = 0.f;
#pragma unroll
		for (int b = 0; b < HD; b += B) {
			constexpr int NV = B / 16;
			uint4 u[NV];
#pragma unroll
			for (int i = 0; i < NV; i++) u[i] = *(const uint4 *)(kr + b + 16 * i);
			const float sc = sr[b / B];
			float db[DEC_GMAX];
#pragma unroll
			for (int g = 0; g < DEC_GMAX; g++) db[g] = 0.f;
#pragma unroll
			for (int i = 0; i < NV; i++) {
				const uint32_t w[4] = {u[i].x, u[i].y, u[i].z, u[i].w};
#pragma unroll
				for (int j = 0; j < 4; j++) {
					float f[4];
					i8x4_to_f32(w[j], f);
					const int e = b + 16 * i + 4 * j;
#pragma unroll
					for (int g = 0; g < DEC_GMAX; g++) {
						if (g >= gn) break;
						const float4 a = *(const float4 *)&qs[g][e];
						db[g] += f[0] * a.x + f[1] * a.y + f[2] * a.z + f[3] * a.w;
					}
				}
			}
#pragma unroll
			for (int g = 0; g < DEC_GMAX; g++) s[g] += db[g] * sc;
		}
	}
	__device__ __forceinline__ void vals(long long r, float f[DPL]) const {
		const int e0 = (threadIdx.x & 31) * DPL;
		const int8_t *vr = v + r * HD + e0;
		const float *sr = vs + r * NB;
		if constexpr (DPL * 32 == HD && (DPL == 4 || DPL == 8)) {
			// the lane's values are in one block: one scale, one 4- or 8-byte load
			const float sc = sr[e0 / B];
			uint32_t w[DPL / 4];
			if constexpr (DPL == 4) {
				w[0] = *(const uint32_t *)vr;
			} else {
				const uint2 t = *(const uint2 *)vr;
				w[0] = t.x;
				w[1] = t.y;
			}
#pragma unroll
			for (int i = 0; i < DPL / 4; i++) {
				float t[4];
				i8x4_to_f32(w[i], t);
#pragma unroll
				for (int j = 0; j < 4; j++) f[4 * i + j] = sc * t[j];
			}
		} else {
#pragma unroll
			for (int i = 0; i < DPL; i++) f[i] = e0 + i < HD ? sr[(e0 + i) / B] * (float)vr[i] : 0.f;
		}
	}
};

template <int HD, typename Rows>
static __device__ __forceinline__ void att_decode_body(const float *q, const Rows rows, float *out, const int *pos, int n_head,
	int n_kv, float scale, float *part, const float *sinks, int window, int ring) {
	constexpr int DPL = (HD + 31) / 32;
	__shared__ __align__(16) float qs[DEC_GMAX][HD];
	__shared__ __align__(16) float ps[DEC_WARPS][DEC_GMAX][32];
	__shared__ float osum[DEC_GMAX][DPL * 32];
	__shared__ float wm[DEC_WARPS][DEC_GMAX], wl[DEC_WARPS][DEC_GMAX];
	const int G = n_head / n_kv, ngrp = (G + DEC_GMAX - 1) / DEC_GMAX, hpb = (G + ngrp - 1) / ngrp;
	const int kvh = blockIdx.x / ngrp, gi = blockIdx.x % ngrp;
	const int h0 = kvh * G + gi * hpb, gn = min(hpb, G - gi * hpb);
	const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
	const int last = pos[0], n_split = gridDim.y, sp = blockIdx.y;
	const DecSpan d = dec_span(last, window, n_split, DEC_CHUNK);
	if (sp >= d.used || gn <= 0) return; // the whole block: no barrier is skipped
	const int first = d.lo + sp * d.span, end = min(first + d.span, last + 1) - 1;
	const float qscale = scale * DEC_LOG2E;
	for (int i = threadIdx.x; i < gn * HD; i += blockDim.x) qs[i / HD][i % HD] = q[(long long)h0 * HD + i] * qscale;
	for (int i = threadIdx.x; i < DEC_GMAX * DPL * 32; i += blockDim.x) (&osum[0][0])[i] = 0.f;
	__syncthreads();
	float m[DEC_GMAX], l[DEC_GMAX], acc[DEC_GMAX][DPL];
#pragma unroll
	for (int g = 0; g < DEC_GMAX; g++) {
		m[g] = -INFINITY;
		l[g] = 0.f;
#pragma unroll
		for (int i = 0; i < DPL; i++) acc[g][i] = 0.f;
	}
	for (int base = first + warp * 32; base <= end; base += DEC_WARPS * 32) {
		// scores: lane i takes position base+i (lane 0's is always attended)
		const int p = base + lane;
		const bool in = p <= end;
		float s[DEC_GMAX];
		rows.score(in ? att_slot(p, ring) * n_kv + kvh : 0, qs, gn, s);
#pragma unroll
		for (int g = 0; g < DEC_GMAX; g++) {
			if (g >= gn) break;
			const float sg = in ? s[g] : -INFINITY;
			const float mn = fmaxf(m[g], warp_max(sg));
			const float c = exp2f(m[g] - mn);
			const float pe = in ? exp2f(sg - mn) : 0.f;
			l[g] = l[g] * c + pe; // each lane's own share, summed at the end
			m[g] = mn;
#pragma unroll
			for (int i = 0; i < DPL; i++) acc[g][i] *= c;
			ps[warp][g][lane] = pe;
		}
		__syncwarp();
		// values: every lane walks the chunk's rows, its DPL values of each, four rows' loads
		// in flight at a time. A chunk cut short (the span's last) repeats its last row past
		// n: those positions' weights in ps are 0 and the row's values are finite, so they add
		// nothing, and the loads stay batched (one row at a time, each load waiting for the
		// last, made the last chunk the slowest part of the kernel).
		const int n = min(32, end - base + 1);
		const bool straight = ring == 0 || base % ring + 32 <= ring; // 32 consecutive slots
		const long long r0 = att_slot(base, ring) * n_kv + kvh;
		constexpr int V_UNROLL = DEC_V_UNROLL;
#pragma unroll V_UNROLL
		for (int j0 = 0; j0 < 32; j0 += 4) {
			if (j0 >= n) break;
			float v[4][DPL];
#pragma unroll
			for (int j = 0; j < 4; j++) {
				const int jj = min(j0 + j, n - 1);
				rows.vals(straight ? r0 + (long long)jj * n_kv : att_slot(base + jj, ring) * n_kv + kvh, v[j]);
			}
#pragma unroll
			for (int g = 0; g < DEC_GMAX; g++) {
				if (g >= gn) break;
				const float4 pg = *(const float4 *)&ps[warp][g][j0];
#pragma unroll
				for (int i = 0; i < DPL; i++) acc[g][i] += pg.x * v[0][i] + pg.y * v[1][i] + pg.z * v[2][i] + pg.w * v[3][i];
			}
		}
		__syncwarp();
	}
	// merge the warps: each scales its acc to the block's max and adds it into osum
#pragma unroll
	for (int g = 0; g < DEC_GMAX; g++) {
		if (g >= gn) break;
		l[g] = warp_sum(l[g]);
		if (lane == 0) {
			wm[warp][g] = m[g];
			wl[warp][g] = l[g];
		}
	}
	__syncthreads();
#pragma unroll
	for (int g = 0; g < DEC_GMAX; g++) {
		if (g >= gn) break;
		if (m[g] == -INFINITY) continue; // this warp had no chunk
		float M = -INFINITY;
		for (int w = 0; w < DEC_WARPS; w++) M = fmaxf(M, wm[w][g]);
		const float c = exp2f(m[g] - M);
#pragma unroll
		for (int i = 0; i < DPL; i++) atomicAdd(&osum[g][lane * DPL + i], acc[g][i] * c);
	}
	__syncthreads();
	for (int idx = threadIdx.x; idx < gn * HD; idx += blockDim.x) {
		const int g = idx / HD, i = idx % HD, h = h0 + g;
		float M = -INFINITY, L = 0.f;
		for (int w = 0; w < DEC_WARPS; w++) M = fmaxf(M, wm[w][g]);
		for (int w = 0; w < DEC_WARPS; w++)
			if (wm[w][g] != -INFINITY) L += wl[w][g] * exp2f(wm[w][g] - M);
		if (n_split == 1) {
			float Mo = M, es = 0.f;
			if (sinks != nullptr) {
				const float sk = sinks[h] * DEC_LOG2E;
				Mo = fmaxf(M, sk);
				es = exp2f(sk - Mo);
			}
			const float c = exp2f(M - Mo);
			out[(long long)h * HD + i] = osum[g][i] * c / (L * c + es);
		} else {
			float *pp = part + ((long long)h * n_split + sp) * (HD + 2);
			if (i == 0) {
				pp[0] = M;
				pp[1] = L;
			}
			pp[2 + i] = osum[g][i];
		}
	}
}

// One kernel per head size and cache type: each has its own static shared memory.
#define ATT_DECODE(hd)                                                                                        \
	extern "C" __global__ void __launch_bounds__(DEC_WARPS * 32) attention_decode_##hd(const float *q,        \
		const __half *kc, const __half *vc, float *out, const int *pos, int n_head, int n_kv, float scale,   \
		float *part, const float *sinks, int window, int ring) {                                              \
		att_decode_body<hd>(q, DecF16<hd>{kc, vc}, out, pos, n_head, n_kv, scale, part, sinks, window, ring);  \
	}                                                                                                         \
	extern "C" __global__ void __launch_bounds__(DEC_WARPS * 32) attention_decode_int8_##hd(const float *q,   \
		const int8_t *kc, const float *ks, const int8_t *vc, const float *vs, float *out, const int *pos,     \
		int n_head, int n_kv, float scale, float *part, const float *sinks, int window, int ring) {           \
		att_decode_body<hd>(q, DecI8<hd>{kc, vc, ks, vs}, out, pos, n_head, n_kv, scale, part, sinks, window, ring); \
	}
#define ATT_SIZES(X) X(16) X(32) X(48) X(64) X(80) X(96) X(112) X(128) X(144) X(160) X(176) X(192) X(208) X(224) X(240) X(256)
ATT_SIZES(ATT_DECODE)
#undef ATT_DECODE

// attention_merge combines the spans of each query head that dec_span (with the decode kernel's chunk) says hold positions
// (block h, hd threads; at most DEC_MAX_SPLITS spans), adding head h's sink (sinks may be
// null) to the denominator. The states are in log2 units, as the decode kernels write them.
// With xq (hd a multiple of 32), the output row of cols = heads x hd values also goes out
// quantised as quantize_q8 would (each warp's 32 values one group), for the 8-bit matvec
// that reads it next, whose own quantize_q8 launch is then skipped.
#define DEC_MAX_SPLITS 1024
#define DEC_MERGE_BATCH 8 // spans' values in flight at once in the output loop
extern "C" __global__ void attention_merge(const float *part, float *out, const int *pos, int n_split, int hd, const float *sinks,
	int window, int chunk, int8_t *xq, int cols) {
	grid_dependency_entry();
	__shared__ float wt[DEC_MAX_SPLITS];
	__shared__ float red[32];
	const int h = blockIdx.x;
	const int used = dec_span(pos[0], window, n_split, chunk).used;
	const float *p = part + (long long)h * n_split * (hd + 2);
	float M = -INFINITY;
	for (int s = threadIdx.x; s < used; s += blockDim.x) M = fmaxf(M, p[s * (hd + 2)]);
	M = warp_max(M);
	if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = M;
	__syncthreads();
	M = -INFINITY;
	for (int w = 0; w < (int)(blockDim.x + 31) / 32; w++) M = fmaxf(M, red[w]);
	const float sk = sinks != nullptr ? sinks[h] * DEC_LOG2E : -INFINITY;
	M = fmaxf(M, sk);
	__syncthreads();
	float L = 0.f;
	for (int s = threadIdx.x; s < used; s += blockDim.x) {
		const float w = exp2f(p[s * (hd + 2)] - M);
		wt[s] = w;
		L += w * p[s * (hd + 2) + 1];
	}
	L = warp_sum(L);
	if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = L;
	__syncthreads();
	L = sinks != nullptr ? exp2f(sk - M) : 0.f;
	for (int w = 0; w < (int)(blockDim.x + 31) / 32; w++) L += red[w];
	for (int i = threadIdx.x; i < hd; i += blockDim.x) {
		// the spans' values loaded a batch at a time (one after the other, each load waited
		// for the last), summed in span order as before
		const float *pi = p + 2 + i;
		float o = 0.f;
		int s = 0;
		for (; s + DEC_MERGE_BATCH <= used; s += DEC_MERGE_BATCH) {
			float v[DEC_MERGE_BATCH];
#pragma unroll
			for (int j = 0; j < DEC_MERGE_BATCH; j++) v[j] = pi[(s + j) * (hd + 2)];
#pragma unroll
			for (int j = 0; j < DEC_MERGE_BATCH; j++) o += wt[s + j] * v[j];
		}
		for (; s < used; s++) o += wt[s] * pi[s * (hd + 2)];
		const float y = o / L;
		out[(long long)h * hd + i] = y;
		if (xq != nullptr) { // hd % 32 == 0: the whole warp is here, on one group
			float d;
			const long long c = (long long)h * hd + i;
			xq[c] = (int8_t)q8_warp(y, d);
			if ((threadIdx.x & 31) == 0) ((float *)(xq + cols))[c / 32] = d;
		}
	}
}

// Prefill: a block takes 4 query tokens of one head (a warp each) and streams the K/V
// cache through shared memory 32 positions at a time, each tile shared by the 4 queries.
// Tile<HD> holds one such tile: load(...) fills it (zeros past blast), chunk(...) attends to it.
#define ATT_PAD 8
template <int HD> struct F16Tile {
	static constexpr int W = AttState<HD>::DPL * 32; // a tile row, so that every lane's loads stay inside it
	__half k[32][W + ATT_PAD], v[32][W + ATT_PAD];
	// 32 rows x HD halves of K and of V, 16 bytes per thread per step.
	__device__ __forceinline__ void load(const __half *kc, const __half *vc, int base, int blast, int n_kv, int kvh, int ring) {
		const long long row = (long long)n_kv * HD;
		for (int idx = threadIdx.x; idx < 32 * HD / 8; idx += blockDim.x) {
			const int r = idx / (HD / 8), cofs = (idx % (HD / 8)) * 8;
			uint4 kv = make_uint4(0, 0, 0, 0), vv = make_uint4(0, 0, 0, 0);
			if (base + r <= blast) {
				const long long off = att_slot(base + r, ring) * row + (long long)kvh * HD + cofs;
				kv = *(const uint4 *)(kc + off);
				vv = *(const uint4 *)(vc + off);
			}
			*(uint4 *)&k[r][cofs] = kv;
			*(uint4 *)&v[r][cofs] = vv;
		}
	}
	__device__ __forceinline__ void chunk(AttState<HD> &st, const float *qs, int base, int first, int last) const {
		att_chunk<HD>(st, qs, base, first, last, [&](int j) { return &k[j][0]; }, [&](int j) { return &v[j][0]; });
	}
};
// int8 rows padded by 16 bytes: aligned, and lanes reading their own rows fall in other banks.
template <int HD> struct I8Tile {
	static constexpr int S = HD + 16, NB = I8Row<HD>::NB;
	int8_t k[32][S], v[32][S];
	float ks[32][NB], vs[32][NB];
	__device__ __forceinline__ void load(const int8_t *kc, const float *kcs, const int8_t *vc, const float *vcs, int base, int blast,
		int n_kv, int kvh, int ring) {
		for (int idx = threadIdx.x; idx < 32 * HD / 16; idx += blockDim.x) {
			const int r = idx / (HD / 16), cofs = (idx % (HD / 16)) * 16;
			uint4 kv = make_uint4(0, 0, 0, 0), vv = make_uint4(0, 0, 0, 0);
			if (base + r <= blast) {
				const long long off = (att_slot(base + r, ring) * n_kv + kvh) * HD + cofs;
				kv = *(const uint4 *)(kc + off);
				vv = *(const uint4 *)(vc + off);
			}
			*(uint4 *)&k[r][cofs] = kv;
			*(uint4 *)&v[r][cofs] = vv;
		}
		for (int idx = threadIdx.x; idx < 32 * NB; idx += blockDim.x) {
			const int r = idx / NB, b = idx % NB;
			float a = 0.f, c = 0.f;
			if (base + r <= blast) {
				const long long off = (att_slot(base + r, ring) * n_kv + kvh) * NB + b;
				a = kcs[off];
				c = vcs[off];
			}
			ks[r][b] = a;
			vs[r][b] = c;
		}
	}
	__device__ __forceinline__ void chunk(AttState<HD> &st, const float *qs, int base, int first, int last) const {
		att_chunk_rows<HD>(st, qs, base, first, last, I8Rows<S, NB>{&k[0][0], &v[0][0], &ks[0][0], &vs[0][0]}, [](int j) { return j; });
	}
};

template <int HD, typename Tile, typename Load>
static __device__ __forceinline__ void att_prefill_body(const float *q, Tile &tile, Load load, float *out,
	const int *pos, int n_tok, int n_head, int n_kv, float scale, const float *sinks, int window) {
	constexpr int DPL = AttState<HD>::DPL;
	__shared__ float qs[ATT_WARPS][HD];
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
	AttState<HD> st;
	st.init();
	for (int base = bfirst; base <= blast; base += 32) {
		load(base, blast, kvh);
		__syncthreads();
		if (active && base <= last && base + 31 >= first)
			tile.chunk(st, qs[warp], base, first, last);
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
		__shared__ __align__(16) F16Tile<hd> tile;                                                             \
		att_prefill_body<hd>(q, tile, [&](int base, int blast, int kvh) { tile.load(kc, vc, base, blast, n_kv, kvh, ring); }, \
			out, pos, n_tok, n_head, n_kv, scale, sinks, window);                                              \
	}                                                                                                           \
	extern "C" __global__ void __launch_bounds__(ATT_WARPS * 32) attention_prefill_int8_##hd(const float *q,     \
		const int8_t *kc, const float *ks, const int8_t *vc, const float *vs, float *out, const int *pos,       \
		int n_tok, int n_head, int n_kv, float scale, const float *sinks, int window, int ring) {              \
		__shared__ __align__(16) I8Tile<hd> tile;                                                              \
		att_prefill_body<hd>(q, tile, [&](int base, int blast, int kvh) { tile.load(kc, ks, vc, vs, base, blast, n_kv, kvh, ring); }, \
			out, pos, n_tok, n_head, n_kv, scale, sinks, window);                                              \
	}
ATT_SIZES(ATT_PREFILL)
#undef ATT_PREFILL
#undef ATT_SIZES
