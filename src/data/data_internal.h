/* What the dataset loaders of src/data share (not part of the public API). */
#ifndef BRIGADE_DATA_INTERNAL_H
#define BRIGADE_DATA_INTERNAL_H

#include "brigade/dataset.h"

/* An empty dataset with its arena. */
brg_status data_dataset_new(brg_dataset **out);
/* A new contiguous column in the dataset's arena, copied from `src` (left zeroed when NULL). */
brg_status data_add_column(brg_dataset *d, brg_tensor **slot, brg_dtype dtype, int ndim, const int64_t *shape,
                           const char *name, const void *src);

#endif
