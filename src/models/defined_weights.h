// A model definition's own weight table. The Python DSL writes, beside the graph of its JSON IR
// file, "checkpoint_names": {engine parameter name: checkpoint tensor name} for every parameter
// (graph/json_ir.h ignores the key). When the file has it, those names and the parameters' shapes
// in the file replace the architecture's C++ table (models/model_spec.h): the checkpoint is read
// and written back under the definition's names, so any layout a graph can split or view (fused
// query_key_value, gate_up_proj, LayerNorm biases, another prefix) loads as it is stored. A name
// holding "{expert}" is a stack of per-expert tensors along dimension 0, as in the built-in table.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "io/model_config.h"
#include "models/model_definition.h"

namespace surogate::models {

inline constexpr const char* kCheckpointNamesKey = "checkpoint_names";

// The table of `ir_file` (empty when the file has no checkpoint_names, or is not a JSON object:
// the IR importer reports that). UserErrors name `source`
// and the parameter: a parameter without a name, a name for no parameter, a name used twice.
std::vector<io::DefinedParameter> read_checkpoint_names(const std::filesystem::path& ir_file,
                                                        const std::string& source);

// config.json of `model_dir`, with the definition's weight table when it declares one. Otherwise
// the architecture's C++ table applies, and parameter_specs refuses an architecture without one.
io::ModelConfig load_model_config(const std::filesystem::path& model_dir, const ModelDefinition& definition);

}  // namespace surogate::models
