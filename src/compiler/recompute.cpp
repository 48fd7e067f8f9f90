// Recompute planning: rewires backward reads of recomputable forward activations to copies of
// their producers emitted just before first use (see recompute.h).
#include "compiler/recompute.h"

#include <unordered_map>

#include "core/error.h"

namespace surogate::compiler {
namespace {

using namespace surogate::graph;

// fused_residual_rmsnorm (out, residual_out, rstd) = (norm, residual stream, rstd). Its
// residual_out is never recomputed: it is the residual stream, the checkpoint between blocks
// (recomputing it would need the block's output and recurse through every earlier layer). Its
// out and rstd are recomputed by a plain rmsnorm of the kept residual_out, which both backends
// compute bit for bit as the fused op does (both normalise the stored, rounded residual_out).
// Its fp8_hybrid form (models/fp8_fusion.h), which also quantizes out with the state (its last
// input) into two more outputs, is recomputed the same way by rmsnorm_fp8.
constexpr std::string_view kFusedResidualNorm = "fused_residual_rmsnorm";
constexpr std::string_view kFusedResidualNormFp8 = "fused_residual_rmsnorm_fp8";

bool is_fused_residual_norm(const Node& node) { return node.op == kFusedResidualNorm || node.op == kFusedResidualNormFp8; }

// ln2 of a decoder layer (models/decoder_graph.cpp names it "layers.N.ln2"): the fused add + norm
// inside a block, whose residual_out block_inputs_only recomputes. The others (the next layer's
// ln1, final_norm) write the stream between blocks, which stays.
bool is_block_middle(const Node& node) {
  return is_fused_residual_norm(node) && layer_of(node) >= 0 && std::string_view(node.name).ends_with(".ln2");
}

class Recomputer {
public:
  Recomputer(const Graph& source, const RecomputePolicy& policy) : source_(source), policy_(policy) {
    for (TensorInfo info : source.tensors) {
      info.producer = kNoNode;
      result_.add_tensor(std::move(info));
    }
    result_.inputs = source.inputs;
    result_.parameters = source.parameters;
    result_.outputs = source.outputs;
  }

  Graph run(size_t& recomputed_nodes) {
    for (const Node& node : source_.nodes) {
      if (node.phase == NodePhase::Forward) {
        result_.add_node(node);
        continue;
      }
      Node rewired = node;
      for (TensorId& input : rewired.inputs) input = resolve(input);
      result_.add_node(std::move(rewired));
    }
    recomputed_nodes = recomputed_;
    return std::move(result_);
  }

private:
  bool is_recomputable(TensorId id) const {
    const TensorInfo& info = source_.tensor(id);
    if (info.role != TensorRole::Activation || info.producer == kNoNode || source_.is_output(id)) return false;
    const Node& producer = source_.node(info.producer);
    if (is_checkpoint(source_, id) && !recomputes_block_middle(producer)) return false;
    return producer.phase == NodePhase::Forward && policy_.recomputes(producer.recompute_group) &&
           !policy_.keeps_outputs_of(producer);
  }

  // block_inputs_only: ln2's whole fused node (its residual_out included) is re-run.
  bool recomputes_block_middle(const Node& producer) const {
    return policy_.block_inputs_only && policy_.block && is_block_middle(producer);
  }

  // The tensor a backward (or recompute) node should read in place of forward tensor `id`.
  TensorId resolve(TensorId id) {
    if (!is_recomputable(id)) return id;
    if (auto found = copies_.find(id); found != copies_.end()) return found->second;
    const Node& producer = source_.node(source_.tensor(id).producer);
    Node copy = producer;
    if (recomputes_block_middle(producer)) {
      // The fused node as it is: its inputs (the block's input, the attention half's output, the
      // weight) resolve to the kept stream and recomputed copies.
    } else if (producer.op == kFusedResidualNorm) {
      copy.op = "rmsnorm";
      copy.inputs = {producer.outputs[1], producer.inputs[2]};
      copy.outputs = {producer.outputs[0], producer.outputs[2]};
    } else if (producer.op == kFusedResidualNormFp8) {
      copy.op = "rmsnorm_fp8";
      copy.inputs = {producer.outputs[1], producer.inputs[2], producer.inputs[3]};
      copy.outputs = {producer.outputs[0], producer.outputs[2], producer.outputs[3], producer.outputs[4]};
    }
    copy.phase = NodePhase::Recompute;
    copy.name = unique("recompute." + producer.name);
    for (TensorId& input : copy.inputs) input = resolve(input);
    for (TensorId& output : copy.outputs) {
      TensorInfo info = source_.tensor(output);
      info.name = unique("recompute." + info.name);
      info.producer = kNoNode;
      TensorId fresh = result_.add_tensor(std::move(info));
      copies_.emplace(output, fresh);
      output = fresh;
    }
    result_.add_node(std::move(copy));
    ++recomputed_;
    return copies_.at(id);
  }

