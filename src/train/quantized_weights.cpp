// Quantizing the frozen base into the backend; see quantized_weights.h.
#include "train/quantized_weights.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "ops/parallel_for.h"
#include "quant/nf4.h"

namespace surogate::train {
namespace {

template <typename T>
std::vector<std::byte> bytes_of(std::span<const T> values) {
  std::vector<std::byte> bytes(values.size_bytes());
  if (!bytes.empty()) std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

QuantizedPieces quantize_nf4(const models::QuantizedWeight& weight, std::span<const float> values) {
  const quant::Nf4Shape& shape = weight.nf4;
  std::vector<uint8_t> packed(static_cast<size_t>(shape.packed_bytes()));
  std::vector<float> absmax(static_cast<size_t>(shape.blocks()));
  constexpr int64_t kBlocksPerTask = 1024;
  const int64_t tasks = (shape.blocks() + kBlocksPerTask - 1) / kBlocksPerTask;
  ops::parallel_for(tasks, [&](int64_t task) {
    const int64_t first = task * kBlocksPerTask;
    quant::quantize_nf4_blocks(values.data(), shape, first, std::min(shape.blocks(), first + kBlocksPerTask),
                               packed.data(), absmax.data());
  });
  QuantizedPieces pieces;
  pieces.bytes.push_back(bytes_of<uint8_t>(packed));
  if (!shape.double_quant) {
    pieces.bytes.push_back(bytes_of<float>(absmax));
    return pieces;
  }
  const quant::QuantizedAbsmax nested = quant::quantize_absmax(absmax);
  pieces.bytes.push_back(bytes_of<uint8_t>(nested.codes));
  pieces.bytes.push_back(bytes_of<float>(nested.absmax2));
  pieces.bytes.push_back(bytes_of<float>(std::span<const float>(&nested.offset, 1)));
  return pieces;
}

}  // namespace

QuantizedPieces quantize_weight(const models::QuantizedWeight& weight, std::span<const float> values) {
  SUROGATE_CHECK(static_cast<int64_t>(values.size()) == weight.numel(), "weight '{}' has {} values, expected {}",
                 weight.name, values.size(), weight.numel());
  QuantizedPieces pieces;
  switch (weight.format) {
    case models::WeightFormat::Nf4: pieces = quantize_nf4(weight, values); break;
  }
  SUROGATE_CHECK(pieces.bytes.size() == weight.pieces.size(), "weight '{}': {} pieces quantized, {} named",
                 weight.name, pieces.bytes.size(), weight.pieces.size());
  return pieces;
}

void write_quantized(runtime::Backend& backend, const compiler::ExecutionPlan& plan,
                     const models::QuantizedWeight& weight, const QuantizedPieces& pieces) {
  for (size_t i = 0; i < weight.pieces.size(); ++i) {
    backend.write(plan.tensor(weight.pieces[i]), pieces.bytes[i]);
  }
}

}  // namespace surogate::train
