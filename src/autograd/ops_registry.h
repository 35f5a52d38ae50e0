/* The list of every autograd op (internal to the library and its tests).
 *
 * Each op of include/brigade/ops.h and of the internal op headers (ops_pack.h) has one entry,
 * its function's name and address: renaming or removing an op breaks this file's build. The op
 * table test (tests/test_ops_table.c) requires a table entry for every name here, and fails,
 * naming it, on any `brg_status brg_NAME(brg_tape *...)` declared in those headers or defined in
 * src/autograd that is missing here. Adding an op: add it below and a table entry there
 * (docs/kernels.md). */
#ifndef BRIGADE_AUTOGRAD_OPS_REGISTRY_H
#define BRIGADE_AUTOGRAD_OPS_REGISTRY_H

/* The address as a generic function pointer (never called through this type). */
typedef void (*ops_registry_fn)(void);

typedef struct ops_registry_entry {
    const char *name; /* the function's name, "brg_linear" */
    ops_registry_fn fn;
} ops_registry_entry;

extern const ops_registry_entry ops_registry[];
extern const int ops_registry_count;

#endif
