// Autodiff: which tensors need gradients, then the per-op rules in reverse order, summing
// fan-out contributions (or handing the partial sum to a rule that folds it into its own
// kernel) and accumulating into persistent parameter gradients.
#include "compiler/autodiff.h"

#include <algorithm>

#include "core/error.h"

namespace surogate::compiler {
namespace {

using namespace surogate::graph;

// Forward: does the tensor depend on a trainable parameter? Backward: does it reach the loss?
struct Reachability {
  std::vector<bool> depends_on_trainable;
  std::vector<bool> reaches_loss;
};

Reachability analyse(const Graph& graph, TensorId loss) {
  Reachability reach{std::vector<bool>(graph.tensors.size(), false), std::vector<bool>(graph.tensors.size(), false)};
  for (TensorId id : graph.parameters) {
    reach.depends_on_trainable[static_cast<size_t>(id)] = graph.tensor(id).trainable;
  }
  for (const Node& node : graph.nodes) {
    bool any = false;
    for (TensorId input : node.inputs) any = any || reach.depends_on_trainable[static_cast<size_t>(input)];
    for (TensorId output : node.outputs) reach.depends_on_trainable[static_cast<size_t>(output)] = any;
  }
  reach.reaches_loss[static_cast<size_t>(loss)] = true;
  for (auto node = graph.nodes.rbegin(); node != graph.nodes.rend(); ++node) {
    bool any = false;
    for (TensorId output : node->outputs) any = any || reach.reaches_loss[static_cast<size_t>(output)];
    if (!any) continue;
    for (TensorId input : node->inputs) reach.reaches_loss[static_cast<size_t>(input)] = true;
  }
  return reach;
}

class GradientTable {
public:
  explicit GradientTable(size_t tensor_count) : contributions_(tensor_count) {}

  void add(TensorId tensor, TensorId gradient) { contributions_[static_cast<size_t>(tensor)].push_back(gradient); }

  // The summed gradient of `tensor`, emitting add nodes the first time several contributions meet.
  std::optional<TensorId> total(GraphBuilder& builder, TensorId tensor) {
    auto& list = contributions_[static_cast<size_t>(tensor)];
    if (list.empty()) return std::nullopt;
    while (list.size() > 1) {
      std::string name = "grad." + builder.tensor(tensor).name + ".sum";
      TensorId sum = builder.op("add", {list[0], list[1]}, nlohmann::json::object(), name);
      list.erase(list.begin(), list.begin() + 2);
      list.insert(list.begin(), sum);
    }
    return list.front();
  }

