#include <stdint.h>

// q: d floats; k, v: n rows of d halves, stride halves apart; scores: n floats of scratch;
// out: d floats. d must be a multiple of 8.
void strata_attend_f16_avx2(const float *q, const uint16_t *k, const uint16_t *v, long stride, int n, int d,
                            float scale, float *scores, float *out);
