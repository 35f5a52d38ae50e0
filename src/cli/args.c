#include "args.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "brigade/status.h"

static arg_spec *find(arg_spec *specs, int n, const char *name, size_t len) {
    for (int i = 0; i < n; i++)
        if (strlen(specs[i].name) == len && strncmp(specs[i].name, name, len) == 0) return &specs[i];
    return NULL;
}

static bool store(const char *command, arg_spec *s, const char *value) {
    if (s->kind == ARG_STRING) {
        *(const char **)s->dest = value;
        return true;
    }
    errno = 0;
    char *end;
    if (s->kind == ARG_DOUBLE) {
        double d = strtod(value, &end);
        if (errno || end == value || *end || d != d) {
            fprintf(stderr, "brigade %s: --%s expects a number, got '%s'\n", command, s->name, value);
            return false;
        }
        *(double *)s->dest = d;
        return true;
    }
    long long v = strtoll(value, &end, 10);
    if (errno || end == value || *end) {
        fprintf(stderr, "brigade %s: --%s expects an integer, got '%s'\n", command, s->name, value);
        return false;
    }
    *(int64_t *)s->dest = v;
    return true;
}

bool args_parse(const char *command, int argc, char **argv, int first, arg_spec *specs, int n) {
    for (int i = first; i < argc; i++) {
        const char *a = argv[i];
        if (strncmp(a, "--", 2) != 0) {
            fprintf(stderr, "brigade %s: unexpected argument '%s' (see brigade %s --help)\n", command, a, command);
            return false;
        }
        const char *name = a + 2, *eq = strchr(name, '=');
        size_t len = eq ? (size_t)(eq - name) : strlen(name);
        arg_spec *s = find(specs, n, name, len);
        if (!s) {
            fprintf(stderr, "brigade %s: unknown option '--%.*s' (see brigade %s --help)\n", command, (int)len, name,
                    command);
            return false;
        }
        s->seen = true;
        if (s->kind == ARG_FLAG) {
            if (eq) {
                fprintf(stderr, "brigade %s: --%s takes no value\n", command, s->name);
                return false;
            }
            *(bool *)s->dest = true;
            continue;
        }
        const char *value = eq ? eq + 1 : (i + 1 < argc ? argv[++i] : NULL);
        if (!value) {
            fprintf(stderr, "brigade %s: --%s needs a value\n", command, s->name);
            return false;
        }
        if (!store(command, s, value)) return false;
    }
    for (int i = 0; i < n; i++)
        if (specs[i].required && !specs[i].seen) {
            fprintf(stderr, "brigade %s: missing required option --%s\n", command, specs[i].name);
            return false;
        }
    return true;
}

void args_usage(const char *command, const char *summary, const arg_spec *specs, int n) {
    printf("usage: brigade %s [options]\n%s\n\noptions:\n", command, summary);
    for (int i = 0; i < n; i++) {
        const char *meta = specs[i].kind == ARG_INT ? " N" : specs[i].kind == ARG_DOUBLE ? " X"
                           : specs[i].kind == ARG_STRING ? " VALUE" : "";
        /* the help text in a column, or two spaces after a flag too long for it */
        const int pad = 24 - (int)(strlen(specs[i].name) + strlen(meta));
        printf("  --%s%s%*s%s%s\n", specs[i].name, meta, pad < 2 ? 2 : pad, "", specs[i].help,
               specs[i].required ? " (required)" : "");
    }
}

bool args_wants_help(int argc, char **argv, int first) {
    for (int i = first; i < argc; i++)
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) return true;
    return false;
}

bool args_seen(const arg_spec *specs, int n, const char *name) {
    for (int i = 0; i < n; i++)
        if (strcmp(specs[i].name, name) == 0) return specs[i].seen;
    return false;
}

int cli_fail(const char *command) {
    fprintf(stderr, "brigade %s: %s\n", command, brg_last_error());
    return 1;
}
