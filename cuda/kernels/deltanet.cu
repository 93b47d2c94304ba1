// deltanet.cu: the Gated DeltaNet layers of the hybrids (qwen35moe, qwen3next) and the small
// elementwise ops around them: the causal conv1d with its rolling state, SiLU, the q/k L2
// norm, the gated delta rule, the gated RMSNorm on its output, the sigmoid gates (the gated
// attention's output, the shared expert's weight).
#include "common.cuh"

#ifndef GRID_STRIDE
#define GRID_STRIDE(i, n) for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (long long)gridDim.x * blockDim.x)
#endif

// CONV_MAX_K bounds the conv's taps (the published models use 4).
#define CONV_MAX_K 8

// Depthwise causal conv over time: y[t][c] = sum_j w[c][j] * in[t-K+1+j][c], where the
// inputs before x [n][C] are the K-1 rows of state [K-1][C] (oldest first). One thread per
// channel walks the n tokens, so it reads its channel's state first and writes the last K-1
// inputs back at the end with no other thread touching them; a decode step and a prompt are
// the same kernel. w [C][K] is f32, or f16 when w_f16. y may alias x.
extern "C" __global__ void conv1d_causal(const float *x, float *y, float *state, const void *w, int w_f16, int n, int C, int K) {
	const int c = blockIdx.x * blockDim.x + threadIdx.x;
	if (c >= C) return;
	float taps[CONV_MAX_K], hist[CONV_MAX_K];
#pragma unroll
	for (int j = 0; j < CONV_MAX_K; j++) {
		taps[j] = 0.f;
		hist[j] = 0.f;
		if (j < K) taps[j] = w_f16 ? __half2float(((const __half *)w)[(long long)c * K + j]) : ((const float *)w)[(long long)c * K + j];
		if (j < K - 1) hist[j] = state[(long long)j * C + c];
	}
	for (int t = 0; t < n; t++) {
		const float in = x[(long long)t * C + c];
		float s = 0.f;
#pragma unroll
		for (int j = 0; j < CONV_MAX_K - 1; j++)
			if (j < K - 1) s += taps[j] * hist[j];
		s += taps[K - 1] * in;
#pragma unroll
		for (int j = 0; j < CONV_MAX_K - 1; j++)
			if (j < K - 2) hist[j] = hist[j + 1];
		hist[K - 2] = in;
		y[(long long)t * C + c] = s;
	}
#pragma unroll
	for (int j = 0; j < CONV_MAX_K - 1; j++)
		if (j < K - 1) state[(long long)j * C + c] = hist[j];
}

// x = x * sigmoid(x) in place.
extern "C" __global__ void silu_f32(float *x, long long n) {
	GRID_STRIDE(i, n) {
		const float a = x[i];
		x[i] = a / (1.f + expf(-a));
	}
}

// y *= sigmoid(g).
extern "C" __global__ void mul_sigmoid(float *y, const float *g, long long n) {
	GRID_STRIDE(i, n) y[i] *= 1.f / (1.f + expf(-g[i]));
}

// A shared expert as a one-expert MoE: token t goes to expert 0 with weight sigmoid(logit[t]).
extern "C" __global__ void sigmoid_routes(const float *logits, int *ids, float *weights, int n) {
	GRID_STRIDE(t, n) {
		ids[t] = 0;
		weights[t] = 1.f / (1.f + expf(-logits[t]));
	}
}

// The delta rule's q and k: row t of qkv (row_stride floats apart) starts with kh query heads
// and kh key heads of dim values each; head r of token t (blockIdx.x = r, blockIdx.y = t) is
// L2-normalised, x / sqrt(sum x^2 + eps), times q_scale for the query heads, into
// y [n][2*kh][dim]. Block: a multiple of 32 threads, at most 256.
extern "C" __global__ void __launch_bounds__(256) l2_norm_qk(const float *qkv, long long row_stride, float *y, int kh, int dim, float q_scale, float eps) {
	__shared__ float part[8];
	const int r = blockIdx.x;
	const long long t = blockIdx.y;
	const float *xr = qkv + t * row_stride + (long long)r * dim;
	float *yr = y + (t * 2 * kh + r) * dim;
	float ss = 0.f;
	for (int i = threadIdx.x; i < dim; i += blockDim.x) ss += xr[i] * xr[i];
	ss = warp_sum(ss);
	if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = ss;
	__syncthreads();
	if (threadIdx.x < 32) {
		float v = threadIdx.x < (blockDim.x >> 5) ? part[threadIdx.x] : 0.f;
		v = warp_sum(v);
		if (threadIdx.x == 0) part[0] = v;
	}
	__syncthreads();
	const float scale = rsqrtf(part[0] + eps) * (r < kh ? q_scale : 1.f);
	for (int i = threadIdx.x; i < dim; i += blockDim.x) yr[i] = xr[i] * scale;
}

