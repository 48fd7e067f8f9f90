// A model definition's weight table; see defined_weights.h.
#include "models/defined_weights.h"

#include <fstream>
#include <map>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "models/python_definition.h"

namespace surogate::models {

std::vector<io::DefinedParameter> read_checkpoint_names(const std::filesystem::path& ir_file,
                                                        const std::string& source) {
  std::ifstream stream(ir_file, std::ios::binary);
  if (!stream) fail_user("{}: cannot read '{}'", source, ir_file.string());
  const nlohmann::json document = nlohmann::json::parse(stream, nullptr, /*allow_exceptions=*/false);
  // A file that is no JSON object has no table; the IR importer (graph/json_ir.h) says what is wrong with it.
  if (document.is_discarded() || !document.is_object()) return {};
  auto names = document.find(kCheckpointNamesKey);
  if (names == document.end()) return {};
  if (!names->is_object()) fail_user("{}: \"{}\" must map parameter names to checkpoint names", source, kCheckpointNamesKey);
  // The graph's parameters and their shapes; the importer (graph/json_ir.h) has checked the rest.
  std::map<std::string, std::vector<int64_t>> shapes;
  for (const nlohmann::json& tensor : document.value("tensors", nlohmann::json::array())) {
    if (tensor.is_object() && tensor.value("role", "") == "parameter" && tensor.contains("shape")) {
      shapes[tensor.value("name", "")] = tensor["shape"].get<std::vector<int64_t>>();
    }
  }
  std::vector<io::DefinedParameter> table;
  std::set<std::string> parameters, used;
  for (const nlohmann::json& entry : document.value("parameters", nlohmann::json::array())) {
    const std::string name = entry.is_string() ? entry.get<std::string>() : "";
    parameters.insert(name);
    auto hf = names->find(name);
    if (hf == names->end() || !hf->is_string() || hf->get<std::string>().empty()) {
      fail_user("{}: parameter '{}' has no checkpoint name in \"{}\"; a definition that names its weights names "
                "every one (g.parameter(..., hf=...))", source, name, kCheckpointNamesKey);
    }
    if (!used.insert(hf->get<std::string>()).second) {
      fail_user("{}: checkpoint tensor '{}' is named for two parameters (the second: '{}')", source,
                hf->get<std::string>(), name);
    }
    table.push_back({name, hf->get<std::string>(), shapes[name]});
  }
  for (const auto& [name, hf] : names->items()) {
    if (!parameters.contains(name)) {
      fail_user("{}: \"{}\" names '{}' (checkpoint '{}'), which is not a parameter of the graph", source,
                kCheckpointNamesKey, name, hf.is_string() ? hf.get<std::string>() : hf.dump());
    }
  }
  return table;
}

io::ModelConfig load_model_config(const std::filesystem::path& model_dir, const ModelDefinition& definition) {
  io::ModelConfig config = io::load_model_config(model_dir);
  std::filesystem::path file = definition.ir_file;
  // The weight table does not depend on the shape: any small one compiles a Python definition.
  if (is_python_definition(file)) file = compile_python_definition(file, model_dir, 1, 8, 1, definition.source);
  // build_model_graph says what is wrong with a file that is missing.
  if (!file.empty() && std::filesystem::is_regular_file(file)) {
    config.defined_parameters = read_checkpoint_names(file, definition.source);
  }
  return config;
}

}  // namespace surogate::models
