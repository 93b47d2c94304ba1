#include <stdint.h>

// The largest head size and the most heads per kernel call's inner group.
#define STRATA_ATTEND_MAX_DIM 256
#define STRATA_ATTEND_MAX_GROUP 8

// g query heads that share one KV head attend over n cached positions. q: g rows of d
// floats; k, v: n rows of d halves, stride halves apart; scores: g*n floats of scratch;
// out: g rows of d floats. d must be a multiple of 8 and at most STRATA_ATTEND_MAX_DIM.
// ml NULL: out is the attention. Else the positions are one part of the context: out gets
// sum(e^(score - max) v) per head, unnormalised, and ml[2h], ml[2h+1] head h's max score and
// sum(e^(score - max)), for the caller to merge the parts.
void strata_attend_f16_avx2(const float *q, const uint16_t *k, const uint16_t *v, long stride, int n, int d, int g,
                            float scale, float *scores, float *out, float *ml);