// The gated delta rule, sequential in time and parallel over value heads and state columns
// (not the chunked WY form: correctness first; one kernel serves a prompt and a decode step).
// Per value head h the state S [kd][vd] evolves, token by token:
//   g = softplus(alpha + dt_bias[h]) * a[h],  b = sigmoid(beta)
//   S <- S * exp(g);  S <- S + k (x) b (v - S^T k);  out = S^T q.
// Every column j of S evolves on its own (S^T k and S^T q are per column), so block
// (blockIdx.x, blockIdx.y = h) owns 32 columns: lane = column, the blockDim.y warps split the
// kd rows, the column tile lives in shared memory for the whole call and the two dot products
// per token are reduced across the warps through shared memory.
// qk [n][2*kh][kd]: the normalised (q scaled) query heads, then the key heads (l2_norm_qk);
// value head h reads key head h / (vh/kh) when grouped, else h % kh. v: token t's value head h
// is at v + t*v_stride + h*vd. alpha, beta [n][vh]; dt_bias, a [vh]; state [vh][kd][vd];
// out [n][vh][vd]. Shared memory: (kd + 2*blockDim.y) * 32 floats.
extern "C" __global__ void gated_delta_rule(const float *qk, const float *v, long long v_stride, const float *alpha, const float *beta,
	const float *dt_bias, const float *a, float *state, float *out, int n, int kh, int vh, int kd, int vd, int grouped) {
	extern __shared__ float sm[];
	float *S = sm;             // [kd][32]
	float *red = sm + kd * 32; // [2][W][32]
	const int lane = threadIdx.x, w = threadIdx.y, W = blockDim.y;
	const int h = blockIdx.y, j = blockIdx.x * 32 + lane;
	const bool col = j < vd;
	const int khead = grouped ? h / (vh / kh) : h % kh;
	float *Sg = state + (long long)h * kd * vd;
	for (int i = w; i < kd; i += W) S[i * 32 + lane] = col ? Sg[(long long)i * vd + j] : 0.f;
	const float dt = dt_bias[h], A = a[h];
	for (int t = 0; t < n; t++) {
		const float *q = qk + ((long long)t * 2 * kh + khead) * kd;
		const float *k = qk + ((long long)t * 2 * kh + kh + khead) * kd;
		const float x = alpha[(long long)t * vh + h] + dt;
		const float decay = expf((x > 20.f ? x : log1pf(expf(x))) * A);
		const float b = 1.f / (1.f + expf(-beta[(long long)t * vh + h]));
		float part = 0.f;
		for (int i = w; i < kd; i += W) {
			const float s = S[i * 32 + lane] * decay;
			S[i * 32 + lane] = s;
			part += s * k[i];
		}
		red[w * 32 + lane] = part;
		__syncthreads();
		float mem = 0.f;
		for (int r = 0; r < W; r++) mem += red[r * 32 + lane];
		const float delta = ((col ? v[(long long)t * v_stride + (long long)h * vd + j] : 0.f) - mem) * b;
		part = 0.f;
		for (int i = w; i < kd; i += W) {
			const float s = S[i * 32 + lane] + k[i] * delta;
			S[i * 32 + lane] = s;
			part += s * q[i];
		}
		red[(W + w) * 32 + lane] = part;
		__syncthreads();
		if (w == 0 && col) {
			float o = 0.f;
			for (int r = 0; r < W; r++) o += red[(W + r) * 32 + lane];
			out[((long long)t * vh + h) * vd + j] = o;
		}
	}
	if (col)
		for (int i = w; i < kd; i += W) Sg[(long long)i * vd + j] = S[i * 32 + lane];
}

// DELTA_CHUNK is the tokens of one block of gated_delta_chunked.
#define DELTA_CHUNK 32

