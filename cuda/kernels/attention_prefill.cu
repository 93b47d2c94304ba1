// attention_prefill.cu: causal prefill attention on the tensor cores, flash-attention
// style, for an f16 or int8 KV cache (the layout and options of attention.cu: GQA, pos[t] per query,
// sliding window, ring slots, sinks). A block takes 64 consecutive query tokens of one head,
// a warp 16 of them; K and V stream through shared memory 64 positions at a time. S = Q K^T
// and O += P V are mma.sync m16n8k16 with Q and P rounded to f16 (f32 accumulators; the
// softmax runs online in f32, in base 2). Head sizes are multiples of 16 up to 128 (one
// kernel each); larger heads take attention.cu's kernels. The _int8 kernels read attention.cu's
// int8 cache (values and per-block scales) and dequantise it to f16 as each tile is loaded,
// so the rest of the kernel is the f16 one.
#include "common.cuh"

#define FA_WARPS 4
#define FA_ROWS (16 * FA_WARPS) // query tokens per block
#define FA_KT 64                // cache positions per tile
#define FA_PAD 8
// How far the tile load's loop is unrolled over an int8 cache (f16: 4, what nvcc chose for
// it unasked): 1 keeps the kernels at or under the f16 ones' registers (sm_90, no spills); a
// build can try 2 or 4 with -DFA_I8_LOAD_UNROLL=N (4 spills at head size 64).
#ifndef FA_I8_LOAD_UNROLL
#define FA_I8_LOAD_UNROLL 1
#endif

static __device__ __forceinline__ void fa_mma(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
#if __CUDA_ARCH__ >= 800
	asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
		: "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
		: "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#else
	asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%0,%1,%2,%3};\n"
		: "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
		: "r"(a[0]), "r"(a[1]), "r"(b0));
	asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%0,%1,%2,%3};\n"
		: "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
		: "r"(a[2]), "r"(a[3]), "r"(b1));
#endif
}

// Four 8x8 f16 matrices from shared memory, transposed: the B fragments of P V from V's
// rows (lane L names row L%8 of matrix L/8).
static __device__ __forceinline__ void fa_ldsm_x4_trans(uint32_t (&r)[4], const __half *p) {
	const uint32_t a = (uint32_t)__cvta_generic_to_shared(p);
	asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
		: "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
		: "r"(a));
}

// The same, untransposed: an A fragment of a 16x16 f16 tile in shared memory when lane L
// names row L%16, column 8(L/16) (attention_decode_mma.cu's wide kernels: Q, P).
static __device__ __forceinline__ void fa_ldsm_x4(uint32_t (&r)[4], const __half *p) {
	const uint32_t a = (uint32_t)__cvta_generic_to_shared(p);
	asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
		: "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
		: "r"(a));
}

static __device__ __forceinline__ float fa_exp2(float x) {
	float y;
	asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
	return y;
}

static __device__ __forceinline__ uint32_t fa_pack(float a, float b) {
	const __half2 h = __floats2half2_rn(a, b);
	return *(const uint32_t *)&h;
}

// The tile load's read of a cache: the 8 consecutive K and V values at element off of the
// [slot][kv_head][HD] rows, as f16. An f16 cache has no scales (ks, vs unused).
template <int HD>
static __device__ __forceinline__ void fa_load8(const __half *__restrict__ k, const __half *__restrict__ v, const float *,
	const float *, long long off, uint4 &kd, uint4 &vd) {
	kd = *(const uint4 *)(k + off);
	vd = *(const uint4 *)(v + off);
}

// 8 int8 values (w: 8 bytes) times scale sc as f16, rounded once from the exact f32 product.
static __device__ __forceinline__ uint4 fa_i8x8_to_f16(uint2 w, float sc) {
	float f[8];
	i8x4_to_f32(w.x, f);
	i8x4_to_f32(w.y, f + 4);
	return make_uint4(fa_pack(f[0] * sc, f[1] * sc), fa_pack(f[2] * sc, f[3] * sc), fa_pack(f[4] * sc, f[5] * sc),
		fa_pack(f[6] * sc, f[7] * sc));
}

// An int8 cache (attention.cu's layout). A scale block (32 values, or the whole row) divides
// HD and holds whole 8-value chunks, so value off's scale is scale off / B.
template <int HD>
static __device__ __forceinline__ void fa_load8(const int8_t *__restrict__ k, const int8_t *__restrict__ v,
	const float *__restrict__ ks, const float *__restrict__ vs, long long off, uint4 &kd, uint4 &vd) {
	constexpr unsigned long long B = I8Row<HD>::B;
	static_assert(B % 8 == 0, "an 8-value chunk in one scale block");
	const long long soff = (long long)((unsigned long long)off / B);
	kd = fa_i8x8_to_f16(*(const uint2 *)(k + off), ks[soff]);
	vd = fa_i8x8_to_f16(*(const uint2 *)(v + off), vs[soff]);
}

