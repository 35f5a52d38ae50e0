#include "rank_flags.h"

#include "brigade/ranks.h"

brg_status cli_rank_flags_apply(const cli_rank_flags *rf) {
    if (rf->timeout >= 0) brg_ranks_set_timeout(rf->timeout);
    return brg_ranks_set_devices_per_rank(rf->devices_per_rank);
}
