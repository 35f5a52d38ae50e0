/* brigade: train and run Hugging Face transformers pipelined and replicated across devices. */
#ifndef BRIGADE_H
#define BRIGADE_H

#include "brigade/status.h"
#include "brigade/arena.h"
#include "brigade/tensor.h"
#include "brigade/safetensors.h"
#include "brigade/checkpoint.h"

#endif
