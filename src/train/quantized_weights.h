// The quantized frozen base on the way in: each loaded (or initialised) weight that the plan stores
// quantized (models/quantized_weight.h: NF4 for QLoRA, FP8 for the fp8_hybrid recipe) is
// quantized on the host, on all cores (or, from a checkpoint saved in the same FP8 blocks or the same
// bitsandbytes NF4 blocks, taken as stored), and its pieces are written into the backend's parameters.
// The base never exists in full precision on the host beyond the one weight being loaded.
#pragma once

#include <cstddef>
#include <optional>
#include <span>
#include <vector>

#include "compiler/execution_plan.h"
#include "models/quantized_weight.h"
#include "models/weight_io.h"
#include "runtime/backend.h"

namespace surogate::train {

// The bytes of each of weight.pieces, in that order.
struct QuantizedPieces {
  std::vector<std::vector<std::byte>> bytes;
};

// `values` (the weight's numel floats) in the format `weight` describes, on all cores (the bytes
// do not depend on their number: tests/train/test_quantized_weights.cpp holds them to the quant/
// functions run on one thread).
QuantizedPieces quantize_weight(const models::QuantizedWeight& weight, std::span<const float> values);
// The same into `pieces`, reusing the memory its byte vectors hold from an earlier weight.
void quantize_weight_into(const models::QuantizedWeight& weight, std::span<const float> values,
                          QuantizedPieces& pieces);

// A weight the checkpoint already stores in FP8 blocks (models/weight_io.h), as `weight`'s pieces
// (codes and scale_inv copied as they are) when `weight` is in FP8 blocks of the same size; nullopt
// otherwise (then it is dequantized on load and quantized again). A NaN code or a scale_inv that is
// not finite and positive is a UserError naming the tensor (a damaged file).
std::optional<QuantizedPieces> stored_fp8_pieces(const models::QuantizedWeight& weight,
                                                 const models::Fp8BlockTensor& tensor);

// A weight the checkpoint stores in bitsandbytes 4-bit (models/bnb_checkpoint.h), as `weight`'s
// pieces when `weight` is NF4 in blocks of the same size and the checkpoint's is NF4 too (its quant
// map NF4's levels, a nested map that is bitsandbytes' dynamic map in blocks of 256): the 4-bit codes
// are copied as they are, and the absmax too when both use double quantization or neither does;
// otherwise the stored absmax is dequantized (the plan's is plain) or double-quantized (the plan's
// is nested) — the codes stay as stored either way. nullopt when the formats differ (then it is
// dequantized on load and quantized again).
std::optional<QuantizedPieces> stored_bnb_pieces(const models::QuantizedWeight& weight,
                                                 const models::Bnb4bitTensor& tensor);

// A weight as the CPU devices keep it for their evaluator (which has its own backend).
struct StoredQuantizedWeight {
  models::QuantizedWeight weight;
  QuantizedPieces pieces;
};

// Writes the pieces into the parameters `plan` gives them on `backend`.
void write_quantized(runtime::Backend& backend, const compiler::ExecutionPlan& plan,
                     const models::QuantizedWeight& weight, const QuantizedPieces& pieces);

}  // namespace surogate::train
