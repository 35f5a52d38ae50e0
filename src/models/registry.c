/* Maps config.json's architectures[0] (or model_type) to the code that builds the model. */
#include <cJSON.h>
#include <string.h>

#include "brigade/gpt2.h"
#include "brigade/model.h"
#include "io/json.h"

typedef struct arch_entry {
    const char *architecture;
    const char *model_type;
    brg_status (*load_dir)(const char *dir, brg_model **out);
} arch_entry;

static const arch_entry builtin[] = {
    {"GPT2LMHeadModel", "gpt2", brg_gpt2_load_dir},
};

static brg_status architecture_of(const char *config_path, char *arch, size_t arch_len, char *type, size_t type_len) {
    cJSON *j;
    BRG_TRY(brg_json_load_file(config_path, 16u << 20, &j));
    arch[0] = type[0] = '\0';
    const cJSON *archs = cJSON_GetObjectItemCaseSensitive(j, "architectures");
    const cJSON *first = cJSON_IsArray(archs) ? cJSON_GetArrayItem(archs, 0) : NULL;
    if (cJSON_IsString(first)) snprintf(arch, arch_len, "%s", first->valuestring);
    const cJSON *mt = cJSON_GetObjectItemCaseSensitive(j, "model_type");
    if (cJSON_IsString(mt)) snprintf(type, type_len, "%s", mt->valuestring);
    cJSON_Delete(j);
    if (!arch[0] && !type[0])
        return brg_error(BRG_ERR_FORMAT, "%s: neither 'architectures' nor 'model_type' says what model this is",
                         config_path);
    return BRG_OK;
}

brg_status brg_model_load(const char *ref, brg_model **out) {
    char dir[4096], path[4200];
    BRG_TRY(brg_hf_resolve(ref, dir, sizeof dir));
    snprintf(path, sizeof path, "%s/config.json", dir);
    char arch[128], type[64];
    BRG_TRY(architecture_of(path, arch, sizeof arch, type, sizeof type));
    size_t n = sizeof builtin / sizeof builtin[0];
    for (size_t i = 0; i < n; i++)
        if (strcmp(arch, builtin[i].architecture) == 0) return builtin[i].load_dir(dir, out);
    for (size_t i = 0; i < n; i++)
        if (!arch[0] && strcmp(type, builtin[i].model_type) == 0) return builtin[i].load_dir(dir, out);
    return brg_error(BRG_ERR_UNSUPPORTED, "%s: architecture '%s' (model_type '%s') is not supported; supported: GPT2LMHeadModel",
                     path, arch[0] ? arch : "?", type[0] ? type : "?");
}
