// Quantizing the frozen base into the backend; see quantized_weights.h.
#include "train/quantized_weights.h"

#include <algorithm>

#include "core/error.h"
#include "ops/parallel_for.h"

namespace surogate::train {

Nf4Pieces quantize_weight(const models::QuantizedWeight& weight, std::span<const float> values) {
  const quant::Nf4Shape& shape = weight.nf4;
  SUROGATE_CHECK(static_cast<int64_t>(values.size()) == shape.numel, "weight '{}' has {} values, expected {}",
                 weight.name, values.size(), shape.numel);
  Nf4Pieces pieces;
  pieces.packed.resize(static_cast<size_t>(shape.packed_bytes()));
  pieces.absmax.resize(static_cast<size_t>(shape.blocks()));
  constexpr int64_t kBlocksPerTask = 1024;
  const int64_t tasks = (shape.blocks() + kBlocksPerTask - 1) / kBlocksPerTask;
  ops::parallel_for(tasks, [&](int64_t task) {
    const int64_t first = task * kBlocksPerTask;
    quant::quantize_nf4_blocks(values.data(), shape, first, std::min(shape.blocks(), first + kBlocksPerTask),
                               pieces.packed.data(), pieces.absmax.data());
  });
  if (shape.double_quant) {
    pieces.nested = quant::quantize_absmax(pieces.absmax);
    pieces.absmax.clear();
  }
  return pieces;
}

namespace {
template <typename T>
void write_piece(runtime::Backend& backend, const compiler::ExecutionPlan& plan, const std::string& name,
                 std::span<const T> values) {
  backend.write(plan.tensor(name), std::as_bytes(values));
}
}  // namespace

void write_quantized(runtime::Backend& backend, const compiler::ExecutionPlan& plan,
                     const models::QuantizedWeight& weight, const Nf4Pieces& pieces) {
  write_piece<uint8_t>(backend, plan, weight.packed, pieces.packed);
  if (!weight.nf4.double_quant) {
    write_piece<float>(backend, plan, weight.absmax, pieces.absmax);
    return;
  }
  write_piece<uint8_t>(backend, plan, weight.absmax, pieces.nested.codes);
  write_piece<float>(backend, plan, weight.nested_absmax, pieces.nested.absmax2);
  write_piece<float>(backend, plan, weight.offset, std::span<const float>(&pieces.nested.offset, 1));
}

}  // namespace surogate::train
