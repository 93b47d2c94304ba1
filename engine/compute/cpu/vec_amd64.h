// Row norms and scaled adds of the host loops, vectorised (vec_amd64.c).
#ifndef STRATA_VEC_AMD64_H
#define STRATA_VEC_AMD64_H

#include <stdint.h>

// For each of rows rows of dim values: dst = x * scale * w, scale = 1/sqrt(mean(x²) + eps).
void strata_rmsnorm_avx2(float *dst, const float *x, const float *w, int64_t rows, int64_t dim, float eps);

// o[i] += s * x[i] for i < n.
void strata_add_scaled_avx2(float *o, float s, const float *x, int64_t n);

#endif
