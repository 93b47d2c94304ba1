// router.cu: MoE routing of a token's expert logits, in one of three modes (compute's
// RouteHost and RouteHostTopK are the references):
//   ROUTE_SOFTMAX       softmax over every expert, the k most probable (ties to the lower
//                       id), their probabilities;
//   ROUTE_SOFTMAX_NORM  the same, renormalised so the k weights sum to 1;
//   ROUTE_TOPK_SOFTMAX  the k largest logits (ties to the lower id), then a softmax over
//                       those k (gpt-oss).
// router_topk routes tokens whose logits are in memory, one block each. router_f32 is
// decode's whole router in one launch: the logits of one row x by an f32 router matrix (plus
// a bias), one block per expert, and the block that finishes last routes them.
//
// The selection has no serial rounds: it ranks. Each 32-expert slice ranks its experts
// against each other (value descending, then id); the k best of each slice are candidates,
// and a candidate's rank among the candidates is its rank among all experts (whatever beats
// a top-k expert is top-k in its own slice). The expert of rank r < k fills slot r.
#include "common.cuh"

#define ROUTE_SOFTMAX 0
#define ROUTE_SOFTMAX_NORM 1
#define ROUTE_TOPK_SOFTMAX 2
#define ROUTER_THREADS 128

// route_reduce is the max (is_max) or the sum of v over the block, in every thread.
static __device__ __forceinline__ float route_reduce(float v, bool is_max, float *part) {
	v = is_max ? warp_max(v) : warp_sum(v);
	__syncthreads(); // part is free
	if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = v;
	__syncthreads();
	const int lane = threadIdx.x & 31;
	const bool in = lane < (int)(blockDim.x >> 5);
	return is_max ? warp_max(in ? part[lane] : -INFINITY) : warp_sum(in ? part[lane] : 0.f);
}

// route_beats: value a of expert ia ranks before value b of expert ib.
static __device__ __forceinline__ int route_beats(float a, int ia, float b, int ib) { return a > b || (a == b && ia < ib); }

// route_block routes the n logits at l (read through L2 when CG: other blocks wrote them)
// into ids[k] and weights[k]. sm holds route_shared_floats(n, k) floats.
template <bool CG>
static __device__ void route_block(const float *l, int n, int k, int mode, int *ids, float *weights, float *sm) {
	__shared__ float part[32], selv[32];
	__shared__ int seli[32];
	const int npad = (n + 31) & ~31, ns = npad >> 5, nc = ns * k;
	const int t = threadIdx.x, nb = blockDim.x, lane = t & 31;
	float *sv = sm, *cv = sm + npad;
	int *ci = (int *)(cv + nc);
	// The values ranked: the logits, or the softmax's numerators exp(l - max). NaN ranks
	// last, as the references never pick it; the padding after it.
	float mx = -INFINITY;
	for (int i = t; i < n; i += nb) {
		const float x = CG ? __ldcg(l + i) : l[i];
		sv[i] = x;
		mx = fmaxf(mx, x);
	}
	float sum = 0.f;
	if (mode != ROUTE_TOPK_SOFTMAX) {
		mx = route_reduce(mx, true, part);
		for (int i = t; i < n; i += nb) {
			const float p = expf(sv[i] - mx);
			sum += p;
			sv[i] = p == p ? p : -1.f;
		}
		sum = route_reduce(sum, false, part);
	} else {
		for (int i = t; i < n; i += nb)
			if (sv[i] != sv[i]) sv[i] = -INFINITY;
	}
	for (int i = n + t; i < npad; i += nb) sv[i] = -INFINITY;
	__syncthreads();
	// Ranks within each slice: the k best are candidates (or, one slice, the answer).
	for (int s = t >> 5; s < ns; s += nb >> 5) {
		const float *sl = sv + 32 * s;
		const float me = sl[lane];
		int r = 0;
#pragma unroll
		for (int j = 0; j < 32; j += 4) {
			const float4 o = *(const float4 *)(sl + j);
			r += route_beats(o.x, j, me, lane) + route_beats(o.y, j + 1, me, lane) + route_beats(o.z, j + 2, me, lane) + route_beats(o.w, j + 3, me, lane);
		}
		if (r < k) {
			if (ns == 1) {
				selv[r] = me;
				seli[r] = lane;
			} else {
				cv[s * k + r] = me;
				ci[s * k + r] = 32 * s + lane;
			}
		}
	}
	__syncthreads();
	if (ns > 1) {
		for (int c = t; c < nc; c += nb) {
			const float me = cv[c];
			const int id = ci[c];
			int r = 0;
#pragma unroll 8
			for (int j = 0; j < nc; j++) r += route_beats(cv[j], ci[j], me, id);
			if (r < k) {
				selv[r] = me;
				seli[r] = id;
			}
		}
		__syncthreads();
	}
	if (t >= 32) return;
	const bool on = lane < k;
	const float v = on ? selv[lane] : 0.f;
	float w;
	if (mode == ROUTE_TOPK_SOFTMAX) { // the first is the largest: every exponent is at most 0
		const float top = selv[0];
		float s = 0.f;
		for (int j = 0; j < k; j++) s += expf(selv[j] - top);
		w = expf(v - top) / s;
	} else {
		w = v / sum;
		if (mode == ROUTE_SOFTMAX_NORM) {
			float picked = 0.f;
			for (int j = 0; j < k; j++) picked += selv[j] / sum;
			w = w / picked;
		}
	}
	if (on) {
		ids[lane] = seli[lane];
		weights[lane] = w;
	}
}

