// The one entry point of the x86-64 kernels (vecdot_amd64.c), called from cpu_amd64.go.
#ifndef STRATA_VECDOT_AMD64_H
#define STRATA_VECDOT_AMD64_H

#include <stdint.h>

// Levels, as vdLevel in matmul.go.
#define VD_LEVEL_AVX2 1
#define VD_LEVEL_AVX512VNNI 2

// vd_matmul computes y[i*ldy + r] = dot(weight row r, activation row i) for r in [r0, r1)
// and i in [0, n). Integer weight types use aq/ad/as (8-bit activations), float weight types
// af. Returns 0, or -1 when the type or level has no kernel (nothing is written then).
int vd_matmul(int level, int type, const uint8_t *w, int64_t row_bytes, int64_t cols, const int8_t *aq,
              const float *ad, const int16_t *as, const float *af, int64_t n, float *y, int64_t ldy, int64_t r0,
              int64_t r1);

// vd_quantize rounds nb blocks of bsz (32 or 256) floats to int8 with one scale per block
// and the sums Activations keeps (per 32 values for bsz 32, per 16 for 256), exactly as
// Activations.Set does in Go. Returns 0, or -1 for an unknown level.
int vd_quantize(int level, const float *x, int64_t nb, int bsz, int8_t *q, float *d, int16_t *sums);

// vd_read_sum adds the n bytes at p as 64-bit words with 256-bit loads (n a multiple of
// 128; the caller sums any tail). Used to measure the read bandwidth the kernels can reach.
uint64_t vd_read_sum(const uint8_t *p, int64_t n);

#endif
