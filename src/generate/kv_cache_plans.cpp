// The KV-cache model's plans; see kv_cache_plans.h.
#include "generate/kv_cache_plans.h"

#include <algorithm>
#include <string>
#include <utility>

#include "compiler/execution_plan.h"
#include "generate/batch_reshape.h"
#include "generate/decode_fusion.h"
#include "ops/defs/register_ops.h"

namespace surogate::generate {
namespace {

// One plan's own memory beyond the weights: its caches, its arena and its inputs.
void add_plan_memory(const compiler::ExecutionPlan& plan, bool count_caches, KvCacheMemory& memory) {
  memory.activations += plan.memory.arena_bytes + plan.memory.input_bytes;
  if (!count_caches) return;  // the prefill plans read the decode plan's caches
  for (size_t index = 0; index < plan.graph.tensors.size(); ++index) {
    if (is_kv_cache(plan.graph.tensors[index].name)) memory.caches += plan.memory.placements[index].size_bytes;
  }
}

}  // namespace

bool is_kv_cache(const std::string& name) { return name.ends_with(".k_cache") || name.ends_with(".v_cache"); }

KvCachePlanShapes kv_cache_plan_shapes(const ModelOptions& options, const PrefillShape& prefill) {
  KvCachePlanShapes shapes;
  shapes.cache = {options.slots, options.max_context};
  shapes.prefill_rows = std::min(prefill.rows > 0 ? prefill.rows : 4, options.slots);
  shapes.chunk = std::min(prefill.chunk > 0 ? prefill.chunk : 256, options.max_context);
  shapes.prefill = shapes.chunk > 1;
  // One prompt alone takes a row of rows × chunk tokens: no padding rows computed for nothing.
  shapes.single_chunk = std::min(shapes.prefill_rows * shapes.chunk, options.max_context);
  shapes.single = shapes.prefill && shapes.prefill_rows > 1 && shapes.single_chunk > shapes.chunk;
  return shapes;
}

DecodeGraph build_kv_cache_graph(const io::ModelConfig& config, const graph::OpRegistry& registry,
                                 const ModelOptions& options, const WeightForms& live, const DecodeShape& cache,
                                 int64_t rows, int64_t sequence) {
  const auto defined = definition_batch_shape(options.definition, registry);
  models::DecoderGraphOptions graph_options{defined ? defined->first : rows, defined ? defined->second : sequence, 1,
                                            false};
  if (options.cuda) graph_options.dtype = DType::BF16;
  DecodeGraph result;
  result.session = models::build_session_graph(config, registry, graph_options, options.definition, options.adapter);
  graph::Graph& forward = result.session.graph;
  if (live.lora) {  // the live adapter: its shape from the owner's options, its values the owner's
    result.session.adapters = models::lora_adapters(config, *live.lora);
    models::LoraOptions lora = *live.lora;
    lora.fuse_inference_products = true;  // 16-bit graphs only (models/lora.h), as an adapter loaded from disk
    forward = models::apply_lora(forward, registry, result.session.adapters, lora, false);
  }
  if (live.qlora) {
    // The base alone (GRPO's reference: the QLoRA base without its adapter) is as frozen as it
    // is under LoRA, which is what the rewrite quantizes; a decode graph trains nothing.
    if (!live.lora) {
      for (graph::TensorInfo& info : forward.tensors) info.trainable = false;
    }
    forward = models::apply_qlora_quantization(forward, registry, *live.qlora);
  }
  if (live.fp8) {  // as the trainer's evaluation graph: no scaling state, nothing fused into other ops
    models::Fp8Options fp8 = *live.fp8;
    fp8.amax_history = 0;
    fp8.fuse_producers = fp8.fuse_attention = false;
    forward = models::apply_fp8_recipe(forward, registry, fp8);
  }
  const std::string& source = options.definition.source;
  result.graph = add_greedy_tokens(
      build_decode_graph(reshape_batch(result.session.graph, registry, rows, sequence, source), registry, cache, source),
      registry);
  // A CUDA step of one or two rows reads q, k, v in one launch and gate, up in another.
  if (options.cuda && rows * sequence <= kFusedDecodeRows) result.graph = fuse_decode_products(result.graph, registry);
  return result;
}

KvCacheMemory predict_kv_cache_memory(const io::ModelConfig& config, const ModelOptions& options,
                                      const WeightForms& live, const PrefillShape& prefill) {
  const graph::OpRegistry registry = ops::make_model_registry();
  const KvCachePlanShapes shapes = kv_cache_plan_shapes(options, prefill);
  auto plan = [&](int64_t rows, int64_t sequence) {
    return compiler::compile_forward(
        build_kv_cache_graph(config, registry, options, live, shapes.cache, rows, sequence).graph, registry);
  };
  KvCacheMemory memory;
  add_plan_memory(plan(options.slots, 1), true, memory);
  if (shapes.prefill) add_plan_memory(plan(shapes.prefill_rows, shapes.chunk), false, memory);
  if (shapes.single) add_plan_memory(plan(1, shapes.single_chunk), false, memory);
  return memory;
}

}  // namespace surogate::generate
