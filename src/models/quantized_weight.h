// A frozen base weight that a graph stores quantized instead of in its float dtype, whatever the
// format: the pass that rewrote the graph (models/qlora.h for NF4, FP8 blocks and NVFP4, models/fp8_recipe.h for the
// fp8_hybrid recipe's FP8 copies) names the parameters that hold it, and the trainer fills them
// from the full-precision weight as it loads (train/quantized_weights.h). quantized_weights()
// is the one list of them the trainer, the devices and the evaluators read.
#pragma once

#include <string>
#include <vector>

#include "graph/graph.h"
#include "quant/fp8_blocks.h"
#include "quant/nf4.h"
#include "quant/nvfp4.h"

namespace surogate::models {

enum class WeightFormat : uint8_t {
  Nf4,        // pieces: packed codes, absmax [, nested absmax, offset] (models/qlora.h)
  Fp8Tensor,  // pieces: E4M3 [out, in], its transpose [in, out], scale_inv F32[1] (models/fp8_recipe.h)
  Fp8Block,   // pieces: E4M3 codes [out, in], scale_inv F32 [out/b, in/b] rounded up (qlora_fp8, models/qlora.h)
  Nvfp4,      // pieces: packed E2M1 U8 [out, in/2], E4M3 block scales [out, in/16] rounded up, tensor scale
              // F32 [1] (qlora_fp4, models/qlora.h)
};

struct QuantizedWeight {
  std::string name;   // the weight's engine name ("layers.0.attn.q_proj.weight")
  graph::Shape shape;
  WeightFormat format = WeightFormat::Nf4;
  quant::Nf4Shape nf4;                // Nf4 only
  quant::Fp8BlockShape fp8_blocks;    // Fp8Block only
  quant::Nvfp4Shape nvfp4;            // Nvfp4 only
  quant::Nvfp4ScaleRule nvfp4_rule = quant::Nvfp4ScaleRule::FourOverSix;  // Nvfp4 only
  std::vector<std::string> pieces;    // the parameters that hold it, in the format's order

  int64_t numel() const { return graph::shape_numel(shape); }
};

// Every weight `graph` stores quantized, in node order.
std::vector<QuantizedWeight> quantized_weights(const graph::Graph& graph);

}  // namespace surogate::models