// fa_q_frags loads this thread's A fragments of a 16-row query tile (rows g and g + 8),
// scaled by qscale and rounded to f16: row(r) points at row r's values, or is null for a
// row of zeros.
template <int HD, typename RowOf>
static __device__ __forceinline__ void fa_q_frags(uint32_t (&qa)[HD / 16][4], RowOf row, float qscale) {
	const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
	const float *rows[2] = {row(g), row(g + 8)};
#pragma unroll
	for (int kk = 0; kk < HD / 16; kk++)
#pragma unroll
		for (int i = 0; i < 4; i++) {
			const float *r = rows[i & 1];
			float2 v = make_float2(0.f, 0.f);
			if (r != nullptr) v = *(const float2 *)(r + 16 * kk + 2 * t + 8 * (i >> 1));
			qa[kk][i] = fa_pack(v.x * qscale, v.y * qscale);
		}
}

// fa_load_tile stages positions base..base+ROWS-1 of kv head kvh (zeros past last) into Ks
// and Vs as f16, the block's THREADS threads taking 8 values each in turn, UNROLL of those
// loads in flight a thread.
template <int HD, int ROWS, int THREADS, int UNROLL, typename T>
static __device__ __forceinline__ void fa_load_tile(__half (*Ks)[HD + FA_PAD], __half (*Vs)[HD + FA_PAD], const T *__restrict__ kc,
	const T *__restrict__ vc, const float *__restrict__ ks, const float *__restrict__ vs, int base, int last, int ring,
	long long row_stride, int kvh) {
#pragma unroll UNROLL
	for (int idx = threadIdx.x; idx < ROWS * HD / 8; idx += THREADS) {
		const int r = idx / (HD / 8), c8 = (idx % (HD / 8)) * 8;
		const int p = base + r;
		uint4 kv = make_uint4(0, 0, 0, 0), vv = make_uint4(0, 0, 0, 0);
		if (p <= last) fa_load8<HD>(kc, vc, ks, vs, att_slot(p, ring) * row_stride + (long long)kvh * HD + c8, kv, vv);
		*(uint4 *)&Ks[r][c8] = kv;
		*(uint4 *)&Vs[r][c8] = vv;
	}
}

// fa_zero clears NN n8-tiles of accumulators.
template <int NN> static __device__ __forceinline__ void fa_zero(float (&c)[NN][4]) {
#pragma unroll
	for (int n = 0; n < NN; n++)
#pragma unroll
		for (int e = 0; e < 4; e++) c[n][e] = 0.f;
}

// fa_scores is S = Q K^T for one warp's 16 query rows and NJ x 8 positions staged in shared
// memory (Ks: the first position's row), in f32: qa(kk, a) sets a to Q's A fragment of k-step kk.
template <int HD, int NJ, typename QFrag>
static __device__ __forceinline__ void fa_scores(QFrag qa, const __half (*Ks)[HD + FA_PAD], float (&s)[NJ][4]) {
	const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
	fa_zero(s);
#pragma unroll
	for (int kk = 0; kk < HD / 16; kk++) {
		uint32_t a[4];
		qa(kk, a);
#pragma unroll
		for (int j = 0; j < NJ; j++) {
			const uint32_t b0 = *(const uint32_t *)&Ks[8 * j + g][16 * kk + 2 * t];
			const uint32_t b1 = *(const uint32_t *)&Ks[8 * j + g][16 * kk + 2 * t + 8];
			fa_mma(s[j], a, b0, b1);
		}
	}
}

// fa_pv is O += P V for one k-step of 16 positions: a is P's A fragment, Vs the step's first
// position's row, and o the NN n8-tiles of output columns from c0.
template <int HD, int NN>
static __device__ __forceinline__ void fa_pv(const uint32_t (&a)[4], const __half (*Vs)[HD + FA_PAD], int c0, float (&o)[NN][4]) {
	static_assert(NN % 2 == 0, "an ldmatrix x4 feeds two n8-tiles");
	const int lane = threadIdx.x & 31;
#pragma unroll
	for (int n = 0; n < NN; n += 2) {
		uint32_t b[4];
		fa_ldsm_x4_trans(b, &Vs[(lane & 7) + ((lane >> 3) & 1) * 8][c0 + (n + (lane >> 4)) * 8]);
		fa_mma(o[n], a, b[0], b[1]);
		fa_mma(o[n + 1], a, b[2], b[3]);
	}
}