// The gated delta rule for a prompt, a chunk of DELTA_CHUNK tokens at a time (the WY form of
// engine/compute/cpu's deltaChunked): the state crosses each chunk once instead of once per
// token. Within a chunk, with G the running sum of g = softplus(alpha + dt_bias)*a and b =
// sigmoid(beta), the chunk's corrected values V' solve (I - A) V' = X, where
//   X_i = b_i (v_i - e^(G_i) S^T k_i),   A_im = -b_i (k_i . k_m) e^(G_i - G_m)  (m < i),
// then out_i = e^(G_i) S^T q_i + sum_(m<=i) (q_i . k_m) e^(G_i - G_m) V'_m and
//   S <- e^(G_last) S + sum_i (e^(G_last - G_i) k_i) (x) V'_i.
// As in gated_delta_rule every column of S evolves on its own: block (blockIdx.x, blockIdx.y
// = h) owns 32 columns (lane = column) and its 8 warps split the chunk's rows; the chunk's
// A and P = (q.k) e^(dG) matrices, which every column needs, are computed by each block of
// the head (the price of keeping the state in shared memory with no exchange between blocks).
// Warp 0 solves for V' by forward substitution, a lane per column. Arguments and layouts as
// gated_delta_rule's; 256 threads; kd at most 128 (shared memory: deltaChunkedShared).
extern "C" __global__ void __launch_bounds__(256) gated_delta_chunked(const float *qk, const float *v, long long v_stride, const float *alpha,
	const float *beta, const float *dt_bias, const float *a, float *state, float *out, int n, int kh, int vh, int kd, int vd, int grouped) {
	extern __shared__ float sm[];
	const int kp = kd + 1; // padded rows: lanes reading K[m][x] for consecutive m hit distinct banks
	float *S = sm;                      // [kd][32] the state's column tile
	float *Ks = S + kd * 32;            // [DELTA_CHUNK][kp]
	float *Qs = Ks + DELTA_CHUNK * kp;  // [DELTA_CHUNK][kp]
	float *Am = Qs + DELTA_CHUNK * kp;  // [DELTA_CHUNK][DELTA_CHUNK]
	float *Pm = Am + DELTA_CHUNK * DELTA_CHUNK;
	float *X = Pm + DELTA_CHUNK * DELTA_CHUNK; // [DELTA_CHUNK][32]: X, then V'
	float *Gs = X + DELTA_CHUNK * 32;   // running sums of g
	float *Bs = Gs + DELTA_CHUNK;       // b
	float *Es = Bs + DELTA_CHUNK;       // e^(G_last - G_i)
	const int tid = threadIdx.x, lane = tid & 31, w = tid >> 5;
	const int h = blockIdx.y, j = blockIdx.x * 32 + lane;
	const bool col = j < vd;
	const int khead = grouped ? h / (vh / kh) : h % kh;
	float *Sg = state + (long long)h * kd * vd;
	for (int x = w; x < kd; x += 8) S[x * 32 + lane] = col ? Sg[(long long)x * vd + j] : 0.f;
	const float dt = dt_bias[h], A = a[h];
	for (int c0 = 0; c0 < n; c0 += DELTA_CHUNK) {
		const int L = min(DELTA_CHUNK, n - c0);
		for (int idx = tid; idx < L * kd; idx += 256) {
			const int i = idx / kd, x = idx - i * kd;
			const long long row = (long long)(c0 + i) * 2 * kh;
			Qs[i * kp + x] = qk[(row + khead) * kd + x];
			Ks[i * kp + x] = qk[(row + kh + khead) * kd + x];
		}
		if (w == 0) { // g and b, and G by an inclusive scan over the warp
			float g = 0.f;
			if (lane < L) {
				const float xa = alpha[(long long)(c0 + lane) * vh + h] + dt;
				g = (xa > 20.f ? xa : log1pf(expf(xa))) * A;
				Bs[lane] = 1.f / (1.f + expf(-beta[(long long)(c0 + lane) * vh + h]));
			}
#pragma unroll
			for (int off = 1; off < 32; off <<= 1) {
				const float y = __shfl_up_sync(0xffffffffu, g, off);
				if (lane >= off) g += y;
			}
			Gs[lane] = g;
			Es[lane] = expf(__shfl_sync(0xffffffffu, g, L - 1) - g);
		}
		__syncthreads();
		// The state's part of each row: S^T k_i for X, S^T q_i kept for the output.
		float ks[DELTA_CHUNK / 8], qs[DELTA_CHUNK / 8];
#pragma unroll
		for (int r = 0; r < DELTA_CHUNK / 8; r++) ks[r] = qs[r] = 0.f;
		for (int x = 0; x < kd; x++) {
			const float s = S[x * 32 + lane];
#pragma unroll
			for (int r = 0; r < DELTA_CHUNK / 8; r++) {
				const int i = w + 8 * r;
				ks[r] += Ks[i * kp + x] * s;
				qs[r] += Qs[i * kp + x] * s;
			}
		}
#pragma unroll
		for (int r = 0; r < DELTA_CHUNK / 8; r++) {
			const int i = w + 8 * r;
			const float eg = expf(Gs[i]);
			qs[r] *= eg;
			if (i < L) X[i * 32 + lane] = Bs[i] * ((col ? v[(long long)(c0 + i) * v_stride + (long long)h * vd + j] : 0.f) - eg * ks[r]);
		}
		// A (strictly lower) and P (lower with the diagonal); a warp takes a row i, lane = m.
		for (int p = tid; p < DELTA_CHUNK * DELTA_CHUNK; p += 256) {
			const int i = p / DELTA_CHUNK, m = p - i * DELTA_CHUNK;
			if (m <= i && i < L) {
				float kk = 0.f, qk_ = 0.f;
				for (int x = 0; x < kd; x++) {
					const float km = Ks[m * kp + x];
					kk += Ks[i * kp + x] * km;
					qk_ += Qs[i * kp + x] * km;
				}
				const float e = expf(Gs[i] - Gs[m]);
				Am[p] = m < i ? -Bs[i] * kk * e : 0.f;
				Pm[p] = qk_ * e;
			}
		}
		__syncthreads();
		if (w == 0) { // V'_i = X_i + sum_(m<i) A_im V'_m, row by row; a lane reads only its own column
			for (int i = 1; i < L; i++) {
				const float *ar = Am + i * DELTA_CHUNK;
				float s0 = X[i * 32 + lane], s1 = 0.f, s2 = 0.f, s3 = 0.f;
				int m = 0;
				for (; m + 4 <= i; m += 4) {
					s0 += ar[m] * X[m * 32 + lane];
					s1 += ar[m + 1] * X[(m + 1) * 32 + lane];
					s2 += ar[m + 2] * X[(m + 2) * 32 + lane];
					s3 += ar[m + 3] * X[(m + 3) * 32 + lane];
				}
				for (; m < i; m++) s0 += ar[m] * X[m * 32 + lane];
				X[i * 32 + lane] = (s0 + s1) + (s2 + s3);
			}
		}
		__syncthreads();
#pragma unroll
		for (int r = 0; r < DELTA_CHUNK / 8; r++) {
			const int i = w + 8 * r;
			if (i < L && col) {
				const float *pr = Pm + i * DELTA_CHUNK;
				float o = qs[r];
				for (int m = 0; m <= i; m++) o += pr[m] * X[m * 32 + lane];
				out[((long long)(c0 + i) * vh + h) * vd + j] = o;
			}
		}
		const float eL = expf(Gs[L - 1]);
		for (int x = w; x < kd; x += 8) {
			float s = S[x * 32 + lane] * eL;
			for (int i = 0; i < L; i++) s += Ks[i * kp + x] * Es[i] * X[i * 32 + lane];
			S[x * 32 + lane] = s;
		}
		__syncthreads();
	}
	if (col)
		for (int x = w; x < kd; x += 8) Sg[(long long)x * vd + j] = S[x * 32 + lane];
}

