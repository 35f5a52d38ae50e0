/* Relative position attention bias (T5): the bucket of each query-key distance, and the bias
 * gathered from a [num_buckets, heads] table by those buckets. */
#include <math.h>

#include "brigade/status.h"
#include "kernels/kernels.h"

/* ---- relative position buckets ---- */

/* transformers computes the logarithmic buckets in float32 arithmetic and truncates; the same
 * float operations in the same order give the same bucket at the points where the exact value
 * is an integer (distance 16, 32, 64 with 32 buckets over 128), where double precision would
 * land on the other side. */
int32_t brg_k_relative_position_bucket(int64_t relative_position, bool bidirectional, int64_t num_buckets,
                                       int64_t max_distance) {
    BRG_ASSERT(num_buckets >= 4 && max_distance > num_buckets / 2);
    int64_t bucket = 0, rp = relative_position, nb = num_buckets;
    if (bidirectional) {
        nb /= 2;
        if (rp > 0) bucket += nb;
        rp = rp < 0 ? -rp : rp;
    } else {
        rp = rp < 0 ? -rp : 0;
    }
    const int64_t max_exact = nb / 2;
    if (rp < max_exact) return (int32_t)(bucket + rp);
    float v = logf((float)rp / (float)max_exact);
    v = v / (float)log((double)max_distance / (double)max_exact);
    v = v * (float)(nb - max_exact);
    int64_t large = max_exact + (int64_t)v;
    if (large > nb - 1) large = nb - 1;
    return (int32_t)(bucket + large);
}

/* The table is constant along its diagonals (it depends on j - i only): the first row and column
 * take Tq + Tk - 1 logarithms instead of Tq * Tk, and every other entry copies its upper-left
 * neighbour. */
void brg_k_relative_position_buckets(int32_t *buckets, int64_t Tq, int64_t Tk, bool bidirectional,
                                     int64_t num_buckets, int64_t max_distance) {
    BRG_ASSERT(Tq >= 0 && Tk >= 0);
    for (int64_t i = 0; i < Tq; i++)
        for (int64_t j = 0; j < Tk; j++)
            buckets[i * Tk + j] = i > 0 && j > 0 ? buckets[(i - 1) * Tk + j - 1]
                                                 : brg_k_relative_position_bucket(j - i, bidirectional, num_buckets,
                                                                                  max_distance);
}

/* ---- relative position bias: bias[h, i, j] = table[buckets[i, j], h] ---- */

void brg_k_relpos_bias_fwd(float *bias, const float *table, const int32_t *buckets, int64_t H, int64_t Tq,
                           int64_t Tk) {
    BRG_ASSERT(H >= 0 && Tq >= 0 && Tk >= 0);
    const int64_t n = Tq * Tk;
    for (int64_t h = 0; h < H; h++)
        for (int64_t p = 0; p < n; p++) bias[h * n + p] = table[(int64_t)buckets[p] * H + h];
}

/* Visited in a fixed order, so the many positions that share a bucket sum deterministically. */
void brg_k_relpos_bias_bwd(float *dtable, const float *dbias, const int32_t *buckets, int64_t H, int64_t Tq,
                           int64_t Tk) {
    BRG_ASSERT(H >= 0 && Tq >= 0 && Tk >= 0);
    if (!dtable) return;
    const int64_t n = Tq * Tk;
    for (int64_t h = 0; h < H; h++)
        for (int64_t p = 0; p < n; p++) dtable[(int64_t)buckets[p] * H + h] += dbias[h * n + p];
}
