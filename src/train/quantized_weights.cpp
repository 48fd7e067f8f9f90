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

// Piece `index` of `pieces` resized to `count` values of T, its memory kept from the last weight
// quantized into it (fresh pages cost the start-up more than the quantization: ~0.5 s per GB, one
// thread); vector storage is aligned for any T.
template <typename T>
T* piece(QuantizedPieces& pieces, size_t index, int64_t count) {
  if (pieces.bytes.size() <= index) pieces.bytes.resize(index + 1);
  pieces.bytes[index].resize(static_cast<size_t>(count) * sizeof(T));
  return reinterpret_cast<T*>(pieces.bytes[index].data());
}

// Double quantization of the absmax values into pieces [first, first + 3): the 8-bit codes, the
// second-level absmax and the offset (quant/nf4.h), the 256-blocks on all cores.
void double_quantize_into(QuantizedPieces& pieces, size_t first, std::span<const float> absmax) {
  const auto count = static_cast<int64_t>(absmax.size());
  const int64_t blocks = (count + quant::kAbsmaxBlock - 1) / quant::kAbsmaxBlock;
  const float offset = quant::absmax_offset(absmax);
  uint8_t* codes = piece<uint8_t>(pieces, first, count);
  float* absmax2 = piece<float>(pieces, first + 1, blocks);
  *piece<float>(pieces, first + 2, 1) = offset;
  constexpr int64_t kBlocksPerTask = 64;
  ops::parallel_for((blocks + kBlocksPerTask - 1) / kBlocksPerTask, [&](int64_t task) {
    const int64_t begin = task * kBlocksPerTask;
    quant::quantize_absmax_blocks(absmax, offset, begin, std::min(blocks, begin + kBlocksPerTask), codes, absmax2);
  });
}

// NF4's absmax pieces after the codes: the fp32 absmax, or with double quantization its 8-bit codes,
// the second-level absmax and the offset (quant/nf4.h).
void append_absmax(QuantizedPieces& pieces, std::span<const float> absmax, bool double_quant) {
  if (!double_quant) {
    pieces.bytes.push_back(bytes_of_values<float>(absmax));
    return;
  }
  double_quantize_into(pieces, pieces.bytes.size(), absmax);
}

// Each quantize_<format> writes its pieces into `pieces` and returns how many it wrote.
size_t quantize_nf4(const models::QuantizedWeight& weight, std::span<const float> values, QuantizedPieces& pieces) {
  const quant::Nf4Shape& shape = weight.nf4;
  uint8_t* packed = piece<uint8_t>(pieces, 0, shape.packed_bytes());
  // Without double quantization the absmax is the second piece; with it, a temporary it is made from.
  std::vector<float> nested_source(static_cast<size_t>(shape.double_quant ? shape.blocks() : 0));
  float* absmax = shape.double_quant ? nested_source.data() : piece<float>(pieces, 1, shape.blocks());
  constexpr int64_t kBlocksPerTask = 1024;
  const int64_t tasks = (shape.blocks() + kBlocksPerTask - 1) / kBlocksPerTask;
  ops::parallel_for(tasks, [&](int64_t task) {
    const int64_t first = task * kBlocksPerTask;
    quant::quantize_nf4_blocks(values.data(), shape, first, std::min(shape.blocks(), first + kBlocksPerTask), packed,
                               absmax);
  });
  if (!shape.double_quant) return 2;
  double_quantize_into(pieces, 1, nested_source);
  return 4;
}

// Per-tensor E4M3 at scale 448 / amax: the codes [out, in], the same codes transposed [in, out]
// and scale_inv (models/fp8_recipe.h, ops/fp8_tensor.h).
size_t quantize_fp8_tensor(const models::QuantizedWeight& weight, std::span<const float> values,
                           QuantizedPieces& pieces) {
  const int64_t rows = weight.shape.at(0), columns = weight.shape.at(1);
  const auto count = static_cast<int64_t>(values.size());
  uint8_t* codes = piece<uint8_t>(pieces, 0, count);
  uint8_t* transposed = piece<uint8_t>(pieces, 1, count);
  *piece<float>(pieces, 2, 1) = ops::quantize_fp8_tensor(values.data(), rows, columns, codes, transposed);
  return 3;
}

