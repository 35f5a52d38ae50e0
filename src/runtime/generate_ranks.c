/* brg_generate_requests_over_ranks: the ranks transport of a generate placement (its devices
 * spread over the ranks as a runtime's: brg_ranks_layout, brg_ranks_timeout), handed down to the
 * pipelined decode (src/models/decode_ranks.h), which only calls through it. */
#include <string.h>

#include "brigade/generate.h"
#include "brigade/ranks.h"
#include "models/generate_internal.h"
#include "ranks_internal.h"

brg_status brg_generate_requests_over_ranks(brg_model *model, const brg_generation_config *cfg,
                                            const brg_prompts *requests, int64_t n,
                                            const brg_generate_placement *placement, brg_generation *outs) {
    const brg_generate_placement one = {1, NULL, 1}, *pl = placement ? placement : &one;
    /* One process, or a placement brg_generate_requests refuses before anything is spread. */
    if (brg_ranks_size() <= 1 || pl->stages < 1 || pl->replicas < 1 || pl->stages > 256 || pl->replicas > 256)
        return brg_generate_requests(model, cfg, requests, n, placement, outs);
    for (int64_t i = 0; i < n; i++) memset(&outs[i], 0, sizeof outs[i]);
    transport *t = NULL;
    BRG_TRY(ranks_transport_factory()(pl->replicas * pl->stages, &t));
    const brg_status st = gen_generate_requests_over(model, cfg, requests, n, pl, t, brg_ranks_timeout(), outs);
    t->destroy(t);
    return st;
}
