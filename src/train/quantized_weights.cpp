// Quantizing the frozen base into the backend; see quantized_weights.h.
#include "train/quantized_weights.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "ops/fp8_tensor.h"
#include "ops/parallel_for.h"
#include "quant/dynamic_map.h"
#include "quant/fp8.h"
#include "quant/fp8_scaling.h"
#include "quant/fp8_blocks.h"
#include "quant/nf4.h"
#include "quant/nvfp4.h"

namespace surogate::train {
namespace {

template <typename T>
std::vector<std::byte> bytes_of_values(std::span<const T> values) {
  std::vector<std::byte> bytes(values.size_bytes());
  if (!bytes.empty()) std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

// NF4's absmax pieces after the codes: the fp32 absmax, or with double quantization its 8-bit codes,
// the second-level absmax and the offset (quant/nf4.h).
void append_absmax(QuantizedPieces& pieces, std::span<const float> absmax, bool double_quant) {
  if (!double_quant) {
    pieces.bytes.push_back(bytes_of_values<float>(absmax));
    return;
  }
  const quant::QuantizedAbsmax nested = quant::quantize_absmax(absmax);
  pieces.bytes.push_back(bytes_of_values<uint8_t>(nested.codes));
  pieces.bytes.push_back(bytes_of_values<float>(nested.absmax2));
  pieces.bytes.push_back(bytes_of_values<float>(std::span<const float>(&nested.offset, 1)));
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
  pieces.bytes.push_back(bytes_of_values<uint8_t>(packed));
  append_absmax(pieces, absmax, shape.double_quant);
  return pieces;
}

// Per-tensor E4M3 at scale 448 / amax: the codes [out, in], the same codes transposed [in, out]
// and scale_inv (models/fp8_recipe.h, ops/fp8_tensor.h).
QuantizedPieces quantize_fp8_tensor(const models::QuantizedWeight& weight, std::span<const float> values) {
  const int64_t rows = weight.shape.at(0), columns = weight.shape.at(1);
  std::vector<std::byte> codes(values.size()), transposed(values.size());
  const float scale_inv = ops::quantize_fp8_tensor(values.data(), rows, columns, reinterpret_cast<uint8_t*>(codes.data()),
                                                   reinterpret_cast<uint8_t*>(transposed.data()));
  QuantizedPieces pieces;
  pieces.bytes.push_back(std::move(codes));
  pieces.bytes.push_back(std::move(transposed));
  pieces.bytes.push_back(bytes_of_values<float>(std::span<const float>(&scale_inv, 1)));
  return pieces;
}

// Square blocks of E4M3 with one scale each (models/qlora.h, quant/fp8_blocks.h).
QuantizedPieces quantize_fp8_blocks(const models::QuantizedWeight& weight, std::span<const float> values) {
  const quant::Fp8BlockShape& shape = weight.fp8_blocks;
  std::vector<uint8_t> codes(static_cast<size_t>(shape.numel()));
  std::vector<float> scale_inv(static_cast<size_t>(shape.blocks()));
  ops::parallel_for(shape.row_blocks(), [&](int64_t block_row) {
    quant::quantize_fp8_blocks(values.data(), shape, block_row, block_row + 1, codes.data(), scale_inv.data());
  });
  QuantizedPieces pieces;
  pieces.bytes.push_back(bytes_of_values<uint8_t>(codes));
  pieces.bytes.push_back(bytes_of_values<float>(scale_inv));
  return pieces;
}

// NVFP4 (models/qlora.h, quant/nvfp4.h): the packed codes, the E4M3 block scales, the tensor scale.
QuantizedPieces quantize_nvfp4(const models::QuantizedWeight& weight, std::span<const float> values) {
  const quant::Nvfp4Shape& shape = weight.nvfp4;
  const quant::Nvfp4TensorScale scale = quant::nvfp4_tensor_scale(quant::amax_of(values), weight.nvfp4_rule);
  std::vector<uint8_t> packed(static_cast<size_t>(shape.packed_bytes()));
  std::vector<uint8_t> block_scales(static_cast<size_t>(shape.block_scales()));
  constexpr int64_t kRowsPerTask = 16;
  ops::parallel_for((shape.rows + kRowsPerTask - 1) / kRowsPerTask, [&](int64_t task) {
    const int64_t first = task * kRowsPerTask;
    quant::quantize_nvfp4_rows(values.data(), shape, scale, weight.nvfp4_rule, first,
                               std::min(shape.rows, first + kRowsPerTask), packed.data(), block_scales.data());
  });
  QuantizedPieces pieces;
  pieces.bytes.push_back(bytes_of_values<uint8_t>(packed));
  pieces.bytes.push_back(bytes_of_values<uint8_t>(block_scales));
  pieces.bytes.push_back(bytes_of_values<float>(std::span<const float>(&scale.decode, 1)));
  return pieces;
}

}  // namespace

QuantizedPieces quantize_weight(const models::QuantizedWeight& weight, std::span<const float> values) {
  SUROGATE_CHECK(static_cast<int64_t>(values.size()) == weight.numel(), "weight '{}' has {} values, expected {}",
                 weight.name, values.size(), weight.numel());
  QuantizedPieces pieces;
  switch (weight.format) {
    case models::WeightFormat::Nf4: pieces = quantize_nf4(weight, values); break;
    case models::WeightFormat::Fp8Tensor: pieces = quantize_fp8_tensor(weight, values); break;
    case models::WeightFormat::Fp8Block: pieces = quantize_fp8_blocks(weight, values); break;
    case models::WeightFormat::Nvfp4: pieces = quantize_nvfp4(weight, values); break;
  }
  SUROGATE_CHECK(pieces.bytes.size() == weight.pieces.size(), "weight '{}': {} pieces quantized, {} named",
                 weight.name, pieces.bytes.size(), weight.pieces.size());
  return pieces;
}

std::optional<QuantizedPieces> stored_fp8_pieces(const models::QuantizedWeight& weight,
                                                 const models::Fp8BlockTensor& tensor) {
  const quant::Fp8BlockShape& want = weight.fp8_blocks;
  if (weight.format != models::WeightFormat::Fp8Block || tensor.shape.block_rows != want.block_rows ||
      tensor.shape.block_cols != want.block_cols) {
    return std::nullopt;
  }
  SUROGATE_CHECK(tensor.shape.rows == want.rows && tensor.shape.cols == want.cols, "weight '{}': stored shape differs",
                 weight.name);
  QuantizedPieces pieces;
  pieces.bytes.emplace_back(tensor.codes.bytes.begin(), tensor.codes.bytes.end());
  for (std::byte code : pieces.bytes.back()) {
    if ((std::to_integer<uint8_t>(code) & 0x7F) == 0x7F) {
      fail_user("tensor {} holds an F8_E4M3 NaN code; the weights are damaged: re-download or re-export the model",
                tensor.codes.name);
    }
  }
  const std::vector<float> scale_inv = io::read_tensor_as_float32(tensor.scale_inv);
  for (float value : scale_inv) {
    if (!std::isfinite(value) || value <= 0.0f) {
      fail_user("tensor {} holds the block scale {}; scales must be finite and positive: the weights are damaged, "
                "re-download or re-export the model", tensor.scale_inv.name, value);
    }
  }
  pieces.bytes.push_back(bytes_of_values<float>(scale_inv));
  return pieces;
}

std::optional<QuantizedPieces> stored_bnb_pieces(const models::QuantizedWeight& weight,
                                                 const models::Bnb4bitTensor& tensor) {
  const bool nf4 = tensor.quant_type == "nf4" && tensor.quant_map == quant::kNf4Levels &&
                   (!tensor.double_quant() ||
                    (tensor.nested_block_size == quant::kAbsmaxBlock && tensor.nested_quant_map == quant::kDynamicMap));
  if (weight.format != models::WeightFormat::Nf4 || !nf4 || tensor.block_size != weight.nf4.block_size) {
    return std::nullopt;
  }
  SUROGATE_CHECK(tensor.numel == weight.numel(), "weight '{}': stored size differs", weight.name);
  QuantizedPieces pieces;
  pieces.bytes.emplace_back(tensor.codes.bytes.begin(), tensor.codes.bytes.end());
  if (weight.nf4.double_quant && tensor.double_quant()) {
    pieces.bytes.emplace_back(tensor.absmax.bytes.begin(), tensor.absmax.bytes.end());
    pieces.bytes.push_back(bytes_of_values<float>(io::read_tensor_as_float32(*tensor.nested_absmax)));
    pieces.bytes.push_back(bytes_of_values<float>(std::span<const float>(&tensor.nested_offset, 1)));
    return pieces;
  }
  append_absmax(pieces, models::bnb_4bit_block_absmax(tensor), weight.nf4.double_quant);
  return pieces;
}

void write_quantized(runtime::Backend& backend, const compiler::ExecutionPlan& plan,
                     const models::QuantizedWeight& weight, const QuantizedPieces& pieces) {
  for (size_t i = 0; i < weight.pieces.size(); ++i) {
    backend.write(plan.tensor(weight.pieces[i]), pieces.bytes[i]);
  }
}

}  // namespace surogate::train
