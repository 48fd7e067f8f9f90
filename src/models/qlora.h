// QLoRA's quantized base: a graph rewrite that stores the frozen projection weights of a decoder
// (every non-trainable 2-D parameter under "layers." that only linear / linear_add nodes read as
// their weight: q/k/v/o, gate/up/down) in NF4 (quant/nf4.h), run after models::apply_lora.
// Each such weight W stays a tensor of the graph under its own name, but is computed: a
// dequantize_nf4 node (recompute group "dequant", so backward rebuilds it instead of keeping it)
// writes it in the graph's float dtype right before its first reader, from new frozen parameters
//   <W>.nf4            U8  [ceil(n/2)]        the packed codes
//   <W>.absmax         F32 [blocks]           (plain), or U8 [blocks], the absmax codes (double quant)
//   <W>.nested_absmax  F32 [ceil(blocks/256)] (double quant)
//   <W>.offset         F32 [1]                (double quant)
// so at most a weight or two exist in full precision at any time (the planner's arena holds them
// only between the dequantization and the matmul). The embeddings, the LM head and the norms stay
// as they were. The trainer quantizes each loaded weight into these parameters
// (train/quantized_weights.h).
#pragma once

#include <string>
#include <vector>

#include "graph/graph.h"
#include "graph/op_registry.h"
#include "models/quantized_weight.h"

namespace surogate::models {

struct Nf4Options {
  int64_t block_size = 64;     // qlora_bnb_block_size
  bool double_quant = true;    // qlora_bnb_double_quant
};

// The rewritten graph (see the file comment).
graph::Graph apply_nf4_quantization(const graph::Graph& forward, const graph::OpRegistry& registry,
                                    const Nf4Options& options);

// The weights `graph` stores in NF4, in node order (read from its dequantize_nf4 nodes).
std::vector<QuantizedWeight> nf4_weights(const graph::Graph& graph);

}  // namespace surogate::models
