#include <stdint.h>

// The largest head size and the most heads per kernel call's inner group.
#define STRATA_ATTEND_MAX_DIM 256
#define STRATA_ATTEND_MAX_GROUP 8

// g query heads that share one KV head, of t consecutive tokens, attend over the cache: the
// first token over n positions, each next one over one more. q: token j's heads are g rows
// of d floats from q + j*qs; out the same; k, v: rows of d halves, stride halves apart;
// scores: t*g*(n+t-1) floats of scratch. d must be a multiple of 8 and at most
// STRATA_ATTEND_MAX_DIM. ml NULL: out is the attention. Else (t = 1) the positions are one
// part of the context: out gets sum(e^(score - max) v) per head, unnormalised, and ml[2h],
// ml[2h+1] head h's max score and sum(e^(score - max)), for the caller to merge the parts.
void strata_attend_f16_avx2(const float *q, long qs, const uint16_t *k, const uint16_t *v, long stride, int n, int t,
                            int d, int g, float scale, float *scores, float *out, float *ml);

// The same over an int8 cache: k, v rows of d int8 values, stride values apart, and ks, vs
// one float32 scale per 32 values (value i of k has scale ks[i/32]); d a multiple of 32.
void strata_attend_q8_avx2(const float *q, long qs, const int8_t *k, const int8_t *v, const float *ks, const float *vs,
                           long stride, int n, int t, int d, int g, float scale, float *scores, float *out, float *ml);
