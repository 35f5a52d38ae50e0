/* Replacing two files of one folder as a unit (internal to the library): a model folder's
 * model.safetensors and config.json, which must never be seen as new weights beside an old
 * config (or the other way round), whatever moment a kill, a crash or a full disk stops the
 * writer. The folder itself may hold anything else (a run's checkpoints and logs): only the two
 * names change.
 *
 * The new files are written into a staging folder inside DIR and fsynced. Then:
 *   neither name exists yet      each is renamed into place (weights first): a kill between the
 *                                two leaves weights without a config, never a mixed pair;
 *   the old pair exists          it is hard-linked into a folder of its own, P (a symlink) is
 *                                pointed at that folder, and each name is replaced by a symlink
 *                                through P (config.json -> P/config.json): the same old bytes, one
 *                                name at a time. One rename of P onto the staging folder switches
 *                                both names at once. Each symlink is then replaced by a hard link
 *                                of the new file (the same new bytes), and the helpers go.
 * At every step both names read as the old pair or both as the new one, through any reader
 * that follows symlinks (transformers does). A writer killed mid-way leaves
 * "DIR/.brigade-pair.tmp.PID*" helpers and possibly the two names as symlinks, still resolving
 * to one whole pair; the next commit into DIR (or brg_file_pair_recover) turns them back into
 * files and removes the helpers of writers that no longer run. A file system without hard links
 * or symlinks gets the two renames alone.
 *
 * BRIGADE_FAULT=NAME (tests only) kills the process with SIGKILL at the point of the protocol
 * called NAME: see fault_points in file_pair.c. */
#ifndef BRIGADE_IO_FILE_PAIR_H
#define BRIGADE_IO_FILE_PAIR_H

#include "brigade/status.h"

typedef struct brg_file_pair {
    char *dir;         /* the folder the two files end up in */
    char *staging;     /* where to write them first, by the same names */
    const char *names[2]; /* the first is renamed first when there is no old pair */
} brg_file_pair;

/* Creates the staging folder in `dir` (which must exist); p->staging names it. */
brg_status brg_file_pair_begin(const char *dir, const char *first, const char *second, brg_file_pair *p);
/* Makes the staged files the folder's pair (both must have been written); always releases `p`.
 * On failure the old pair is left as it was and the staging folder is removed. */
brg_status brg_file_pair_commit(brg_file_pair *p);
/* Removes the staging folder and releases `p`; safe on a zeroed or released `p`. */
void brg_file_pair_abort(brg_file_pair *p);
/* Finishes what a killed writer of the pair in `dir` left: names that are symlinks through its
 * helper become files again and its helpers go. A live writer's helpers are left alone. */
brg_status brg_file_pair_recover(const char *dir, const char *first, const char *second);

#endif
