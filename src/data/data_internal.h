/* What the dataset loaders of src/data share (not part of the public API). */
#ifndef BRIGADE_DATA_INTERNAL_H
#define BRIGADE_DATA_INTERNAL_H

#include "brigade/dataset.h"

/* An empty dataset with its arena. */
brg_status data_dataset_new(brg_dataset **out);
/* A new contiguous column `name` in the dataset's arena (put into d->columns under that name),
 * copied from `src` (left zeroed when NULL); *out (when not NULL) is the new tensor. */
brg_status data_add_column(brg_dataset *d, brg_tensor **out, brg_dtype dtype, int ndim, const int64_t *shape,
                           const char *name, const void *src);

#endif
