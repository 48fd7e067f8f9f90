// JSON IR export and import (format in json_ir.h and docs/architecture.md).
#include "graph/json_ir.h"

#include <fstream>

#include "graph/verifier.h"

namespace surogate::graph {
namespace {

using nlohmann::json;

std::vector<std::string> names_of(const Graph& graph, const std::vector<TensorId>& ids) {
  std::vector<std::string> names;
  for (TensorId id : ids) names.push_back(graph.tensor(id).name);
  return names;
}

// Structural access to one JSON value, with `where` naming it in every error.
const json& member(const json& object, const char* key, const std::string& where) {
  if (!object.is_object()) fail_user("JSON IR: {} must be an object", where);
  if (!object.contains(key)) fail_user("JSON IR: {} has no \"{}\"", where, key);
  return object.at(key);
}

std::string string_member(const json& object, const char* key, const std::string& where) {
  const json& value = member(object, key, where);
  if (!value.is_string()) fail_user("JSON IR: {}.{} must be a string, got {}", where, key, value.dump());
  return value.get<std::string>();
}

const json& array_member(const json& object, const char* key, const std::string& where) {
  const json& value = member(object, key, where);
  if (!value.is_array()) fail_user("JSON IR: {}.{} must be an array", where, key);
  return value;
}

std::vector<TensorId> resolve_names(const Graph& graph, const json& list, const std::string& where) {
  std::vector<TensorId> ids;
  for (size_t i = 0; i < list.size(); ++i) {
    if (!list[i].is_string()) fail_user("JSON IR: {}[{}] must be a tensor name (string)", where, i);
    auto id = graph.find_tensor(list[i].get<std::string>());
    if (!id) fail_user("JSON IR: {}[{}] names tensor '{}', which is not in \"tensors\"", where, i, list[i].get<std::string>());
    ids.push_back(*id);
  }
  return ids;
}

TensorInfo parse_tensor(const json& entry, size_t index) {
  std::string where = fmt::format("tensors[{}]", index);
  TensorInfo info;
  info.name = string_member(entry, "name", where);
  where = fmt::format("tensors[{}] ('{}')", index, info.name);
  std::string dtype = string_member(entry, "dtype", where);
  auto parsed_dtype = dtype_from_safetensors_name(dtype);
  if (!parsed_dtype) fail_user("JSON IR: {}: dtype '{}' is not one of F32, BF16, F16, F64, I32, I64, ...", where, dtype);
  info.type.dtype = *parsed_dtype;
  const json& shape = array_member(entry, "shape", where);
  for (const json& dim : shape) {
    if (!dim.is_number_integer() || dim.get<int64_t>() <= 0) {
      fail_user("JSON IR: {}: shape {} must list positive integers", where, shape.dump());
    }
    info.type.shape.push_back(dim.get<int64_t>());
  }
  std::string role = string_member(entry, "role", where);
  auto parsed_role = role_from_name(role);
  if (!parsed_role) fail_user("JSON IR: {}: role '{}' is not input, parameter, constant, activation or gradient", where, role);
  info.role = *parsed_role;
  if (entry.contains("trainable")) {
    if (!entry["trainable"].is_boolean()) fail_user("JSON IR: {}: trainable must be true or false", where);
    info.trainable = entry["trainable"].get<bool>();
  }
  return info;
}

Node parse_node(const Graph& graph, const json& entry, size_t index) {
  std::string where = fmt::format("nodes[{}]", index);
  Node node;
  node.name = string_member(entry, "name", where);
  where = fmt::format("nodes[{}] ('{}')", index, node.name);
  node.op = string_member(entry, "op", where);
  node.inputs = resolve_names(graph, array_member(entry, "inputs", where), where + ".inputs");
  node.outputs = resolve_names(graph, array_member(entry, "outputs", where), where + ".outputs");
  if (entry.contains("attrs")) {
    if (!entry["attrs"].is_object()) fail_user("JSON IR: {}.attrs must be an object", where);
    node.attrs = entry["attrs"];
  }
  if (entry.contains("recompute_group")) node.recompute_group = string_member(entry, "recompute_group", where);
  if (entry.contains("phase")) {
    std::string phase = string_member(entry, "phase", where);
    auto parsed = phase_from_name(phase);
    if (!parsed) fail_user("JSON IR: {}: phase '{}' is not forward, backward or recompute", where, phase);
    node.phase = *parsed;
  }
  for (TensorId output : node.outputs) {
    if (graph.tensor(output).producer != kNoNode) {
      fail_user("JSON IR: {}: output '{}' is already produced by nodes[{}]", where, graph.tensor(output).name,
                graph.tensor(output).producer);
    }
  }
  return node;
}

}  // namespace

json graph_to_json(const Graph& graph) {
  json tensors = json::array();
  for (const TensorInfo& info : graph.tensors) {
    json entry = {{"name", info.name},
                  {"dtype", std::string(dtype_safetensors_name(info.type.dtype))},
                  {"shape", info.type.shape},
                  {"role", std::string(role_name(info.role))}};
    if (info.role == TensorRole::Parameter) entry["trainable"] = info.trainable;
    tensors.push_back(std::move(entry));
  }
  json nodes = json::array();
  for (const Node& node : graph.nodes) {
    json entry = {{"name", node.name},
                  {"op", node.op},
                  {"inputs", names_of(graph, node.inputs)},
                  {"outputs", names_of(graph, node.outputs)},
                  {"attrs", node.attrs}};
    if (!node.recompute_group.empty()) entry["recompute_group"] = node.recompute_group;
    if (node.phase != NodePhase::Forward) entry["phase"] = std::string(phase_name(node.phase));
    nodes.push_back(std::move(entry));
  }
  return json{{"version", kJsonIrVersion},
              {"tensors", std::move(tensors)},
              {"nodes", std::move(nodes)},
              {"inputs", names_of(graph, graph.inputs)},
              {"parameters", names_of(graph, graph.parameters)},
              {"outputs", names_of(graph, graph.outputs)}};
}

Graph graph_from_json(const json& document, const OpRegistry& registry) {
  if (!document.is_object()) fail_user("JSON IR: the document must be a JSON object");
  const json& version = member(document, "version", "the document");
  if (!version.is_number_integer() || version.get<int>() != kJsonIrVersion) {
    fail_user("JSON IR: version {} is not supported (this build reads version {})", version.dump(), kJsonIrVersion);
  }
  Graph graph;
  const json& tensors = array_member(document, "tensors", "the document");
  for (size_t i = 0; i < tensors.size(); ++i) {
    TensorInfo info = parse_tensor(tensors[i], i);
    if (graph.find_tensor(info.name)) fail_user("JSON IR: tensors[{}]: the name '{}' is used twice", i, info.name);
    graph.add_tensor(std::move(info));
  }
  const json& nodes = array_member(document, "nodes", "the document");
  for (size_t i = 0; i < nodes.size(); ++i) graph.add_node(parse_node(graph, nodes[i], i));
  graph.inputs = resolve_names(graph, array_member(document, "inputs", "the document"), "inputs");
  graph.parameters = resolve_names(graph, array_member(document, "parameters", "the document"), "parameters");
  graph.outputs = resolve_names(graph, array_member(document, "outputs", "the document"), "outputs");
  verify_graph(graph, registry);
  return graph;
}

void save_json_ir(const Graph& graph, const std::filesystem::path& path) {
  std::ofstream out(path);
  if (!out) fail_user("cannot write JSON IR to '{}'", path.string());
  out << graph_to_json(graph).dump(1) << "\n";
  if (!out) fail_user("writing JSON IR to '{}' failed", path.string());
}

Graph load_json_ir(const std::filesystem::path& path, const OpRegistry& registry) {
  std::ifstream in(path);
  if (!in) fail_user("cannot open JSON IR file '{}'", path.string());
  json document = json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (document.is_discarded()) fail_user("'{}' is not valid JSON", path.string());
  try {
    return graph_from_json(document, registry);
  } catch (const UserError& error) {
    fail_user("{}: {}", path.string(), error.what());
  }
}

}  // namespace surogate::graph
