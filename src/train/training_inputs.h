// What a training job checks before it starts, shared by `surogate sft|pt` (cli/command_train.cpp)
// and the Python package's surogate.train (python/bindings): the model folder (a hub id is
// resolved through the Hugging Face cache and config.model becomes the local snapshot), its
// config.json, every dataset path, the output folders, and the model_definition file. Each
// problem is one UserError naming the configuration key.
#pragma once

#include "config/config.h"

namespace surogate::train {

// `pretraining`: `surogate pt` (every dataset must be type: text).
void prepare_training_inputs(Config& config, bool pretraining);

// What training reads before it tokenizes: sequence_len / max_length against the model, the
// tokenizer files, the chat template, and that the tokenizer fits the model's vocabulary
// (data/vocabulary_check.h). Training itself does the same in the data pipeline; the dry run
// calls it up front.
void validate_text_tools(const Config& config);

}  // namespace surogate::train
