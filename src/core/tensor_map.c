/* Lookups are linear: a map holds a handful of entries (a model's inputs), so a scan of short
 * names beats any index, and copying a map is a plain struct copy. */
#include "brigade/tensor_map.h"

#include <string.h>

static int find(const brg_tensor_map *m, const char *name) {
    for (int i = 0; i < m->n; i++)
        if (strcmp(m->items[i].name, name) == 0) return i;
    return -1;
}

brg_tensor *brg_tensor_map_get(const brg_tensor_map *m, const char *name) {
    const int i = find(m, name);
    return i < 0 ? NULL : m->items[i].tensor;
}

static void remove_at(brg_tensor_map *m, int i) {
    memmove(&m->items[i], &m->items[i + 1], (size_t)(m->n - i - 1) * sizeof m->items[0]);
    m->n--;
}

brg_status brg_tensor_map_put(brg_tensor_map *m, const char *name, brg_tensor *t) {
    const size_t len = name ? strlen(name) : 0;
    if (len == 0 || len >= BRG_TENSOR_NAME_MAX)
        return brg_error(BRG_ERR_INVALID_ARG, "a tensor name must have 1 to %d characters: '%.60s'",
                         BRG_TENSOR_NAME_MAX - 1, name ? name : "");
    const int i = find(m, name);
    if (i >= 0) {
        if (t) m->items[i].tensor = t;
        else remove_at(m, i);
        return BRG_OK;
    }
    if (!t) return BRG_OK;
    if (m->n >= BRG_TENSOR_MAP_MAX)
        return brg_error(BRG_ERR_INVALID_ARG, "more than %d named tensors (adding '%s')", BRG_TENSOR_MAP_MAX, name);
    memcpy(m->items[m->n].name, name, len + 1);
    m->items[m->n].tensor = t;
    m->n++;
    return BRG_OK;
}

int64_t brg_tensor_map_rows(const brg_tensor_map *m) {
    for (int i = 0; i < m->n; i++)
        if (m->items[i].tensor && m->items[i].tensor->ndim > 0) return m->items[i].tensor->shape[0];
    return 0;
}
