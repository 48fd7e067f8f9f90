// QLoRA's quantized base: a graph rewrite that stores the frozen projection weights of a decoder
// (every non-trainable 2-D parameter under "layers." that only linear / linear_add nodes read as
// their weight: q/k/v/o, gate/up/down) quantized, run after models::apply_lora. Each such weight W
// stays a tensor of the graph under its own name, but is computed: a dequantization node
// (recompute group "dequant", so backward rebuilds it instead of keeping it) writes it in the
// graph's float dtype right before its first reader, from new frozen parameters (its pieces):
//   qlora_bnb, NF4 (quant/nf4.h), op dequantize_nf4:
//     <W>.nf4            U8  [ceil(n/2)]        the packed codes
//     <W>.absmax         F32 [blocks]           (plain), or U8 [blocks], the absmax codes (double quant)
//     <W>.nested_absmax  F32 [ceil(blocks/256)] (double quant)
//     <W>.offset         F32 [1]                (double quant)
//   qlora_fp8, FP8 E4M3 in b × b blocks (quant/fp8_blocks.h), op dequantize_fp8_blocks:
//     <W>.fp8            F8_E4M3 [out, in]                    the codes
//     <W>.scale_inv      F32 [ceil(out/b), ceil(in/b)]        one per block
//   qlora_fp4, NVFP4 (quant/nvfp4.h), op dequantize_fp4:
//     <W>.fp4               U8      [out, ceil(in/2)]   the packed E2M1 codes
//     <W>.fp4_block_scales  F8_E4M3 [out, ceil(in/16)]  one per 16 values of a row
//     <W>.fp4_tensor_scale  F32     [1]
// so at most a weight or two exist in full precision at any time (the planner's arena holds them
// only between the dequantization and the matmul). The embeddings, the LM head and the norms stay
// as they were. The trainer quantizes each loaded weight into these parameters
// (train/quantized_weights.h), or, for a checkpoint saved in FP8 blocks of the same size, copies
// its codes and scales in as they are.
#pragma once

#include <string>
#include <vector>

#include "graph/graph.h"
#include "graph/op_registry.h"
#include "models/quantized_weight.h"

namespace surogate::models {

// The format of the quantized base and its layout.
struct QloraOptions {
  WeightFormat format = WeightFormat::Nf4;  // Nf4 (qlora_bnb), Fp8Block (qlora_fp8) or Nvfp4 (qlora_fp4)
  int64_t block_size = 64;                  // qlora_bnb_block_size, or qlora_block_size (b × b blocks)
  bool double_quant = true;                 // Nf4: qlora_bnb_double_quant
  bool four_over_six = true;                // Nvfp4: qlora_four_over_six
};

// The rewritten graph (see the file comment).
graph::Graph apply_qlora_quantization(const graph::Graph& forward, const graph::OpRegistry& registry,
                                      const QloraOptions& options);

// The weights `graph` stores in NF4, in node order (read from its dequantize_nf4 nodes).
std::vector<QuantizedWeight> nf4_weights(const graph::Graph& graph);
// The weights `graph` stores in FP8 blocks, in node order (its dequantize_fp8_blocks nodes).
std::vector<QuantizedWeight> fp8_block_weights(const graph::Graph& graph);
// The weights `graph` stores in NVFP4, in node order (its dequantize_fp4 nodes).
std::vector<QuantizedWeight> nvfp4_weights(const graph::Graph& graph);

}  // namespace surogate::models
