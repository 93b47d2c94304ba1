// SwiGLU of the MoE experts, vectorised (swiglu_amd64.c).
#ifndef STRATA_SWIGLU_AMD64_H
#define STRATA_SWIGLU_AMD64_H

#include <stdint.h>

// g[i] = silu(g[i]) * u[i] for i < n.
void strata_swiglu_avx2(float *g, const float *u, int64_t n);

#endif
