/* The all-gather of pieces (transport.h): every source sends each device it feeds one bundle
 * of that device's pieces, in key order, then every device receives one bundle from each source
 * that feeds it and copies each piece in. Sending never waits on any transport, so sending all
 * first cannot deadlock. Empty pieces are not sent. */
#include <stdlib.h>
#include <string.h>

#include "transport.h"

static bool sends_to(const transport_piece *r, int device, int to) {
    return r->source == device && r->device == to && to != device && r->count > 0;
}

static bool receives_from(const transport_piece *r, int device, int from) {
    return r->device == device && r->source == from && from != device && r->count > 0;
}

/* One bundle of the rows this device sends to `to`; views over its own memory. */
static brg_status send_pieces(transport *t, int device, int to, const transport_piece *rows, int n,
                              brg_named_tensor *items, brg_tensor *views, char (*names)[16]) {
    int k = 0;
    for (int i = 0; i < n; i++) {
        if (!sends_to(&rows[i], device, to)) continue;
        int64_t count = (int64_t)rows[i].count;
        snprintf(names[k], sizeof names[k], "%d", rows[i].key);
        views[k] = brg_tensor_wrap(BRG_DTYPE_F32, 1, &count, rows[i].data);
        items[k] = (brg_named_tensor){names[k], &views[k]};
        k++;
    }
    return k ? t->send(t, device, to, TRANSPORT_TAG_PIECES, items, k) : BRG_OK;
}

/* The bundle from `from`: its pieces in the order of this device's rows from it. */
static brg_status take_pieces(transport *t, int device, int from, const transport_piece *rows, int n) {
    int expected = 0;
    for (int i = 0; i < n; i++) expected += receives_from(&rows[i], device, from);
    if (!expected) return BRG_OK;
    transport_msg m;
    BRG_TRY(t->recv(t, device, from, TRANSPORT_TAG_PIECES, &m));
    brg_status st = m.n == expected ? BRG_OK
                                    : brg_error(BRG_ERR_INTERNAL, "device %d expects %d pieces from device %d, got %d",
                                                device, expected, from, m.n);
    for (int i = 0, k = 0; st == BRG_OK && i < n; i++) {
        if (!receives_from(&rows[i], device, from)) continue;
        const brg_tensor *got = m.items[k].tensor;
        char key[16];
        snprintf(key, sizeof key, "%d", rows[i].key);
        if (strcmp(m.items[k].name, key) != 0 || got->dtype != BRG_DTYPE_F32 ||
            brg_tensor_numel(got) != (int64_t)rows[i].count)
            st = brg_error(BRG_ERR_INTERNAL,
                           "device %d got piece %s from device %d where it expects piece %s of %zu floats", device,
                           m.items[k].name, from, key, rows[i].count);
        else
            memcpy(rows[i].data, got->data, rows[i].count * sizeof(float));
        k++;
    }
    t->release(t, device, &m);
    return st;
}

brg_status transport_all_gather(transport *t, int device, const transport_piece *rows, int n) {
    for (int i = 1; i < n; i++)
        if (rows[i - 1].key > rows[i].key)
            return brg_error(BRG_ERR_INTERNAL, "device %d's pieces are not sorted by key", device);
    brg_named_tensor *items = calloc((size_t)(n ? n : 1), sizeof *items);
    brg_tensor *views = calloc((size_t)(n ? n : 1), sizeof *views);
    char (*names)[16] = calloc((size_t)(n ? n : 1), sizeof *names);
    brg_status st = items && views && names ? BRG_OK
                                            : brg_error(BRG_ERR_OOM, "device %d: cannot list its pieces", device);
    for (int to = 0; st == BRG_OK && to < t->n_devices; to++)
        st = send_pieces(t, device, to, rows, n, items, views, names);
    for (int from = 0; st == BRG_OK && from < t->n_devices; from++) st = take_pieces(t, device, from, rows, n);
    free(items);
    free(views);
    free(names);
    return st;
}
