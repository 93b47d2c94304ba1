// router.cu: MoE routing. Softmax over the expert logits of one token, then the k
// largest (ties to the lower id), optionally renormalised so the k weights sum to 1.
// One warp per token; the probabilities live in dynamic shared memory (n_exp floats).
#include "common.cuh"

extern "C" __global__ void __launch_bounds__(32) router_topk(const float *logits, int *ids, float *weights, int n_exp,
	int k, int renorm) {
	extern __shared__ float prob[];
	const long long tok = blockIdx.x;
	const float *l = logits + tok * n_exp;
	const int lane = threadIdx.x;
	float mx = -INFINITY;
	for (int i = lane; i < n_exp; i += 32) mx = fmaxf(mx, l[i]);
	mx = warp_max(mx);
	float sum = 0.f;
	for (int i = lane; i < n_exp; i += 32) {
		const float e = expf(l[i] - mx);
		prob[i] = e;
		sum += e;
	}
	sum = warp_sum(sum);
	__syncwarp();
	float picked = 0.f, mine = 0.f;
	for (int j = 0; j < k; j++) {
		float best = -1.f;
		int bi = 0x7fffffff;
		for (int i = lane; i < n_exp; i += 32) {
			const float p = prob[i];
			if (p > best) { best = p; bi = i; }
		}
#pragma unroll
		for (int o = 16; o > 0; o >>= 1) {
			const float ob = __shfl_xor_sync(0xffffffffu, best, o);
			const int oi = __shfl_xor_sync(0xffffffffu, bi, o);
			if (ob > best || (ob == best && oi < bi)) { best = ob; bi = oi; }
		}
		const float p = best / sum;
		picked += p;
		if (lane == j) mine = p;
		if (lane == 0) {
			ids[tok * k + j] = bi;
			prob[bi] = -2.f; // taken
		}
		__syncwarp();
	}
	if (lane < k) weights[tok * k + lane] = renorm ? mine / picked : mine;
}
