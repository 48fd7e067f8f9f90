// The CPU emulation of one tensor's quantization at a site of the fp8_hybrid recipe (quantize_fp8,
// the input gradients of linear_fp8, and the "_fp8" producers of fp8_output_def.cpp): the values
// `count` elements of `x` (float, double or bf16) quantize to in `format`, their scale_inv, and
// the state row's update (quant/fp8_scaling.h): row[1] records x's amax; the scale comes from
// row[0] once a step has been recorded, from x's own amax before; a null row is current scaling.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/error.h"
#include "graph/op_registry.h"
#include "quant/fp8.h"
#include "quant/fp8_scaling.h"

namespace surogate::ops::defs {

// The format an op's attribute names ("e4m3" / "e5m2"), else a UserError naming `where`.
inline quant::Fp8Format format_named(const std::string& name, const std::string& where) {
  if (name == "e4m3") return quant::Fp8Format::E4M3;
  if (name == "e5m2") return quant::Fp8Format::E5M2;
  fail_user("{}: FP8 format must be \"e4m3\" or \"e5m2\", got \"{}\"", where, name);
}

inline DType dtype_of(quant::Fp8Format format) {
  return format == quant::Fp8Format::E4M3 ? DType::F8_E4M3 : DType::F8_E5M2;
}

// Checks input `index` is a scaling state F32 [sites, 2 + history] with a row `site`.
inline void expect_fp8_state(const graph::InferContext& ctx, size_t index, int64_t site) {
  ctx.expect_dtype(index, DType::F32);
  ctx.expect_rank(index, 2);
  if (site < 0 || site >= ctx.input(index).shape[0] || ctx.input(index).shape[1] <= quant::kFp8StateHeader) {
    ctx.fail("site {} is not a row of the scaling state {}", site, ctx.input_label(index));
  }
}

template <typename T>
float quantize(const T* x, int64_t count, quant::Fp8Format format, float* row, uint8_t* out) {
  std::vector<float> values(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) values[static_cast<size_t>(i)] = static_cast<float>(x[i]);
  const float amax = quant::amax_of(values);
  float used = amax;
  if (row != nullptr) {
    row[1] = quant::amax_max(row[1], amax);
    used = quant::scaling_amax(row, amax);
  }
  const float scale = quant::fp8_scale(used, format);
  for (int64_t i = 0; i < count; ++i) out[i] = quant::fp8_encode(values[static_cast<size_t>(i)] * scale, format);
  return 1.0f / scale;
}

}  // namespace surogate::ops::defs
