// attention_decode_mma.cu: decode attention (one query token) on the tensor cores, for head
// sizes that are multiples of 16 up to 128, over an f16 or int8 cache. It takes the grid and
// partial-state layout of attention.cu's attention_decode (dec_span, attention_merge), with
// spans in units of one 64-position tile, and the tile machinery of attention_prefill.cu
// (fa_mma, fa_load8, fa_ldsm_x4_trans).
//
// Why: attention_decode gives a lane one position and all of its group's heads, some 4,000
// instructions a 32-position chunk for one warp, at about 10 cycles each; at short contexts
// only ~20 blocks have work, so a layer's attention took ~24 us on the H200 whatever the
// span count. Here the query heads of one GQA group (up to 16) are the 16 rows of an
// m16n8k16 product: S = Q K^T over a 64-position tile that the block stages in shared memory
// (a warp takes 16 of its positions), the softmax runs online in f32, base 2, and O += P V is
// the same product with P rounded to f16, as in the prefill kernel. Rows past the group's
// heads are zero queries whose results are never written.
#define DM_WARPS 4
#define DM_KT (16 * DM_WARPS) // positions a tile; DEC_CHUNK (a span's unit) is a multiple of it
#define DM_ROWS 16            // query heads a block: one m16 tile

template <int HD, typename T>
static __device__ __forceinline__ void dm_decode_body(const float *__restrict__ q, const T *__restrict__ kc,
	const T *__restrict__ vc, const float *__restrict__ ks, const float *__restrict__ vs, float *__restrict__ out,
	const int *__restrict__ pos, int n_head, int n_kv, float scale, float *__restrict__ part,
	const float *__restrict__ sinks, int window, int ring) {
	static_assert(HD % 16 == 0 && HD <= 128, "head size");
	static_assert(DEC_CHUNK % DM_KT == 0, "a span holds whole tiles");
	// the K and V tiles; after the last, each warp's output rows (DM_WARPS x DM_ROWS x HD
	// floats: 256 HD bytes, within the tiles' 256 (HD + FA_PAD))
	__shared__ __align__(16) __half kv[2][DM_KT][HD + FA_PAD];
	__half(*Ks)[HD + FA_PAD] = kv[0], (*Vs)[HD + FA_PAD] = kv[1];
	float(*ws)[DM_ROWS][HD] = reinterpret_cast<float(*)[DM_ROWS][HD]>(&kv[0][0][0]);
	__shared__ float wm[DM_WARPS][DM_ROWS], wl[DM_WARPS][DM_ROWS], fac[DM_WARPS][DM_ROWS], rowscale[DM_ROWS];
	const int G = n_head / n_kv, ngrp = (G + DM_ROWS - 1) / DM_ROWS, hpb = (G + ngrp - 1) / ngrp;
	const int kvh = blockIdx.x / ngrp, gi = blockIdx.x % ngrp;
	const int h0 = kvh * G + gi * hpb, gn = min(hpb, G - gi * hpb);
	const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
	const int last = pos[0], n_split = gridDim.y, sp = blockIdx.y;
	const DecSpan d = dec_span(last, window, n_split, DM_KT);
	if (sp >= d.used || gn <= 0) return; // the whole block: no barrier is skipped
	const int first = d.lo + sp * d.span, end = min(first + d.span, last + 1) - 1;

	// the group's queries as A fragments (rows g and g + 8), scaled into base 2
	const float qscale = scale * DEC_LOG2E;
	uint32_t qa[HD / 16][4];
	fa_q_frags<HD>(qa, [&](int row) { return row < gn ? q + (long long)(h0 + row) * HD : nullptr; }, qscale);
	float o[HD / 8][4];
#pragma unroll
	for (int n = 0; n < HD / 8; n++)
#pragma unroll
		for (int e = 0; e < 4; e++) o[n][e] = 0.f;
	float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
	const long long row_stride = (long long)n_kv * HD;
	// 2 (not the prefill's 4 for f16) keeps the kernels within 128 registers, 4 blocks an SM
	constexpr int LOAD_UNROLL = sizeof(T) == 2 ? 2 : FA_I8_LOAD_UNROLL;
	const int r0 = 16 * warp; // this warp's positions in a tile

	for (int base = first; base <= end; base += DM_KT) {
		__syncthreads(); // the previous tile is consumed
		fa_load_tile<HD, DM_KT, DM_WARPS * 32, LOAD_UNROLL>(Ks, Vs, kc, vc, ks, vs, base, end, ring, row_stride, kvh);
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
			float c = 1.f, es = 0.f;
			if (sinks != nullptr) {
				const float sk = sinks[h0 + row] * DEC_LOG2E, Mo = fmaxf(M, sk);
				c = fa_exp2(M - Mo);
				es = fa_exp2(sk - Mo);
			}
			rowscale[row] = c / (L * c + es);
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

#define DM_DECODE(hd)                                                                                             \
	extern "C" __global__ void __launch_bounds__(DM_WARPS * 32, 4) attention_decode_mma_##hd(const float *q,         \
		const __half *kc, const __half *vc, float *out, const int *pos, int n_head, int n_kv, float scale,       \
		float *part, const float *sinks, int window, int ring) {                                                  \
		dm_decode_body<hd>(q, kc, vc, nullptr, nullptr, out, pos, n_head, n_kv, scale, part, sinks, window, ring); \
	}                                                                                                             \
	extern "C" __global__ void __launch_bounds__(DM_WARPS * 32, 4) attention_decode_mma_int8_##hd(const float *q,    \
		const int8_t *kc, const float *ks, const int8_t *vc, const float *vs, float *out, const int *pos,         \
		int n_head, int n_kv, float scale, float *part, const float *sinks, int window, int ring) {               \
		dm_decode_body<hd>(q, kc, vc, ks, vs, out, pos, n_head, n_kv, scale, part, sinks, window, ring);          \
	}
DM_DECODE(16)
DM_DECODE(32)
DM_DECODE(48)
DM_DECODE(64)
DM_DECODE(80)
DM_DECODE(96)
DM_DECODE(112)
DM_DECODE(128)
#undef DM_DECODE