extern "C" __global__ void __launch_bounds__(ROUTER_THREADS) router_topk(const float *logits, int *ids, float *weights, int n_exp, int k, int mode) {
	extern __shared__ float4 route_sm[]; // float4: 16-byte aligned for the slices' loads
	const long long tok = blockIdx.x;
	route_block<false>(logits + tok * n_exp, n_exp, k, mode, ids + tok * k, weights + tok * k, (float *)route_sm);
}

// The route mail (router_f32's mail, page-locked host memory mapped into the device), in
// 32-bit words: the tag at 0, on a cache line of its own; the ids at ROUTE_MAIL_IDS, the
// weights at ROUTE_MAIL_WEIGHTS, x at ROUTE_MAIL_X (16-byte aligned). cuda/router.go
// mirrors these.
#define ROUTE_MAIL_IDS 32
#define ROUTE_MAIL_WEIGHTS 64
#define ROUTE_MAIL_X 128

// router_f32: logits[e] = W[e] . x + bias[e] (bias may be null) for one row x of cols
// values (a multiple of 4, x and W 16-byte aligned), one block per expert (its threads'
// float4 loads all in flight at once), then route_block by the last block to finish; done
// is a zeroed counter, zero again when the launch ends. With mail (may be null) the last
// block also writes x, the ids and the weights to the host, and then tag in the mail's first
// word: a host polling that word has them once it reads tag, with no copy queued after the
// launch and no wait for the stream.
extern "C" __global__ void __launch_bounds__(ROUTER_THREADS) router_f32(const float *x, const float *W, const float *bias, float *logits,
	int *ids, float *weights, unsigned *done, int cols, int n_exp, int k, int mode, unsigned *mail, unsigned tag) {
	grid_dependency_entry();
	extern __shared__ float4 route_sm[];
	__shared__ float dot[ROUTER_THREADS / 32];
	__shared__ bool last;
	const int e = blockIdx.x, t = threadIdx.x;
	const float4 *wr = (const float4 *)(W + (long long)e * cols), *xv = (const float4 *)x;
	const int n4 = cols >> 2;
	float s = 0.f;
#pragma unroll 8
	for (int c = t; c < n4; c += ROUTER_THREADS) {
		const float4 a = __ldg(wr + c), b = xv[c];
		s = fmaf(a.x, b.x, s);
		s = fmaf(a.y, b.y, s);
		s = fmaf(a.z, b.z, s);
		s = fmaf(a.w, b.w, s);
	}
	s = warp_sum(s);
	if ((t & 31) == 0) dot[t >> 5] = s;
	__syncthreads();
	if (t == 0) {
		float l = 0.f;
#pragma unroll
		for (int i = 0; i < ROUTER_THREADS / 32; i++) l += dot[i];
		logits[e] = l + (bias ? bias[e] : 0.f);
		__threadfence(); // the logit is visible before this block counts itself done
		last = atomicAdd(done, 1u) == gridDim.x - 1;
	}
	__syncthreads();
	if (!last) return;
	if (t == 0) *done = 0;
	if (mail) { // x's writes cross the bus while the block routes
		float4 *mx = (float4 *)(mail + ROUTE_MAIL_X);
		for (int c = t; c < n4; c += ROUTER_THREADS) mx[c] = xv[c];
	}
	route_block<true>(logits, n_exp, k, mode, ids, weights, (float *)route_sm);
	if (!mail) return;
	if (t < k) { // this lane (of warp 0) wrote ids[t] and weights[t]
		mail[ROUTE_MAIL_IDS + t] = (unsigned)ids[t];
		mail[ROUTE_MAIL_WEIGHTS + t] = __float_as_uint(weights[t]);
	}
	// One fence a thread for all of its writes to the host (x's are long done by now), the
	// barrier so that every thread's has returned, then the tag: one wait on the bus, where a
	// fence after x and another after the routes were two in a row.
	__threadfence_system();
	__syncthreads();
	if (t == 0) asm volatile("st.release.sys.global.u32 [%0], %1;" ::"l"(mail), "r"(tag) : "memory");
}