// Square blocks of E4M3 with one scale each (models/qlora.h, quant/fp8_blocks.h), every block a task.
size_t quantize_fp8_blocks(const models::QuantizedWeight& weight, std::span<const float> values,
                           QuantizedPieces& pieces) {
  const quant::Fp8BlockShape& shape = weight.fp8_blocks;
  uint8_t* codes = piece<uint8_t>(pieces, 0, shape.numel());
  float* scale_inv = piece<float>(pieces, 1, shape.blocks());
  ops::parallel_for(shape.blocks(), [&](int64_t block) {
    quant::quantize_fp8_block(values.data(), shape, block / shape.col_blocks(), block % shape.col_blocks(), codes,
                              scale_inv);
  });
  return 2;
}

// max |values| as quant::amax_of compares them (bit patterns), on all cores: the maximum does not
// depend on the order.
float parallel_amax(std::span<const float> values) {
  constexpr int64_t kPerTask = int64_t{1} << 20;
  const auto count = static_cast<int64_t>(values.size());
  const int64_t tasks = (count + kPerTask - 1) / kPerTask;
  std::vector<float> partial(static_cast<size_t>(tasks), 0.0f);
  ops::parallel_for(tasks, [&](int64_t task) {
    const int64_t begin = task * kPerTask;
    partial[static_cast<size_t>(task)] =
        quant::amax_of(values.subspan(static_cast<size_t>(begin), static_cast<size_t>(std::min(kPerTask, count - begin))));
  });
  return quant::amax_of(partial);
}

// NVFP4 (models/qlora.h, quant/nvfp4.h): the packed codes, the E4M3 block scales, the tensor scale.
size_t quantize_nvfp4(const models::QuantizedWeight& weight, std::span<const float> values, QuantizedPieces& pieces) {
  const quant::Nvfp4Shape& shape = weight.nvfp4;
  const quant::Nvfp4TensorScale scale = quant::nvfp4_tensor_scale(parallel_amax(values), weight.nvfp4_rule);
  uint8_t* packed = piece<uint8_t>(pieces, 0, shape.packed_bytes());
  uint8_t* block_scales = piece<uint8_t>(pieces, 1, shape.block_scales());
  *piece<float>(pieces, 2, 1) = scale.decode;
  constexpr int64_t kRowsPerTask = 16;
  ops::parallel_for((shape.rows + kRowsPerTask - 1) / kRowsPerTask, [&](int64_t task) {
    const int64_t first = task * kRowsPerTask;
    quant::quantize_nvfp4_rows(values.data(), shape, scale, weight.nvfp4_rule, first,
                               std::min(shape.rows, first + kRowsPerTask), packed, block_scales);
  });
  return 3;
}

}  // namespace

void quantize_weight_into(const models::QuantizedWeight& weight, std::span<const float> values,
                          QuantizedPieces& pieces) {
  SUROGATE_CHECK(static_cast<int64_t>(values.size()) == weight.numel(), "weight '{}' has {} values, expected {}",
                 weight.name, values.size(), weight.numel());
  size_t made = 0;
  switch (weight.format) {
    case models::WeightFormat::Nf4: made = quantize_nf4(weight, values, pieces); break;
    case models::WeightFormat::Fp8Tensor: made = quantize_fp8_tensor(weight, values, pieces); break;
    case models::WeightFormat::Fp8Block: made = quantize_fp8_blocks(weight, values, pieces); break;
    case models::WeightFormat::Nvfp4: made = quantize_nvfp4(weight, values, pieces); break;
  }
  pieces.bytes.resize(made);  // a weight with fewer pieces than the last one quantized into `pieces`
  SUROGATE_CHECK(made == weight.pieces.size(), "weight '{}': {} pieces quantized, {} named", weight.name, made,
                 weight.pieces.size());
}

QuantizedPieces quantize_weight(const models::QuantizedWeight& weight, std::span<const float> values) {
  QuantizedPieces pieces;
  quantize_weight_into(weight, values, pieces);
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