// fa_rescale scales accumulator rows g and g + 8 of o by corr[0] and corr[1].
template <int NN> static __device__ __forceinline__ void fa_rescale(float (&o)[NN][4], const float (&corr)[2]) {
#pragma unroll
	for (int n = 0; n < NN; n++) {
		o[n][0] *= corr[0];
		o[n][1] *= corr[0];
		o[n][2] *= corr[1];
		o[n][3] *= corr[1];
	}
}

// fa_tile_step is one warp's online-softmax step over NJ x 8 positions staged in shared
// memory (Ks, Vs: the warp's first position's rows): S = Q K^T for its rows g and g + 8 (qa,
// base 2), -inf where keep(i, j, e) is false (row g + 8i, n-tile j, accumulator e), the
// running max m and sum l (this thread's share) and the output o rescaled, then O += P V
// with P rounded to f16. The prefill and decode kernels share it.
template <int HD, int NJ, typename Keep>
static __device__ __forceinline__ void fa_tile_step(const uint32_t (&qa)[HD / 16][4], const __half (*Ks)[HD + FA_PAD],
	const __half (*Vs)[HD + FA_PAD], Keep keep, float (&m)[2], float (&l)[2], float (&o)[HD / 8][4]) {
	static_assert(NJ % 2 == 0, "P V takes 16 positions a k-step");
	float s[NJ][4];
	fa_scores<HD, NJ>([&](int kk, uint32_t (&a)[4]) {
#pragma unroll
		for (int i = 0; i < 4; i++) a[i] = qa[kk][i];
	}, Ks, s);
	float mx[2] = {m[0], m[1]};
#pragma unroll
	for (int j = 0; j < NJ; j++)
#pragma unroll
		for (int e = 0; e < 4; e++) {
			if (!keep(e >> 1, j, e)) s[j][e] = -INFINITY;
			mx[e >> 1] = fmaxf(mx[e >> 1], s[j][e]);
		}
#pragma unroll
	for (int i = 0; i < 2; i++) {
		mx[i] = fmaxf(mx[i], __shfl_xor_sync(0xffffffffu, mx[i], 1));
		mx[i] = fmaxf(mx[i], __shfl_xor_sync(0xffffffffu, mx[i], 2));
	}
	float corr[2];
#pragma unroll
	for (int i = 0; i < 2; i++) {
		corr[i] = mx[i] == -INFINITY ? 1.f : fa_exp2(m[i] - mx[i]);
		m[i] = mx[i];
		l[i] *= corr[i];
	}
	fa_rescale(o, corr);
#pragma unroll
	for (int j = 0; j < NJ; j++)
#pragma unroll
		for (int e = 0; e < 4; e++) {
			const int i = e >> 1;
			const float pv = m[i] == -INFINITY ? 0.f : fa_exp2(s[j][e] - m[i]);
			s[j][e] = pv;
			l[i] += pv;
		}
#pragma unroll
	for (int kc16 = 0; kc16 < NJ / 2; kc16++) {
		const uint32_t a[4] = {fa_pack(s[2 * kc16][0], s[2 * kc16][1]), fa_pack(s[2 * kc16][2], s[2 * kc16][3]),
			fa_pack(s[2 * kc16 + 1][0], s[2 * kc16 + 1][1]), fa_pack(s[2 * kc16 + 1][2], s[2 * kc16 + 1][3])};
		fa_pv<HD, HD / 8>(a, Vs + 16 * kc16, 0, o);
	}
}

