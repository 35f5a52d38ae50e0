/* brigade: train and run Hugging Face transformers pipelined and replicated across devices. */
#ifndef BRIGADE_H
#define BRIGADE_H

#include "brigade/status.h"
#include "brigade/arena.h"
#include "brigade/tensor.h"
#include "brigade/rng.h"
#include "brigade/safetensors.h"
#include "brigade/checkpoint.h"
#include "brigade/tape.h"
#include "brigade/ops.h"
#include "brigade/model.h"
#include "brigade/inputs.h"
#include "brigade/gpt2.h"
#include "brigade/ipu_config.h"
#include "brigade/placement.h"
#include "brigade/registry.h"
#include "brigade/optim.h"
#include "brigade/lr_schedule.h"
#include "brigade/t5.h"
#include "brigade/encoder.h"
#include "brigade/bert.h"
#include "brigade/vit.h"
#include "brigade/tokenizer.h"
#include "brigade/sentence_embedding.h"
#include "brigade/version.h"
#include "brigade/dataset.h"
#include "brigade/schedule.h"
#include "brigade/runtime.h"
#include "brigade/trainer.h"
#include "brigade/generate.h"

#endif
