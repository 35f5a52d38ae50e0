/* Checkpoints as whole folders, laid out as transformers' Trainer lays them out (internal to the
 * trainer):
 *
 *   OUT/checkpoint-N/   config.json, model.safetensors, optimizer.safetensors,
 *                       trainer_state.json, ipu_config.json   (the state after step N)
 *
 * A checkpoint is written into OUT/checkpoint-N.tmp.PID, every file and the folder fsynced, then
 * renamed to OUT/checkpoint-N: a folder named checkpoint-N (digits only) is complete by
 * construction, and a kill at any moment leaves either the previous set or the new one. The
 * temporaries of writers that no longer run are removed when the next checkpoint starts.
 * Resuming takes the newest complete one and checks that its model, optimizer and trainer state
 * agree on the step. */
#ifndef BRIGADE_TRAIN_CHECKPOINT_DIR_H
#define BRIGADE_TRAIN_CHECKPOINT_DIR_H

#include <stddef.h>
#include <stdint.h>

#include "brigade/status.h"

/* Creates the temporary folder for checkpoint `step` under `out` (and `out` itself, with its
 * parents, if missing); *tmp receives its malloc'd path. */
brg_status brg_ckpt_dir_begin(const char *out, int64_t step, char **tmp);

/* Makes the temporary folder the complete checkpoint-`step` and frees `tmp`. An older folder of
 * that step (one a resumed run saves again) is swapped with it in one step (renameat2's
 * RENAME_EXCHANGE) and then removed; where the system cannot swap, it moves aside first. On
 * failure the temporary is removed. */
brg_status brg_ckpt_dir_commit(const char *out, int64_t step, char *tmp);

/* Removes the temporary folder after a failed write, and frees `tmp`. */
void brg_ckpt_dir_abort(char *tmp);

/* Keeps the newest `keep` complete checkpoints under `out` and deletes the older ones (keep <= 0:
 * keeps all). */
brg_status brg_ckpt_dir_prune(const char *out, int keep);

/* The checkpoint to resume from: the complete checkpoint-N under `dir` with the highest N, else
 * `dir` itself when it is a checkpoint folder (it holds trainer_state.json). `path` receives it.
 * An error says what was looked for when there is none. */
brg_status brg_ckpt_dir_find(const char *dir, char *path, size_t path_len);

/* Fails, naming what disagrees, unless the checkpoint folder has its model and its optimizer
 * state, trainer state and name (checkpoint-N) agree on the step. */
brg_status brg_ckpt_dir_check(const char *ckpt);

/* The step a checkpoint folder's name says (checkpoint-N), or -1 for any other name. */
int64_t brg_ckpt_dir_step_of(const char *path);

#endif