// T is the cache's element type: __half, or int8_t with a float scale per block in ks and vs.
template <int HD, typename T>
static __device__ __forceinline__ void fa_prefill_body(const float *__restrict__ q, const T *__restrict__ kc,
	const T *__restrict__ vc, const float *__restrict__ ks, const float *__restrict__ vs, float *__restrict__ out,
	const int *__restrict__ pos, int n_tok, int n_head, int n_kv, float scale, const float *__restrict__ sinks,
	int window, int ring) {
	static_assert(HD % 16 == 0 && HD <= 128, "head size");
	constexpr float LOG2E = 1.4426950408889634f;
	__shared__ __align__(16) __half Ks[FA_KT][HD + FA_PAD];
	__shared__ __align__(16) __half Vs[FA_KT][HD + FA_PAD];
	__shared__ int s_first, s_last;
	const int h = blockIdx.x, kvh = h / (n_head / n_kv);
	const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
	const int tok0 = blockIdx.y * FA_ROWS + warp * 16;

	// this thread's rows: g and g + 8 of the warp's 16 tokens
	int first[2], last[2];
#pragma unroll
	for (int i = 0; i < 2; i++) {
		const int tk = tok0 + g + 8 * i;
		last[i] = tk < n_tok ? pos[tk] : -1;
		first[i] = tk < n_tok && window > 0 ? max(0, last[i] - window + 1) : 0;
	}
	int wfirst = last[0] >= 0 ? first[0] : 0x7fffffff, wlast = max(last[0], last[1]);
	if (last[1] >= 0) wfirst = min(wfirst, first[1]);
#pragma unroll
	for (int o = 1; o < 32; o <<= 1) {
		wfirst = min(wfirst, __shfl_xor_sync(0xffffffffu, wfirst, o));
		wlast = max(wlast, __shfl_xor_sync(0xffffffffu, wlast, o));
	}
	if (threadIdx.x == 0) {
		s_first = 0x7fffffff;
		s_last = -1;
	}
	__syncthreads();
	if (lane == 0 && wlast >= 0) {
		atomicMin(&s_first, wfirst);
		atomicMax(&s_last, wlast);
	}

	// Q as A fragments, scaled into base 2
	const float qscale = scale * LOG2E;
	uint32_t qa[HD / 16][4];
	fa_q_frags<HD>(qa, [&](int row) { const int tk = tok0 + row; return tk < n_tok ? q + ((long long)tk * n_head + h) * HD : nullptr; }, qscale);
	float o[HD / 8][4];
	fa_zero(o);
	float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
	__syncthreads();
	const int bfirst = s_first, blast = s_last;
	const long long row_stride = (long long)n_kv * HD;
	// more of the tile's loads in flight, for registers (FA_I8_LOAD_UNROLL)
	constexpr int LOAD_UNROLL = sizeof(T) == 2 ? 4 : FA_I8_LOAD_UNROLL;

	for (int base = bfirst; base <= blast; base += FA_KT) {
		__syncthreads(); // the previous tile is consumed
		fa_load_tile<HD, FA_KT, FA_WARPS * 32, LOAD_UNROLL>(Ks, Vs, kc, vc, ks, vs, base, blast, ring, row_stride, kvh);
		__syncthreads();
		if (base > wlast || base + FA_KT - 1 < wfirst) continue; // no row of this warp sees the tile

		// rows g and g + 8 see positions first[i]..last[i]
		fa_tile_step<HD, FA_KT / 8>(qa, Ks, Vs, [&](int i, int j, int e) {
			const int p = base + 8 * j + 2 * t + (e & 1);
			return p >= first[i] && p <= last[i];
		}, m, l, o);
	}

#pragma unroll
	for (int i = 0; i < 2; i++) {
		l[i] += __shfl_xor_sync(0xffffffffu, l[i], 1);
		l[i] += __shfl_xor_sync(0xffffffffu, l[i], 2);
	}
	float f[2];
#pragma unroll
	for (int i = 0; i < 2; i++) {
		float c = 1.f, es = 0.f;
		if (sinks != nullptr) {
			const float sk = sinks[h] * LOG2E;
			const float M2 = fmaxf(m[i], sk);
			c = m[i] == -INFINITY ? 0.f : fa_exp2(m[i] - M2);
			es = fa_exp2(sk - M2);
		}
		const float den = l[i] * c + es;
		f[i] = den > 0.f ? c / den : 0.f;
	}
#pragma unroll
	for (int i = 0; i < 2; i++) {
		const int tk = tok0 + g + 8 * i;
		if (tk >= n_tok) continue;
		float *dst = out + ((long long)tk * n_head + h) * HD + 2 * t;
#pragma unroll
		for (int n = 0; n < HD / 8; n++) *(float2 *)(dst + 8 * n) = make_float2(o[n][2 * i] * f[i], o[n][2 * i + 1] * f[i]);
	}
}

#define FA_PREFILL(hd)                                                                                                \
	extern "C" __global__ void __launch_bounds__(FA_WARPS * 32) attention_prefill_mma_##hd(const float *q,            \
		const __half *kc, const __half *vc, float *out, const int *pos, int n_tok, int n_head, int n_kv, float scale, \
		const float *sinks, int window, int ring) {                                                                   \
		fa_prefill_body<hd>(q, kc, vc, nullptr, nullptr, out, pos, n_tok, n_head, n_kv, scale, sinks, window, ring);        \
	}                                                                                                                 \
	extern "C" __global__ void __launch_bounds__(FA_WARPS * 32) attention_prefill_mma_int8_##hd(const float *q,       \
		const int8_t *kc, const float *ks, const int8_t *vc, const float *vs, float *out, const int *pos, int n_tok,  \
		int n_head, int n_kv, float scale, const float *sinks, int window, int ring) {                                \
		fa_prefill_body<hd>(q, kc, vc, ks, vs, out, pos, n_tok, n_head, n_kv, scale, sinks, window, ring); \
	}
FA_PREFILL(16)
FA_PREFILL(32)
FA_PREFILL(48)
FA_PREFILL(64)
FA_PREFILL(80)
FA_PREFILL(96)
FA_PREFILL(112)
FA_PREFILL(128)
#undef FA_PREFILL
