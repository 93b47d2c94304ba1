// attention_decode_mma.cu: decode attention (one query token) on the tensor cores, for head
// sizes that are multiples of 16 up to 128, and 256, over an f16 or int8 cache. It takes the
// grid and partial-state layout of attention.cu's attention_decode (dec_span, attention_merge),
// with spans in units of one 64-position tile, and the tile machinery of attention_prefill.cu
// (fa_scores, fa_pv, fa_tile_step, fa_load_tile; an f16 tile by cp.async, dm_load_tile).
//
// Why: attention_decode gives a lane one position and all of its group's heads, some 4,000
// instructions a 32-position chunk for one warp, at about 10 cycles each; at short contexts
// only ~20 blocks have work, so a layer's attention took ~24 us on the H200 whatever the
// span count. Here the query heads of one GQA group (up to 16) are the 16 rows of an
// m16n8k16 product: S = Q K^T over a 64-position tile that the block stages in shared memory
// (a warp takes 16 of its positions), the softmax runs online in f32, base 2, and O += P V is
// the same product with P rounded to f16, as in the prefill kernel. Rows past the group's
// heads are zero queries whose results are never written. Head size 256 takes the wide
// kernels below (dm_decode_wide_body), which split P V by output columns.
#define DM_WARPS 4
#define DM_KT (16 * DM_WARPS) // positions a tile; DEC_CHUNK (a span's unit) is a multiple of it
#define DM_ROWS 16            // query heads a block: one m16 tile

// DmBlock is a block's share of a decode launch: kv head kvh, its query heads h0..h0+gn-1,
// and positions first..end, the span blockIdx.y of dec_span's split in whole DM_KT tiles;
// idle when the span or the slice of the group is empty.
struct DmBlock {
	int kvh, h0, gn, first, end;
	bool idle;
};
static __device__ __forceinline__ DmBlock dm_block(const int *__restrict__ pos, int n_head, int n_kv, int window) {
	const int G = n_head / n_kv, ngrp = (G + DM_ROWS - 1) / DM_ROWS, hpb = (G + ngrp - 1) / ngrp;
	const int gi = blockIdx.x % ngrp, last = pos[0];
	DmBlock b;
	b.kvh = blockIdx.x / ngrp;
	b.h0 = b.kvh * G + gi * hpb;
	b.gn = min(hpb, G - gi * hpb);
	const DecSpan d = dec_span(last, window, gridDim.y, DM_KT);
	b.idle = (int)blockIdx.y >= d.used || b.gn <= 0;
	b.first = d.lo + blockIdx.y * d.span;
	b.end = min(b.first + d.span, last + 1) - 1;
	return b;
}

// dm_load_tile stages positions base..base+ROWS-1 as fa_load_tile does. An f16 cache's tile
// goes by cp.async, every 16-byte piece of it in flight at once (8 a thread for K and 8 for
// V at head size 128): through registers, two pieces at a time, a tile took four trips to
// memory, and a decode block has only a tile or two to hide them behind. An int8 cache's
// pieces are dequantised on the way, so they take fa_load_tile's registers.
template <int HD, int ROWS, int THREADS, int UNROLL>
static __device__ __forceinline__ void dm_load_tile(__half (*Ks)[HD + FA_PAD], __half (*Vs)[HD + FA_PAD], const __half *__restrict__ kc,
	const __half *__restrict__ vc, const float *, const float *, int base, int last, int ring, long long row_stride, int kvh) {
	constexpr int PIECES = ROWS * HD / 8;
	static_assert(PIECES % THREADS == 0, "every thread stages as many pieces");
#pragma unroll
	for (int i = 0; i < PIECES / THREADS; i++) {
		const int idx = threadIdx.x + i * THREADS;
		const int r = idx / (HD / 8), c8 = (idx % (HD / 8)) * 8;
		const int p = base + r;
		const bool in = p <= last;
		const long long off = in ? att_slot(p, ring) * row_stride + (long long)kvh * HD + c8 : 0;
		cp16(&Ks[r][c8], kc + off, in ? 16 : 0); // past last: zeros, nothing read
		cp16(&Vs[r][c8], vc + off, in ? 16 : 0);
	}
	cp_commit();
	cp_wait<0>();
}
template <int HD, int ROWS, int THREADS, int UNROLL>
static __device__ __forceinline__ void dm_load_tile(__half (*Ks)[HD + FA_PAD], __half (*Vs)[HD + FA_PAD], const int8_t *__restrict__ kc,
	const int8_t *__restrict__ vc, const float *ks, const float *vs, int base, int last, int ring, long long row_stride, int kvh) {
	fa_load_tile<HD, ROWS, THREADS, UNROLL>(Ks, Vs, kc, vc, ks, vs, base, last, ring, row_stride, kvh);
}

