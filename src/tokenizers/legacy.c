/* Model folders without tokenizer.json: BERT's vocab.txt (+ tokenizer_config.json) and GPT-2's
 * vocab.json + merges.txt, built into the tokenizers transformers' converters make of them
 * (BertConverter, GPT2Converter). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/str.h"
#include "io/json.h"
#include "tk_internal.h"

static brg_status read_text(const char *path, char **text, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return brg_error(BRG_ERR_IO, "cannot open %s", path);
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *t = size >= 0 ? malloc((size_t)size + 1) : NULL;
    size_t got = t ? fread(t, 1, (size_t)size, f) : 0;
    fclose(f);
    if (!t || got != (size_t)size) {
        free(t);
        return brg_error(BRG_ERR_IO, "cannot read %s", path);
    }
    t[got] = 0;
    *text = t;
    *len = got;
    return BRG_OK;
}

/* WordPiece::read_file: line i is id i, trailing whitespace trimmed; a repeated token keeps
 * its later id. */
static brg_status read_vocab_txt(const char *path, tk_vocab *v) {
    char *text = NULL;
    size_t len = 0;
    BRG_TRY(read_text(path, &text, &len));
    size_t bad;
    brg_status st = BRG_OK;
    if (!brg_utf8_valid(text, len, &bad)) st = brg_error(BRG_ERR_FORMAT, "%s: invalid UTF-8 at byte %zu", path, bad);
    int32_t id = 0;
    for (size_t i = 0; i < len && st == BRG_OK; id++) {
        size_t e = i;
        while (e < len && text[e] != '\n') e++;
        size_t l = e - i;
        while (l && (text[i + l - 1] == ' ' || text[i + l - 1] == '\t' || text[i + l - 1] == '\r')) l--;
        st = tk_vocab_put(v, text + i, l, id);
        i = e + 1;
    }
    free(text);
    return st;
}

/* tokenizer_config.json, when present: do_lower_case (default true) and special token names. */
static brg_status bert_config(const char *dir, bool *lower, char names[5][64]) {
    static const char *keys[5] = {"unk_token", "cls_token", "sep_token", "pad_token", "mask_token"};
    static const char *defs[5] = {"[UNK]", "[CLS]", "[SEP]", "[PAD]", "[MASK]"};
    for (int i = 0; i < 5; i++) snprintf(names[i], 64, "%s", defs[i]);
    *lower = true;
    char *path = brg_str_printf("%s/tokenizer_config.json", dir);
    if (!path) return brg_error(BRG_ERR_OOM, "tokenizer: out of memory");
    FILE *f = fopen(path, "rb");
    if (!f) {
        free(path);
        return BRG_OK;
    }
    fclose(f);
    cJSON *root = NULL;
    brg_status st = brg_json_load_file(path, BRG_JSON_DEFAULT_MAX_BYTES, &root);
    if (st == BRG_OK) st = brg_json_get_bool(root, path, "do_lower_case", false, true, lower);
    for (int i = 0; i < 5 && st == BRG_OK; i++) {
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(root, keys[i]);
        const cJSON *c = cJSON_IsObject(t) ? cJSON_GetObjectItemCaseSensitive(t, "content") : t;
        if (cJSON_IsString(c) && strlen(c->valuestring) < 64) snprintf(names[i], 64, "%s", c->valuestring);
    }
    cJSON_Delete(root);
    free(path);
    return st;
}

brg_status tk_load_bert_vocab(const char *dir, brg_tokenizer **out) {
    char names[5][64];
    bool lower;
    BRG_TRY(bert_config(dir, &lower, names));
    char *path = brg_str_printf("%s/vocab.txt", dir);
    if (!path) return brg_error(BRG_ERR_OOM, "tokenizer: out of memory");
    tk_vocab v = {0};
    tk_parts p = {0};
    brg_status st = read_vocab_txt(path, &v);
    int32_t cls = tk_vocab_get(&v, names[1], strlen(names[1])), sep = tk_vocab_get(&v, names[2], strlen(names[2]));
    if (st == BRG_OK && (cls < 0 || sep < 0))
        st = brg_error(BRG_ERR_FORMAT, "%s: the special tokens %s and %s must be in the vocabulary", path, names[1],
                       names[2]);
    if (st == BRG_OK) st = tk_model_wordpiece_from_vocab(&v, names[0], &p.model);
    else tk_vocab_free(&v);
    if (st == BRG_OK) st = tk_normalizer_bert(lower, &p.normalizer);
    if (st == BRG_OK) st = tk_pretok_simple("BertPreTokenizer", false, &p.pretok);
    if (st == BRG_OK) st = tk_post_bert(names[1], cls, names[2], sep, &p.post);
    if (st == BRG_OK) st = tk_decoder_simple("WordPiece", &p.decoder);
    /* The converter registers these as special, in this order; unknown ones get new ids. */
    static const int order[5] = {3, 0, 1, 2, 4};
    int32_t next = st == BRG_OK ? (int32_t)tk_model_vocab_size(p.model) : 0;
    for (int i = 0; i < 5 && st == BRG_OK; i++) {
        const char *name = names[order[i]];
        int32_t id = tk_model_token_to_id(p.model, name, strlen(name));
        st = tk_added_push(&p.added, name, id >= 0 ? id : next++, true);
    }
    free(path);
    if (st != BRG_OK) {
        tk_parts_free(&p);
        return st;
    }
    return tk_tokenizer_new(&p, out);
}

/* tokenizer_config.json's add_prefix_space (GPT2TokenizerFast's default: false). */
static brg_status gpt2_prefix_space(const char *dir, bool *aps) {
    *aps = false;
    char *path = brg_str_printf("%s/tokenizer_config.json", dir);
    if (!path) return brg_error(BRG_ERR_OOM, "tokenizer: out of memory");
    FILE *f = fopen(path, "rb");
    brg_status st = BRG_OK;
    if (f) {
        fclose(f);
        cJSON *root = NULL;
        st = brg_json_load_file(path, BRG_JSON_DEFAULT_MAX_BYTES, &root);
        if (st == BRG_OK) st = brg_json_get_bool(root, path, "add_prefix_space", false, false, aps);
        cJSON_Delete(root);
    }
    free(path);
    return st;
}

brg_status tk_load_gpt2_files(const char *dir, brg_tokenizer **out) {
    bool aps;
    BRG_TRY(gpt2_prefix_space(dir, &aps));
    char *vj = brg_str_printf("%s/vocab.json", dir), *mt = brg_str_printf("%s/merges.txt", dir);
    tk_parts p = {0};
    brg_status st = vj && mt ? tk_model_bpe_from_files(vj, mt, &p.model) : brg_error(BRG_ERR_OOM, "out of memory");
    if (st == BRG_OK) st = tk_pretok_simple("ByteLevel", aps, &p.pretok);
    if (st == BRG_OK) st = tk_post_bytelevel(&p.post);
    if (st == BRG_OK) st = tk_decoder_simple("ByteLevel", &p.decoder);
    if (st == BRG_OK) {
        /* GPT2TokenizerFast registers it; a vocabulary without it gets it as the next id. */
        int32_t id = tk_model_token_to_id(p.model, "<|endoftext|>", 13);
        st = tk_added_push(&p.added, "<|endoftext|>", id >= 0 ? id : (int32_t)tk_model_vocab_size(p.model), true);
    }
    free(vj);
    free(mt);
    if (st != BRG_OK) {
        tk_parts_free(&p);
        return st;
    }
    return tk_tokenizer_new(&p, out);
}