  std::string unique(const std::string& base) const { return unique_tensor_name(result_, base); }

  const Graph& source_;
  const RecomputePolicy& policy_;
  Graph result_;
  std::unordered_map<TensorId, TensorId> copies_;
  size_t recomputed_ = 0;
};

}  // namespace

bool RecomputePolicy::recomputes(std::string_view group) const {
  if (group.empty()) return false;
  // A quantized weight's dequantized copy (models/qlora.h) is rebuilt for backward under every
  // policy: keeping it would hold a full-precision copy of the weights.
  if (group == "dequant") return true;
  if (group == "rmsnorm") return rmsnorm || block;
  if (group == "qkv") return qkv || att || block;
  if (group == "att") return att || block;
  if (group == "swiglu") return swiglu || ffn || block;
  if (group == "ffn") return ffn || block;
  if (group == "block" || group.starts_with("block:")) return block;
  fail_user("unknown recompute group '{}' (expected rmsnorm, qkv, att, swiglu, ffn, block, block:<layer> or dequant)", group);
}

bool RecomputePolicy::keeps_outputs_of(const graph::Node& producer) const {
  if (keep_expensive_layers <= 0 && keep_all_layers <= 0 && keep_attention_layers <= 0) return false;
  const int64_t layer = layer_of(producer);
  if (layer < 0) return false;
  if (layer < keep_all_layers && producer.recompute_group != "dequant") return true;
  if (layer < keep_attention_layers && is_attention(producer.op)) return true;
  return layer < keep_expensive_layers && is_expensive_to_recompute(producer.op);
}

bool is_attention(std::string_view op) { return op == "attention" || op == "attention_fp8"; }

bool is_expensive_to_recompute(std::string_view op) {
  // linear_fp8 / attention_fp8: fp8_hybrid's products and its attention (models/fp8_recipe.h,
  // models/fp8_fusion.h), as expensive as the others.
  return op == "linear" || op == "linear_add" || op == "linear_fp8" || is_attention(op) || op == "expert_linear";
}

int64_t layer_of(const graph::Node& node) {
  constexpr std::string_view kPrefix = "layers.";
  std::string_view name = node.name;
  for (std::string_view phase : {"grad.", "recompute."}) {
    if (name.starts_with(phase)) name.remove_prefix(phase.size());
  }
  if (!name.starts_with(kPrefix)) return -1;
  name.remove_prefix(kPrefix.size());
  int64_t layer = 0;
  size_t digits = 0;
  while (digits < name.size() && name[digits] >= '0' && name[digits] <= '9') {
    layer = layer * 10 + (name[digits] - '0');
    ++digits;
  }
  return digits > 0 ? layer : -1;
}

std::string unique_tensor_name(const Graph& graph, const std::string& base) {
  if (!graph.find_tensor(base)) return base;
  for (int suffix = 2;; ++suffix) {
    std::string candidate = base + "." + std::to_string(suffix);
    if (!graph.find_tensor(candidate)) return candidate;
  }
}

bool is_checkpoint(const Graph& graph, TensorId id) {
  const TensorInfo& info = graph.tensor(id);
  if (info.role != TensorRole::Activation || info.producer == kNoNode) return false;
  const Node& producer = graph.node(info.producer);
  if (producer.phase != NodePhase::Forward) return false;
  return producer.recompute_group.empty() || (is_fused_residual_norm(producer) && id == producer.outputs[1]);
}

RecomputeResult apply_recompute(const Graph& training_graph, const RecomputePolicy& policy) {
  RecomputeResult result;
  Recomputer recomputer(training_graph, policy);
  result.graph = recomputer.run(result.recomputed_nodes);
  return result;
}

}  // namespace surogate::compiler