// dm_out_scale is the factor on a row's sum of P V when one span writes the output: 1 over
// its sum L plus head h's sink (sinks may be null), relative to the row's max M (base 2).
static __device__ __forceinline__ float dm_out_scale(float M, float L, const float *__restrict__ sinks, int h) {
	float c = 1.f, es = 0.f;
	if (sinks != nullptr) {
		const float sk = sinks[h] * DEC_LOG2E, Mo = fmaxf(M, sk);
		c = fa_exp2(M - Mo);
		es = fa_exp2(sk - Mo);
	}
	return c / (L * c + es);
}

template <int HD, typename T>
static __device__ __forceinline__ void dm_decode_body(const float *__restrict__ q, const T *__restrict__ kc,
	const T *__restrict__ vc, const float *__restrict__ ks, const float *__restrict__ vs, float *__restrict__ out,
	const int *__restrict__ pos, int n_head, int n_kv, float scale, float *__restrict__ part,
	const float *__restrict__ sinks, int window, int ring) {
	grid_dependency_entry();
	static_assert(HD % 16 == 0 && HD <= 128, "head size");
	static_assert(DEC_CHUNK % DM_KT == 0, "a span holds whole tiles");
	// the K and V tiles; after the last, each warp's output rows (DM_WARPS x DM_ROWS x HD
	// floats: 256 HD bytes, within the tiles' 256 (HD + FA_PAD))
	__shared__ __align__(16) __half kv[2][DM_KT][HD + FA_PAD];
	__half(*Ks)[HD + FA_PAD] = kv[0], (*Vs)[HD + FA_PAD] = kv[1];
	float(*ws)[DM_ROWS][HD] = reinterpret_cast<float(*)[DM_ROWS][HD]>(&kv[0][0][0]);
	__shared__ float wm[DM_WARPS][DM_ROWS], wl[DM_WARPS][DM_ROWS], fac[DM_WARPS][DM_ROWS], rowscale[DM_ROWS];
	const DmBlock b = dm_block(pos, n_head, n_kv, window);
	if (b.idle) return; // the whole block: no barrier is skipped
	const int kvh = b.kvh, h0 = b.h0, gn = b.gn, first = b.first, end = b.end;
	const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
	const int n_split = gridDim.y, sp = blockIdx.y;

	// the group's queries as A fragments (rows g and g + 8), scaled into base 2
	const float qscale = scale * DEC_LOG2E;
	uint32_t qa[HD / 16][4];
	fa_q_frags<HD>(qa, [&](int row) { return row < gn ? q + (long long)(h0 + row) * HD : nullptr; }, qscale);
	float o[HD / 8][4];
	fa_zero(o);
	float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
	const long long row_stride = (long long)n_kv * HD;
	// 2 (not the prefill's 4 for f16) keeps the kernels within 128 registers, 4 blocks an SM
	constexpr int LOAD_UNROLL = sizeof(T) == 2 ? 2 : FA_I8_LOAD_UNROLL;
	const int r0 = 16 * warp; // this warp's positions in a tile

	for (int base = first; base <= end; base += DM_KT) {
		__syncthreads(); // the previous tile is consumed
		dm_load_tile<HD, DM_KT, DM_WARPS * 32, LOAD_UNROLL>(Ks, Vs, kc, vc, ks, vs, base, end, ring, row_stride, kvh);
		__syncthreads();
		if (base + r0 > end) continue; // none of this warp's positions is attended

		fa_tile_step<HD, 2>(qa, &Ks[r0], &Vs[r0], [&](int, int j, int e) { return base + r0 + 8 * j + 2 * t + (e & 1) <= end; }, m, l, o);
	}

	// merge the warps: each writes its rows' state and unscaled sums; one thread a row
	// works out the block's max, each warp's factor and the row's final scale; then every
	// output value is the warps' sums weighted by their factors
#pragma unroll
	for (int i = 0; i < 2; i++) {
		l[i] += __shfl_xor_sync(0xffffffffu, l[i], 1);
		l[i] += __shfl_xor_sync(0xffffffffu, l[i], 2);
		if (t == 0) {
			wm[warp][g + 8 * i] = m[i];
			wl[warp][g + 8 * i] = l[i];
		}
	}
	__syncthreads(); // every warp is done with the last tile: ws may overwrite it
#pragma unroll
	for (int n = 0; n < HD / 8; n++) {
		*(float2 *)&ws[warp][g][8 * n + 2 * t] = make_float2(o[n][0], o[n][1]);
		*(float2 *)&ws[warp][g + 8][8 * n + 2 * t] = make_float2(o[n][2], o[n][3]);
	}
	if (threadIdx.x < gn) {
		const int row = threadIdx.x;
		float M = -INFINITY, L = 0.f;
		for (int w = 0; w < DM_WARPS; w++) M = fmaxf(M, wm[w][row]); // finite: warp 0 saw a position
		for (int w = 0; w < DM_WARPS; w++) {
			const float f = wm[w][row] == -INFINITY ? 0.f : fa_exp2(wm[w][row] - M);
			fac[w][row] = f;
			L += wl[w][row] * f;
		}
		if (n_split == 1) {
			rowscale[row] = dm_out_scale(M, L, sinks, h0 + row);
		} else {
			float *pp = part + ((long long)(h0 + row) * n_split + sp) * (HD + 2);
			pp[0] = M;
			pp[1] = L;
			rowscale[row] = 1.f;
		}
	}
	__syncthreads();
	for (int idx = threadIdx.x; idx < gn * HD; idx += blockDim.x) {
		const int row = idx / HD, i = idx % HD;
		float v = 0.f;
#pragma unroll
		for (int w = 0; w < DM_WARPS; w++) v += fac[w][row] * ws[w][row][i];
		v *= rowscale[row];
		if (n_split == 1) out[(long long)(h0 + row) * HD + i] = v;
		else part[((long long)(h0 + row) * n_split + sp) * (HD + 2) + 2 + i] = v;
	}
}