  // total(), and the tensor's list emptied: a gradient rule folds the sum into its own output
  // (GradientContext::take_pending_input_grad) and contributes that instead.
  std::optional<TensorId> take(GraphBuilder& builder, TensorId tensor) {
    std::optional<TensorId> sum = total(builder, tensor);
    contributions_[static_cast<size_t>(tensor)].clear();
    return sum;
  }

private:
  std::vector<std::vector<TensorId>> contributions_;
};

void check_loss(const Graph& graph, TensorId loss) {
  if (loss < 0 || static_cast<size_t>(loss) >= graph.tensors.size()) fail_user("autodiff: the loss tensor id {} does not exist", loss);
  const TensorInfo& info = graph.tensor(loss);
  if (info.type.numel() != 1 || !dtype_is_floating(info.type.dtype)) {
    fail_user("autodiff: the loss '{}' must be a floating tensor with one element, it is {}", info.name, format_type(info.type));
  }
  if (info.producer == kNoNode) fail_user("autodiff: the loss '{}' is not computed by the graph", info.name);
}

void differentiate_node(GraphBuilder& builder, GradientTable& table, const Reachability& reach, NodeId node_id,
                        const OpRegistry& registry) {
  Node node = builder.graph().node(node_id);  // a copy: the builder's node table grows below
  std::vector<std::optional<TensorId>> output_grads;
  bool any_output_grad = false;
  for (TensorId output : node.outputs) {
    output_grads.push_back(table.total(builder, output));
    any_output_grad = any_output_grad || output_grads.back().has_value();
  }
  std::vector<bool> needs;
  bool any_needed = false;
  for (TensorId input : node.inputs) {
    const TensorInfo& info = builder.tensor(input);
    bool needed = reach.depends_on_trainable[static_cast<size_t>(input)] && dtype_is_floating(info.type.dtype);
    needs.push_back(needed);
    any_needed = any_needed || needed;
  }
  if (!any_output_grad || !any_needed) return;

  const OpDef& def = registry.get(node.op);
  if (!def.gradient) {
    fail_user("autodiff: node '{}' (op {}) has no gradient rule, but the loss depends on a trainable parameter through it",
              node.name, node.op);
  }
  auto scope = builder.scope("grad." + node.name);
  GradientContext context(builder, node, std::move(output_grads), needs,
                          [&](TensorId input) { return table.take(builder, input); });
  InputGradients gradients = def.gradient(context);
  SUROGATE_CHECK(gradients.size() == node.inputs.size(), "gradient rule of op '{}' returned {} gradients for {} inputs",
                 node.op, gradients.size(), node.inputs.size());
  for (size_t i = 0; i < gradients.size(); ++i) {
    SUROGATE_CHECK(!context.taken_pending()[i] || gradients[i].has_value(),
                   "gradient rule of op '{}' (node '{}') took input {}'s pending gradient but returned none", node.op,
                   node.name, i);
    if (!gradients[i] || !needs[i]) continue;
    const TensorType& expected = builder.type(node.inputs[i]);
    const TensorType& actual = builder.type(*gradients[i]);
    SUROGATE_CHECK(expected == actual, "gradient rule of op '{}' (node '{}') gives input {} a gradient of type {}, expected {}",
                   node.op, node.name, i, format_type(actual), format_type(expected));
    table.add(node.inputs[i], *gradients[i]);
  }
}

bool is_read(const Graph& graph, TensorId id) {
  for (const Node& node : graph.nodes) {
    if (std::find(node.inputs.begin(), node.inputs.end(), id) != node.inputs.end()) return true;
  }
  return false;
}

// Ops whose output `output` is a weight gradient, and their forms that add it into the persistent
// gradient instead (a matmul with beta = 1, or the fused low-rank kernel's final pass).
struct AccumulatingForm {
  const char* op;
  const char* accumulating_op;
  size_t output;
};
constexpr AccumulatingForm kAccumulatingForms[] = {
    {"linear_backward_weight", "linear_backward_weight_accumulate", 0},
    {"linear_backward_low_rank", "linear_backward_low_rank_accumulate", 1},
    {"linear_fp8_backward", "linear_fp8_backward_accumulate", 1},  // fp8_hybrid's trained weights
    {"expert_linear_backward_weight", "expert_linear_backward_weight_accumulate", 0},
};

// The persistent gradient `name` of a parameter whose total gradient this micro-batch is
// `gradient`. In low-precision graphs a gradient that is one weight product read by nothing else
// (LoRA's A and B) is written into the persistent gradient by its producer, turned into its
// accumulating form: no temporary, no accumulate pass. Otherwise an accumulate node adds the
// temporary in. F32 / F64 graphs always take the accumulate node, so the CPU reference keeps its
// summation order.
TensorId accumulate_into_gradient(GraphBuilder& builder, const OpRegistry& registry, TensorId gradient,
                                  const std::string& name) {
  Graph& graph = builder.mutable_graph();
  const DType dtype = graph.tensor(gradient).type.dtype;
  const NodeId producer = graph.tensor(gradient).producer;
  if (dtype != DType::F32 && dtype != DType::F64 && producer != kNoNode && !is_read(graph, gradient)) {
    Node& node = graph.nodes[static_cast<size_t>(producer)];
    for (const AccumulatingForm& form : kAccumulatingForms) {
      if (node.op != form.op || node.phase != NodePhase::Backward || node.outputs.size() <= form.output ||
          node.outputs[form.output] != gradient || registry.find(form.accumulating_op) == nullptr) {
        continue;
      }
      node.op = form.accumulating_op;
      graph.rename_tensor(gradient, name);
      graph.tensor(gradient).role = TensorRole::Gradient;
      return gradient;
    }
  }
  TensorId persistent = builder.op("accumulate", {gradient}, nlohmann::json::object(), name);
  builder.mutable_graph().tensor(persistent).role = TensorRole::Gradient;
  return persistent;
}

}  // namespace

TrainingGraph build_training_graph(Graph forward, TensorId loss, const OpRegistry& registry) {
  check_loss(forward, loss);
  Reachability reach = analyse(forward, loss);
  TrainingGraph result;
  result.loss = loss;
  result.forward_node_count = forward.nodes.size();
  const size_t forward_tensor_count = forward.tensors.size();
  std::vector<TensorId> parameters = forward.parameters;

  GraphBuilder builder(registry, std::move(forward));
  builder.set_phase(NodePhase::Backward);
  GradientTable table(forward_tensor_count);
  const TensorInfo& loss_info = builder.tensor(loss);
  nlohmann::json seed_attrs = {{"value", 1.0},
                               {"shape", loss_info.type.shape},
                               {"dtype", std::string(dtype_safetensors_name(loss_info.type.dtype))}};
  table.add(loss, builder.op("fill", {}, seed_attrs, "grad." + loss_info.name));

  // A parameter's gradient is complete once its earliest consumer has been differentiated: its
  // accumulate node goes right there, so the temporary dP dies at once instead of living to the
  // end of backward.
  std::vector<std::vector<TensorId>> complete_after(result.forward_node_count);
  for (TensorId parameter : parameters) {
    if (!builder.tensor(parameter).trainable || !reach.reaches_loss[static_cast<size_t>(parameter)]) continue;
    for (size_t n = 0; n < result.forward_node_count; ++n) {
      const auto& inputs = builder.graph().nodes[n].inputs;
      if (std::find(inputs.begin(), inputs.end(), parameter) != inputs.end()) {
        complete_after[n].push_back(parameter);
        break;
      }
    }
  }
  for (auto node_id = static_cast<NodeId>(result.forward_node_count) - 1; node_id >= 0; --node_id) {
    differentiate_node(builder, table, reach, node_id, registry);
    for (TensorId parameter : complete_after[static_cast<size_t>(node_id)]) {
      std::string name = builder.tensor(parameter).name + ".grad";
      std::optional<TensorId> gradient = table.total(builder, parameter);  // may grow the tensor table
      if (!gradient) continue;
      result.parameter_gradients.emplace(parameter, accumulate_into_gradient(builder, registry, *gradient, name));
    }
  }
  result.graph = builder.finish();
  if (!result.graph.is_output(loss)) result.graph.outputs.push_back(loss);
  return result;
}

}  // namespace surogate::compiler
