// Builds the decoder forward graph; see decoder_graph.h.
#include "models/decoder_graph.h"

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "core/error.h"
#include "graph/builder.h"
#include "models/model_spec.h"
#include "models/moe_block.h"
#include "ops/rope.h"

namespace surogate::models {
namespace {
using graph::GraphBuilder;
using graph::TensorId;

struct Parameters {
  GraphBuilder& builder;
  std::map<std::string, graph::TensorId> ids;
  TensorId get(const std::string& name) const { return ids.at(name); }
  bool has(const std::string& name) const { return ids.contains(name); }
};

TensorId projection(GraphBuilder& b, const Parameters& p, TensorId x, const std::string& prefix, const std::string& label) {
  std::vector<TensorId> inputs{x, p.get(prefix + ".weight")};
  if (p.has(prefix + ".bias")) inputs.push_back(p.get(prefix + ".bias"));
  return b.op("linear", inputs, nlohmann::json::object(), label);
}

}  // namespace

DecoderGraph build_decoder_graph(const io::ModelConfig& config, const graph::OpRegistry& registry,
                                 const DecoderGraphOptions& options) {
  io::require_builtin_support(config);
  if (config.architecture == io::Architecture::Olmo2) {
    fail_user("config.json: {} has no built-in graph (its norms follow each half of the block); train it from "
              "its Python definition: model_definition: examples/dsl/olmo2.py (docs/models.md)",
              io::architecture_class_name(config.architecture));
  }
  GraphBuilder b(registry);
  const graph::Shape tokens{options.batch, options.sequence};
  TensorId input_ids = b.input("input_ids", DType::I32, tokens);
  const bool mrope = !options.mrope_section.empty();
  if (mrope && (options.fused_rope || (config.qk_norm && config.architecture != io::Architecture::Qwen3))) {
    fail_user("config.json: M-RoPE (mrope_section) is built for rope tables (not use_fused_rope) and per-head q/k norms");
  }
  TensorId position_ids = b.input("position_ids", DType::I32,
                                  mrope ? graph::Shape{3, options.batch, options.sequence} : tokens);
  TensorId document_ids = b.input("document_ids", DType::I32, tokens);
  TensorId targets = b.input("targets", DType::I32, tokens);
  TensorId loss_scale = b.input("loss_scale", DType::F32, {});
  std::optional<TensorId> loss_weights;
  if (options.token_weights) loss_weights = b.input("loss_weights", DType::F32, tokens);

  Parameters params{b, {}};
  for (const models::ParameterSpec& spec : models::parameter_specs(config)) {
    params.ids[spec.name] = b.parameter(spec.name, options.dtype, spec.shape, true);
  }

  const double eps = config.rms_norm_eps;
  const int64_t head_dim = config.head_dim, q_heads = config.num_attention_heads, kv_heads = config.num_key_value_heads;
  ops::RopeFrequencies<float> frequencies = ops::rope_frequencies<float>(config.rope, options.sequence);
  nlohmann::json rope_attrs{{"inv_freq", std::vector<double>(frequencies.inverse_frequency.begin(),
                                                             frequencies.inverse_frequency.end())},
                            {"attention_scaling", frequencies.attention_scaling},
                            {"dtype", std::string(dtype_safetensors_name(options.dtype))}};
  // Qwen3 (q/k norm) rotates inside fused_rmsnorm_rope, from the same frequencies and the
  // position ids; the other models read cos/sin tables, or with fused_rope compute them inside.
  TensorId cos = graph::kNoTensor, sin = graph::kNoTensor;
  if (mrope || (!config.qk_norm && !options.fused_rope)) {
    nlohmann::json table_attrs = rope_attrs;
    if (mrope) table_attrs["mrope_section"] = options.mrope_section;
    if (mrope && options.mrope_interleaved) table_attrs["mrope_interleaved"] = true;
    auto tables = b.op(mrope ? "mrope_cos_sin" : "rope_cos_sin", {position_ids}, table_attrs, "rope");
    cos = tables[0];
    sin = tables[1];
  }
  auto fused_rope_attrs = [&](int64_t heads) {
    return nlohmann::json{{"heads", heads}, {"head_dim", head_dim}, {"inv_freq", rope_attrs["inv_freq"]},
                          {"attention_scaling", rope_attrs["attention_scaling"]}};
  };
  auto norm_rope_attrs = [&](int64_t heads) {
    return nlohmann::json{{"heads", heads}, {"head_dim", head_dim}, {"eps", eps},
                          {"inv_freq", rope_attrs["inv_freq"]}, {"attention_scaling", rope_attrs["attention_scaling"]}};
  };

  // The residual stream. Each block's output is added to it by the norm that reads the sum (ln2,
  // the next layer's ln1, final_norm) in one fused_residual_rmsnorm, whose first output is the
  // normalised tensor (named as the norm: "layers.N.ln2") and second the new stream
  // ("layers.N.ln2.residual_out"). `pending` is the block output not yet added (none before the
  // first layer's ln1, which is a plain rmsnorm of the embeddings).
  TensorId hidden = b.op("embedding", {input_ids, params.get("embed.weight")}, nlohmann::json::object(), "embed");
  if (options.splice_embeddings) hidden = options.splice_embeddings(b, hidden);
  TensorId pending = graph::kNoTensor;
  // The load-balancing loss of training graphs (models/moe_block.h).
  std::optional<RouterLoss> router_loss;
  if (config.moe && config.moe->output_router_logits && options.router_aux_loss_micro_batches > 0) router_loss.emplace();
  auto add_and_norm = [&](const std::string& weight, const std::string& label) -> TensorId {
    if (pending == graph::kNoTensor) return b.op("rmsnorm", {hidden, params.get(weight)}, {{"eps", eps}}, label);
    graph::OpOutputs outputs =
        b.op("fused_residual_rmsnorm", {hidden, pending, params.get(weight)}, {{"eps", eps}}, label);
    hidden = outputs[1];
    pending = graph::kNoTensor;
    return outputs[0];
  };
  for (int64_t layer = 0; layer < config.num_hidden_layers; ++layer) {
    const std::string prefix = fmt::format("layers.{}", layer);
    auto scope = b.scope(prefix);
    TensorId attention_out;
    {
      TensorId normed;
      {
        auto group = b.recompute_group("rmsnorm");
        normed = add_and_norm(prefix + ".ln1.weight", "ln1");
      }
      TensorId q, k, v;
      {
        auto group = b.recompute_group("qkv");
        q = projection(b, params, normed, prefix + ".attn.q_proj", "q");
        k = projection(b, params, normed, prefix + ".attn.k_proj", "k");
        v = projection(b, params, normed, prefix + ".attn.v_proj", "v");
        if (config.qk_norm && mrope) {
          // M-RoPE's tables differ per axis: the per-head norm (rmsnorm over each head_dim
          // slice), then rope with the tables, which fused_rmsnorm_rope equals on the CPU.
          q = b.op("rmsnorm", {q, params.get(prefix + ".attn.q_norm.weight")}, {{"eps", eps}}, "q_norm");
          k = b.op("rmsnorm", {k, params.get(prefix + ".attn.k_norm.weight")}, {{"eps", eps}}, "k_norm");
          q = b.op("rope", {q, cos, sin}, {{"heads", q_heads}, {"head_dim", head_dim}}, "q_rope");
          k = b.op("rope", {k, cos, sin}, {{"heads", kv_heads}, {"head_dim", head_dim}}, "k_rope");
        } else if (config.qk_norm) {
          q = b.op("fused_rmsnorm_rope", {q, params.get(prefix + ".attn.q_norm.weight"), position_ids},
                   norm_rope_attrs(q_heads), "q_norm_rope");
          k = b.op("fused_rmsnorm_rope", {k, params.get(prefix + ".attn.k_norm.weight"), position_ids},
                   norm_rope_attrs(kv_heads), "k_norm_rope");
        } else if (options.fused_rope) {
          q = b.op("fused_rope", {q, position_ids}, fused_rope_attrs(q_heads), "q_rope");
          k = b.op("fused_rope", {k, position_ids}, fused_rope_attrs(kv_heads), "k_rope");
        } else {
          q = b.op("rope", {q, cos, sin}, {{"heads", q_heads}, {"head_dim", head_dim}}, "q_rope");
          k = b.op("rope", {k, cos, sin}, {{"heads", kv_heads}, {"head_dim", head_dim}}, "k_rope");
        }
      }
      int64_t window = 0;
      if (config.sliding_window && static_cast<size_t>(layer) < config.sliding_window_layers.size() &&
          config.sliding_window_layers[static_cast<size_t>(layer)]) {
        window = *config.sliding_window;
      }
      TensorId context;
      {
        auto group = b.recompute_group("att");
        nlohmann::json attention_attrs = {
            {"query_heads", q_heads}, {"kv_heads", kv_heads}, {"head_dim", head_dim}, {"window", window}};
        if (options.attention_backward_chunks > 1) attention_attrs["backward_chunks"] = options.attention_backward_chunks;
        context = b.op("attention", {q, k, v, document_ids}, attention_attrs, "attention");
        attention_out = projection(b, params, context, prefix + ".attn.o_proj", "o");
      }
    }
    pending = attention_out;
    TensorId mlp_out;
    if (config.moe && config.moe->sparse_layers[static_cast<size_t>(layer)]) {
      TensorId normed;
      {
        auto group = b.recompute_group("rmsnorm");
        normed = add_and_norm(prefix + ".ln2.weight", "ln2");
      }
      mlp_out = build_moe_block(b, *config.moe, prefix, normed, [&](const std::string& name) { return params.get(name); },
                                router_loss ? &*router_loss : nullptr);
    } else {
      TensorId normed;
      {
        auto group = b.recompute_group("rmsnorm");
        normed = add_and_norm(prefix + ".ln2.weight", "ln2");
      }
      auto group = b.recompute_group("ffn");
      TensorId gate = projection(b, params, normed, prefix + ".mlp.gate_proj", "gate");
      TensorId up = projection(b, params, normed, prefix + ".mlp.up_proj", "up");
      TensorId activated;
      {
        auto inner = b.recompute_group("swiglu");
        activated = b.op("swiglu", {gate, up}, nlohmann::json::object(), "swiglu");
      }
      mlp_out = projection(b, params, activated, prefix + ".mlp.down_proj", "down");
    }
    pending = mlp_out;
    if (static_cast<size_t>(layer) < options.after_layer.size()) {
      hidden = b.op("add", {hidden, pending}, nlohmann::json::object(), "layer_out");
      pending = graph::kNoTensor;
      hidden = options.after_layer[static_cast<size_t>(layer)](b, hidden);
    }
  }
  TensorId final_hidden = add_and_norm("final_norm.weight", "final_norm");
  TensorId head = config.tie_word_embeddings ? params.get("embed.weight") : params.get("lm_head.weight");
  DecoderGraph result;
  std::vector<TensorId> loss_inputs = {final_hidden, head, targets, loss_scale};
  if (loss_weights) loss_inputs.push_back(*loss_weights);
  const nlohmann::json chunks{{"chunks", std::max<int64_t>(1, options.lmhead_chunks)}};
  if (router_loss && router_loss->layers > 0) {
    const TensorId lm_loss = b.op("lm_head_loss", loss_inputs, chunks, "lm_loss");
    const RouterLossTerms terms = add_router_loss(b, *config.moe, *router_loss, lm_loss, options.batch * options.sequence,
                                                  options.router_aux_loss_micro_batches);
    result.loss = terms.loss;
    result.router_aux_loss = terms.router_aux_loss;
  } else {
    result.loss = b.op("lm_head_loss", loss_inputs, chunks, "loss");
  }
  b.mark_output(result.loss);
  if (result.router_aux_loss != graph::kNoTensor) b.mark_output(result.router_aux_loss);
  if (options.with_accuracy) {
    // Chunked as the loss: on the GPU an unchunked head would hold the whole [rows, V] logits.
    result.correct = b.op("lm_head_accuracy", {final_hidden, head, targets}, chunks, "correct");
    b.mark_output(result.correct);
  }
  result.graph = b.finish();
  return result;
}

}  // namespace surogate::models