// Head sizes past 128 (256: Qwen3-Next, Qwen3.5): a warp's whole output rows (HD/8 x 4
// accumulators) and Q's fragments (HD/16 x 4) do not fit 128 registers, so the warps split
// P V by columns instead. A tile is DM_WKT = 32 positions (its K and V, Q and P stay within
// 48 KB of shared memory); each warp scores 8 of them (S: 16 x 8, Q's fragments read from
// shared memory each k-step), the rows' tile max is combined across the warps through
// shared memory so that every warp holds the same running max, P (16 x 32, f16) goes to
// shared memory, and each warp computes its own HD/4 output columns as P V (8 n8-tiles at
// 256: 32 accumulators). Each warp keeps the sums of its own positions; those are the only
// state merged at the end.
#define DM_WKT (8 * DM_WARPS)

template <int HD, typename T>
static __device__ __forceinline__ void dm_decode_wide_body(const float *__restrict__ q, const T *__restrict__ kc,
	const T *__restrict__ vc, const float *__restrict__ ks, const float *__restrict__ vs, float *__restrict__ out,
	const int *__restrict__ pos, int n_head, int n_kv, float scale, float *__restrict__ part,
	const float *__restrict__ sinks, int window, int ring) {
	grid_dependency_entry();
	constexpr int NC = HD / DM_WARPS; // output columns a warp
	static_assert(HD % (16 * DM_WARPS) == 0, "a warp's columns are whole pairs of n8-tiles");
	static_assert(DM_KT % DM_WKT == 0 && DM_WKT % 16 == 0, "a span holds whole tiles of whole k-steps");
	__shared__ __align__(16) __half Ks[DM_WKT][HD + FA_PAD], Vs[DM_WKT][HD + FA_PAD], Qs[DM_ROWS][HD + FA_PAD];
	__shared__ __align__(16) __half Ps[DM_ROWS][DM_WKT + FA_PAD];
	__shared__ float wm[DM_WARPS][DM_ROWS], wl[DM_WARPS][DM_ROWS];
	const DmBlock b = dm_block(pos, n_head, n_kv, window);
	if (b.idle) return; // the whole block: no barrier is skipped
	const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
	const int n_split = gridDim.y, sp = blockIdx.y;

	// the group's queries scaled into base 2 and rounded to f16 (as fa_q_frags); zero rows
	// past its heads. The first tile's barrier publishes them.
	const float qscale = scale * DEC_LOG2E;
	for (int idx = threadIdx.x; idx < DM_ROWS * HD / 2; idx += blockDim.x) {
		const int row = idx / (HD / 2), c = idx % (HD / 2) * 2;
		float2 v = make_float2(0.f, 0.f);
		if (row < b.gn) v = *(const float2 *)(q + (long long)(b.h0 + row) * HD + c);
		*(uint32_t *)&Qs[row][c] = fa_pack(v.x * qscale, v.y * qscale);
	}
	float o[NC / 8][4];
	fa_zero(o);
	float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
	const long long row_stride = (long long)n_kv * HD;
	// every load of a tile in flight at once (8 a thread at 256; sm_90: f16 116 registers,
	// int8 88, where 4 at once took 105)
	constexpr int LOAD_UNROLL = DM_WKT * HD / 8 / (DM_WARPS * 32);
	const int r0 = 8 * warp; // this warp's positions in a tile

	for (int base = b.first; base <= b.end; base += DM_WKT) {
		__syncthreads(); // the previous tile and P are consumed
		dm_load_tile<HD, DM_WKT, DM_WARPS * 32, LOAD_UNROLL>(Ks, Vs, kc, vc, ks, vs, base, b.end, ring, row_stride, b.kvh);
		__syncthreads();
		float s[1][4];
		fa_scores<HD, 1>([&](int kk, uint32_t (&a)[4]) { fa_ldsm_x4(a, &Qs[lane & 15][16 * kk + (lane >> 4) * 8]); }, &Ks[r0], s);
		float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
		for (int e = 0; e < 4; e++) {
			if (base + r0 + 2 * t + (e & 1) > b.end) s[0][e] = -INFINITY;
			mx[e >> 1] = fmaxf(mx[e >> 1], s[0][e]);
		}
#pragma unroll
		for (int i = 0; i < 2; i++) {
			mx[i] = fmaxf(mx[i], __shfl_xor_sync(0xffffffffu, mx[i], 1));
			mx[i] = fmaxf(mx[i], __shfl_xor_sync(0xffffffffu, mx[i], 2));
			if (t == 0) wm[warp][g + 8 * i] = mx[i];
		}
		__syncthreads();
		// the block's running max, finite: the tile's first position is attended
		float corr[2];
#pragma unroll
		for (int i = 0; i < 2; i++) {
			float M = m[i];
#pragma unroll
			for (int w = 0; w < DM_WARPS; w++) M = fmaxf(M, wm[w][g + 8 * i]);
			corr[i] = fa_exp2(m[i] - M); // 0 from -inf: the first tile
			m[i] = M;
			l[i] *= corr[i];
		}
		float p[4];
#pragma unroll
		for (int e = 0; e < 4; e++) {
			p[e] = fa_exp2(s[0][e] - m[e >> 1]);
			l[e >> 1] += p[e];
		}
		*(uint32_t *)&Ps[g][r0 + 2 * t] = fa_pack(p[0], p[1]);
		*(uint32_t *)&Ps[g + 8][r0 + 2 * t] = fa_pack(p[2], p[3]);
		fa_rescale(o, corr);
		__syncthreads();
#pragma unroll
		for (int kc16 = 0; kc16 < DM_WKT / 16; kc16++) {
			uint32_t a[4];
			fa_ldsm_x4(a, &Ps[lane & 15][16 * kc16 + (lane >> 4) * 8]);
			fa_pv<HD, NC / 8>(a, Vs + 16 * kc16, NC * warp, o);
		}
	}

	// a row's sum is its warps' (each summed its own positions); its max every warp's m
#pragma unroll
	for (int i = 0; i < 2; i++) {
		l[i] += __shfl_xor_sync(0xffffffffu, l[i], 1);
		l[i] += __shfl_xor_sync(0xffffffffu, l[i], 2);
		if (t == 0) wl[warp][g + 8 * i] = l[i];
	}
	__syncthreads();
#pragma unroll
	for (int i = 0; i < 2; i++) {
		const int row = g + 8 * i, h = b.h0 + row;
		if (row >= b.gn) continue;
		float L = 0.f;
#pragma unroll
		for (int w = 0; w < DM_WARPS; w++) L += wl[w][row];
		float f = 1.f, *dst;
		if (n_split == 1) {
			f = dm_out_scale(m[i], L, sinks, h);
			dst = out + (long long)h * HD;
		} else {
			dst = part + ((long long)h * n_split + sp) * (HD + 2);
			if (warp == 0 && t == 0) {
				dst[0] = m[i];
				dst[1] = L;
			}
			dst += 2;
		}
#pragma unroll
		for (int n = 0; n < NC / 8; n++) *(float2 *)(dst + NC * warp + 8 * n + 2 * t) = make_float2(o[n][2 * i] * f, o[n][2 * i + 1] * f);
	}
}

