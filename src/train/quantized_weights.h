// QLoRA's frozen base on the way in: each loaded (or initialised) weight that the plan stores in NF4
// (models/qlora.h) is quantized on the host, on all cores, and its pieces are written into the
// backend's parameters. The base never exists in full precision on the host beyond the one weight
// being loaded, nor on the device beyond the dequantized copy a matmul reads.
#pragma once

#include <span>
#include <vector>

#include "compiler/execution_plan.h"
#include "models/qlora.h"
#include "quant/nf4.h"
#include "runtime/backend.h"

namespace surogate::train {

struct Nf4Pieces {
  std::vector<uint8_t> packed;
  std::vector<float> absmax;        // plain
  quant::QuantizedAbsmax nested;    // double quantization
};

// `values` (the weight's numel floats) in NF4 as `weight` describes.
Nf4Pieces quantize_weight(const models::QuantizedWeight& weight, std::span<const float> values);

// A weight as the CPU devices keep it for their evaluator (which has its own backend).
struct StoredNf4Weight {
  models::QuantizedWeight weight;
  Nf4Pieces pieces;
};

// Writes the pieces into the parameters `plan` gives them on `backend`.
void write_quantized(runtime::Backend& backend, const compiler::ExecutionPlan& plan,
                     const models::QuantizedWeight& weight, const Nf4Pieces& pieces);

}  // namespace surogate::train
