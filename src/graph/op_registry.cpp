// OpRegistry lookup and the helpers op authors use: typed attrs, shape-rule assertions and the
// gradient-rule context.
#include "graph/op_registry.h"

#include <fmt/ranges.h>

#include "core/strings.h"

namespace surogate::graph {

// ---- Attrs ---------------------------------------------------------------------------------

const nlohmann::json& Attrs::lookup(const std::string& key) const {
  if (!attrs_.is_object() || !attrs_.contains(key)) fail_user("{}: missing attribute '{}'", where_, key);
  return attrs_.at(key);
}

double Attrs::number(const std::string& key) const {
  const auto& value = lookup(key);
  if (!value.is_number()) fail_user("{}: attribute '{}' must be a number, got {}", where_, key, value.dump());
  return value.get<double>();
}

double Attrs::number_or(const std::string& key, double fallback) const {
  return has(key) ? number(key) : fallback;
}

int64_t Attrs::integer(const std::string& key) const {
  const auto& value = lookup(key);
  if (!value.is_number_integer()) fail_user("{}: attribute '{}' must be an integer, got {}", where_, key, value.dump());
  return value.get<int64_t>();
}

int64_t Attrs::integer_or(const std::string& key, int64_t fallback) const {
  return has(key) ? integer(key) : fallback;
}

bool Attrs::boolean_or(const std::string& key, bool fallback) const {
  if (!has(key)) return fallback;
  const auto& value = lookup(key);
  if (!value.is_boolean()) fail_user("{}: attribute '{}' must be true or false, got {}", where_, key, value.dump());
  return value.get<bool>();
}

std::string Attrs::string(const std::string& key) const {
  const auto& value = lookup(key);
  if (!value.is_string()) fail_user("{}: attribute '{}' must be a string, got {}", where_, key, value.dump());
  return value.get<std::string>();
}

std::string Attrs::string_or(const std::string& key, const std::string& fallback) const {
  return has(key) ? string(key) : fallback;
}

std::vector<int64_t> Attrs::integers(const std::string& key) const {
  const auto& value = lookup(key);
  std::vector<int64_t> result;
  if (value.is_array()) {
    for (const auto& item : value) {
      if (!item.is_number_integer()) break;
      result.push_back(item.get<int64_t>());
    }
    if (result.size() == value.size()) return result;
  }
  fail_user("{}: attribute '{}' must be a list of integers, got {}", where_, key, value.dump());
}

// ---- InferContext --------------------------------------------------------------------------

const TensorType& InferContext::input(size_t index) const {
  SUROGATE_CHECK(index < inputs_.size(), "{}: shape rule asked for input {} of {}", where_, index, inputs_.size());
  return inputs_[index];
}

std::string InferContext::input_label(size_t index) const {
  std::string name = index < input_names_.size() ? input_names_[index] : fmt::format("input{}", index);
  return fmt::format("input {} ('{}', {})", index, name, format_type(input(index)));
}

void InferContext::expect_rank(size_t index, size_t rank) const {
  if (input(index).shape.size() != rank) fail("{} must have rank {}", input_label(index), rank);
}

void InferContext::expect_min_rank(size_t index, size_t rank) const {
  if (input(index).shape.size() < rank) fail("{} must have rank {} or more", input_label(index), rank);
}

void InferContext::expect_dtype(size_t index, DType dtype) const {
  if (input(index).dtype != dtype) fail("{} must be {}", input_label(index), dtype_safetensors_name(dtype));
}

void InferContext::expect_floating(size_t index) const {
  if (!dtype_is_floating(input(index).dtype)) fail("{} must be a floating-point tensor", input_label(index));
}

void InferContext::expect_integer(size_t index) const {
  DType dtype = input(index).dtype;
  if (dtype != DType::I32 && dtype != DType::I64) fail("{} must be an I32 or I64 tensor", input_label(index));
}

void InferContext::expect_same_type(size_t first, size_t second) const {
  if (input(first) != input(second)) fail("{} and {} must have the same dtype and shape", input_label(first), input_label(second));
}

void InferContext::expect_dim(size_t index, int dim, int64_t size) const {
  const Shape& shape = input(index).shape;
  int rank = static_cast<int>(shape.size());
  int position = dim < 0 ? dim + rank : dim;
  if (position < 0 || position >= rank) fail("{} has no dimension {}", input_label(index), dim);
  if (shape[static_cast<size_t>(position)] != size) {
    fail("{}: dimension {} must be {}, got {}", input_label(index), dim, size, shape[static_cast<size_t>(position)]);
  }
}

// ---- GradientContext -----------------------------------------------------------------------

GradientContext::GradientContext(GraphBuilder& builder, Node forward_node,
                                 std::vector<std::optional<TensorId>> output_grads, std::vector<bool> needs_input_grad,
                                 TakePendingGrad take_pending)
    : builder(builder),
      node_(std::move(forward_node)),
      attrs_(node_.attrs, fmt::format("node '{}' (op {})", node_.name, node_.op)),
      output_grads_(std::move(output_grads)),
      needs_input_grad_(std::move(needs_input_grad)),
      take_pending_(std::move(take_pending)),
      taken_pending_(node_.inputs.size(), false) {
  SUROGATE_CHECK(output_grads_.size() == node_.outputs.size(), "one output gradient slot per output");
  SUROGATE_CHECK(needs_input_grad_.size() == node_.inputs.size(), "one needs-grad flag per input");
}

TensorId GradientContext::input(size_t index) const {
  SUROGATE_CHECK(index < node_.inputs.size(), "{}: gradient rule asked for input {}", node_.op, index);
  return node_.inputs[index];
}

TensorId GradientContext::output(size_t index) const {
  SUROGATE_CHECK(index < node_.outputs.size(), "{}: gradient rule asked for output {}", node_.op, index);
  return node_.outputs[index];
}

bool GradientContext::has_output_grad(size_t index) const {
  SUROGATE_CHECK(index < output_grads_.size(), "{}: gradient rule asked for output grad {}", node_.op, index);
  return output_grads_[index].has_value();
}

bool GradientContext::output_grad_is_one(size_t index) const {
  if (!has_output_grad(index)) return false;
  const NodeId producer = builder.graph().tensor(*output_grads_[index]).producer;
  if (producer == kNoNode) return false;
  const Node& node = builder.graph().nodes[static_cast<size_t>(producer)];
  return node.op == "fill" && node.attrs.contains("value") && node.attrs.at("value").is_number() &&
         node.attrs.at("value").get<double>() == 1.0;
}

TensorId GradientContext::output_grad(size_t index) {
  if (!has_output_grad(index)) output_grads_[index] = zeros(type(output(index)));
  return *output_grads_[index];
}

bool GradientContext::needs_input_grad(size_t index) const {
  SUROGATE_CHECK(index < needs_input_grad_.size(), "{}: gradient rule asked about input {}", node_.op, index);
  return needs_input_grad_[index];
}

std::optional<TensorId> GradientContext::take_pending_input_grad(size_t index) {
  if (!needs_input_grad(index) || !take_pending_) return std::nullopt;
  std::optional<TensorId> pending = take_pending_(input(index));
  if (pending) taken_pending_[index] = true;
  return pending;
}

OpOutputs GradientContext::op(const std::string& op_name, std::vector<TensorId> inputs, nlohmann::json attrs,
                              const std::string& name) {
  return builder.op(op_name, std::move(inputs), std::move(attrs), name);
}

TensorId GradientContext::zeros(const TensorType& type) {
  nlohmann::json attrs = {{"value", 0.0}, {"shape", type.shape}, {"dtype", std::string(dtype_safetensors_name(type.dtype))}};
  return builder.op("fill", {}, std::move(attrs), "zeros");
}

// ---- OpRegistry ----------------------------------------------------------------------------

void OpRegistry::add(OpDef def) {
  SUROGATE_CHECK(!def.name.empty(), "an op needs a name");
  SUROGATE_CHECK(static_cast<bool>(def.infer), "op '{}' has no shape rule", def.name);
  SUROGATE_CHECK(!ops_.contains(def.name), "op '{}' registered twice", def.name);
  std::string name = def.name;
  ops_.emplace(std::move(name), std::move(def));
}

const OpDef* OpRegistry::find(std::string_view name) const {
  auto found = ops_.find(name);
  return found == ops_.end() ? nullptr : &found->second;
}

const OpDef& OpRegistry::get(std::string_view name) const {
  if (const OpDef* def = find(name)) return *def;
  auto suggestion = closest_match(name, names());
  if (suggestion) fail_user("unknown op '{}' (did you mean '{}'?)", name, *suggestion);
  fail_user("unknown op '{}' ({} ops are registered)", name, ops_.size());
}

std::vector<std::string> OpRegistry::names() const {
  std::vector<std::string> result;
  for (const auto& [name, def] : ops_) result.push_back(name);
  return result;
}

std::vector<TensorType> OpRegistry::infer(const std::string& op, const std::string& where,
                                          std::span<const TensorType> inputs, const nlohmann::json& attrs) const {
  const OpDef& def = get(op);
  if (!def.variadic_inputs && inputs.size() != def.inputs.size()) {
    fail_user("{}: takes {} inputs ({}), got {}", where, def.inputs.size(), fmt::join(def.inputs, ", "), inputs.size());
  }
  if (!attrs.is_object()) fail_user("{}: attrs must be a JSON object, got {}", where, attrs.dump());
  InferContext context(op, where, inputs, def.inputs, attrs);
  std::vector<TensorType> outputs = def.infer(context);
  SUROGATE_CHECK(!outputs.empty(), "{}: shape rule returned no outputs", where);
  for (const auto& output : outputs) {
    for (int64_t dim : output.shape) SUROGATE_CHECK(dim > 0, "{}: shape rule returned {}", where, format_type(output));
  }
  return outputs;
}

}  // namespace surogate::graph