// the kernels of head size hd, on body (dm_decode_body or dm_decode_wide_body)
#define DM_DECODE(hd, body)                                                                                       \
	extern "C" __global__ void __launch_bounds__(DM_WARPS * 32, 4) attention_decode_mma_##hd(const float *q,         \
		const __half *kc, const __half *vc, float *out, const int *pos, int n_head, int n_kv, float scale,       \
		float *part, const float *sinks, int window, int ring) {                                                  \
		body<hd>(q, kc, vc, nullptr, nullptr, out, pos, n_head, n_kv, scale, part, sinks, window, ring);           \
	}                                                                                                             \
	extern "C" __global__ void __launch_bounds__(DM_WARPS * 32, 4) attention_decode_mma_int8_##hd(const float *q,    \
		const int8_t *kc, const float *ks, const int8_t *vc, const float *vs, float *out, const int *pos,         \
		int n_head, int n_kv, float scale, float *part, const float *sinks, int window, int ring) {               \
		body<hd>(q, kc, vc, ks, vs, out, pos, n_head, n_kv, scale, part, sinks, window, ring);                    \
	}
DM_DECODE(16, dm_decode_body)
DM_DECODE(32, dm_decode_body)
DM_DECODE(48, dm_decode_body)
DM_DECODE(64, dm_decode_body)
DM_DECODE(80, dm_decode_body)
DM_DECODE(96, dm_decode_body)
DM_DECODE(112, dm_decode_body)
DM_DECODE(128, dm_decode_body)
DM_DECODE(256, dm_decode_wide_body)
#undef DM_DECODE
