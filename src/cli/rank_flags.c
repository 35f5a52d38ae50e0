#include "rank_flags.h"

#include "brigade/ranks.h"

brg_status cli_rank_flags_apply(const cli_rank_flags *rf) {
    if (rf->timeout >= 0) brg_ranks_set_timeout(rf->timeout);
    if (rf->devices_per_rank && rf->rank_file)
        return brg_error(BRG_ERR_INVALID_ARG, "--devices-per-rank and --rank-file both place devices: give one");
    BRG_TRY(brg_ranks_set_rank_file(rf->rank_file));
    return brg_ranks_set_devices_per_rank(rf->devices_per_rank);
}
