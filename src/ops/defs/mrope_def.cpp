// Graph op for M-RoPE tables (Qwen2-VL / Qwen2.5-VL; ops/mrope.h):
//   mrope_cos_sin(position_ids I32 [3, ...]) -> cos, sin [..., rotary_dim / 2]
//     attrs {inv_freq: [..], attention_scaling (default 1), mrope_section: [t, h, w] summing to
//     the frequencies, dtype ("F32" default, "F64" for gradient checks)}. Frequency i of section
//     k turns with axis k of the positions (temporal, height, width); with `mrope_interleaved`
//     true (Qwen3-VL) the axes interleave instead (ops/mrope.h). The rotation is the ordinary
//     rope / rope_backward op on these tables (no gradient flows to position ids).
#include "ops/defs/def_util.h"
#include "ops/defs/inverse_frequency_attr.h"
#include "ops/mrope.h"

namespace surogate::ops::defs {
namespace {
using namespace graph;

std::vector<int64_t> mrope_sections(const Attrs& attrs, size_t frequencies) {
  std::vector<int64_t> sections = attrs.integers("mrope_section");
  int64_t total = 0;
  for (int64_t size : sections) {
    if (size < 0) fail_user("{}: attribute 'mrope_section' has a negative size {}", attrs.where(), size);
    total += size;
  }
  if (sections.size() != 3 || total != static_cast<int64_t>(frequencies)) {
    fail_user("{}: attribute 'mrope_section' must be three sizes (temporal, height, width) summing to the {} "
              "frequencies of inv_freq, got {} sizes summing to {}",
              attrs.where(), frequencies, sections.size(), total);
  }
  return sections;
}

DType mrope_table_dtype(const Attrs& attrs) {
  std::string name = attrs.string_or("dtype", "F32");
  auto dtype = dtype_from_safetensors_name(name);
  if (!dtype || !dtype_is_floating(*dtype)) fail_user("{}: attribute 'dtype' is '{}', not a floating dtype", attrs.where(), name);
  return *dtype;
}

void register_mrope(OpRegistry& registry) {
  registry.add(OpDef{
      .name = "mrope_cos_sin",
      .inputs = {"position_ids"},
      .outputs = {"cos", "sin"},
      .infer = [](const InferContext& ctx) {
        ctx.expect_dtype(0, DType::I32);
        ctx.expect_min_rank(0, 1);
        ctx.expect_dim(0, 0, 3);
        const auto frequencies = inverse_frequency_attr(ctx.attrs);
        mrope_sections(ctx.attrs, frequencies.size());
        Shape shape(ctx.input(0).shape.begin() + 1, ctx.input(0).shape.end());
        shape.push_back(static_cast<int64_t>(frequencies.size()));
        const DType dtype = mrope_table_dtype(ctx.attrs);
        return std::vector<TensorType>{{dtype, shape}, {dtype, shape}};
      },
      .gradient = {},
      .cpu = [](const CpuBindContext& ctx) {
        const int64_t tokens = ctx.inputs[0].numel() / 3;
        const auto inverse = inverse_frequency_attr(ctx.attrs);
        const auto sections = mrope_sections(ctx.attrs, inverse.size());
        const double scaling = ctx.attrs.number_or("attention_scaling", 1.0);
        const bool interleaved = ctx.attrs.boolean_or("mrope_interleaved", false);
        return bind_floating(ctx, ctx.outputs[0].dtype, [&](auto zero) -> CpuKernel {
          using T = decltype(zero);
          RopeFrequencies<T> frequencies;
          for (double value : inverse) frequencies.inverse_frequency.push_back(static_cast<T>(value));
          frequencies.attention_scaling = static_cast<T>(scaling);
          return [frequencies, sections, tokens, interleaved](const CpuKernelArgs& args) {
            mrope_tables(frequencies, args.inputs[0].as<int32_t>(), tokens, sections, args.outputs[0].as<T>(),
                         args.outputs[1].as<T>(), interleaved);
          };
        });
      },
      // as rope_cos_sin: tables 1e-5 (fp32 angle, cosf / sinf on the GPU)
      .backend_tolerance = graph::BackendTolerance{.f32 = 1e-5, .bf16 = 4e-3},
  });
}

}  // namespace

void register_mrope_ops(OpRegistry& registry) { register_mrope(registry); }

}  // namespace surogate::ops::defs
