/* A small table of tensors by name: a batch's inputs under transformers' keyword names
 * (input_ids, attention_mask, labels, pixel_values, ...), or what one pipeline stage hands the
 * next (hidden, encoder_hidden). Names are copied in; tensors are borrowed. Entries keep the
 * order they were put in. */
#ifndef BRIGADE_TENSOR_MAP_H
#define BRIGADE_TENSOR_MAP_H

#include "brigade/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

#define BRG_TENSOR_MAP_MAX 16
#define BRG_TENSOR_NAME_MAX 48

typedef struct brg_tensor_map_item {
    char name[BRG_TENSOR_NAME_MAX];
    brg_tensor *tensor;
} brg_tensor_map_item;

typedef struct brg_tensor_map {
    int n;
    brg_tensor_map_item items[BRG_TENSOR_MAP_MAX];
} brg_tensor_map;

/* The tensor called `name`, or NULL. */
brg_tensor *brg_tensor_map_get(const brg_tensor_map *m, const char *name);
/* Sets `name` to `t`, replacing an entry of that name in place; a NULL `t` removes it. Fails
 * (leaving the map as it was) when the map is full or the name is empty or too long. */
brg_status brg_tensor_map_put(brg_tensor_map *m, const char *name, brg_tensor *t);
/* The batch's rows: the first dimension of the first entry with one (0 if none has). */
int64_t brg_tensor_map_rows(const brg_tensor_map *m);

#ifdef __cplusplus
}
#endif
#endif