// The delta rule's output norm: each row of dim values becomes x / sqrt(mean(x^2) + eps) *
// w * silu(z), z laid out as x. The weight is used as stored (the file's ssm_norm is a plain
// weight, not 1 + w). y may alias x. One block of up to 256 threads per row.
extern "C" __global__ void __launch_bounds__(256) gated_rms_norm(const float *x, const float *z, const float *w, float *y, int dim, float eps) {
	__shared__ float part[8];
	const long long row = blockIdx.x;
	const float *xr = x + row * dim;
	const float *zr = z + row * dim;
	float *yr = y + row * dim;
	float ss = 0.f;
	for (int i = threadIdx.x; i < dim; i += blockDim.x) ss += xr[i] * xr[i];
	ss = warp_sum(ss);
	if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = ss;
	__syncthreads();
	if (threadIdx.x < 32) {
		float v = threadIdx.x < (blockDim.x >> 5) ? part[threadIdx.x] : 0.f;
		v = warp_sum(v);
		if (threadIdx.x == 0) part[0] = v;
	}
	__syncthreads();
	const float scale = rsqrtf(part[0] / (float)dim + eps);
	for (int i = threadIdx.x; i < dim; i += blockDim.x) {
		const float g = zr[i];
		yr[i] = xr[i] * scale * w[i] * (g / (1.f + expf(-g)));
	}
}
