// Graph ops for rotary position embeddings, over ops/rope.h:
//   rope_cos_sin(position_ids I32 [...]) -> cos, sin [..., rotary_dim / 2]
//     attrs: either {inv_freq: [..], attention_scaling} (precomputed frequencies, as the
//     trainer's decoder builder passes them) or the io::RopeConfig fields {rope_type, theta,
//     rotary_dim, factor, original_max_position_embeddings, low_freq_factor, high_freq_factor,
//     beta_fast, beta_slow, attention_factor, truncate}, from which the binder computes the
//     frequencies once. Optional {dtype} ("F32" default, "F64" for gradient checks).
//     Dynamic NTK is evaluated at bind time with L = the last dimension of position_ids (the
//     sequence length), i.e. it assumes max(position_ids) < T, which packed training batches meet.
//   rope(x, cos, sin) -> out: x [B, T, H, D] (heads from the shape) or flat [..., H·D] with
//     attrs {heads, head_dim}; rotary_dim = 2 · cos.shape[-1] (partial rotary passes the tail).
//   rope_backward(d_out, cos, sin) -> d_x (same attrs): the transposed rotation.
//   fused_rope(x, position_ids I32) -> out, attrs {heads, head_dim} and the frequencies as
//     rope_cos_sin takes them: the rotation with each token's cos/sin computed inside the op from
//     its position id (use_fused_rope), no table tensor. The CPU kernel computes a token's row with
//     rope_tables' formula, so it equals rope_cos_sin → rope bit for bit; the CUDA kernel computes
//     cos/sin in fp32 instead of reading the graph-dtype (bf16) table.
//   fused_rope_backward(d_out, position_ids) -> d_x (same attrs): the transposed rotation.
#include "io/model_config.h"
#include "ops/defs/def_util.h"
#include "ops/rope.h"

namespace surogate::ops::defs {
namespace {
using namespace graph;

io::RopeConfig rope_config_from(const Attrs& attrs) {
  io::RopeConfig config;
  std::string type = attrs.string_or("rope_type", "default");
  if (type == "default") config.type = io::RopeType::Default;
  else if (type == "linear") config.type = io::RopeType::Linear;
  else if (type == "dynamic") config.type = io::RopeType::Dynamic;
  else if (type == "yarn") config.type = io::RopeType::Yarn;
  else if (type == "llama3") config.type = io::RopeType::Llama3;
  else fail_user("{}: attribute 'rope_type' is '{}'; use default, linear, dynamic, yarn or llama3", attrs.where(), type);
  config.theta = attrs.number_or("theta", config.theta);
  config.rotary_dim = attrs.integer("rotary_dim");
  if (config.rotary_dim <= 0 || config.rotary_dim % 2 != 0) {
    fail_user("{}: attribute 'rotary_dim' must be positive and even, got {}", attrs.where(), config.rotary_dim);
  }
  config.factor = attrs.number_or("factor", config.factor);
  config.original_max_position_embeddings = attrs.integer_or("original_max_position_embeddings", 0);
  if (config.type != io::RopeType::Default && config.type != io::RopeType::Linear &&
      config.original_max_position_embeddings <= 0) {
    fail_user("{}: rope_type '{}' needs a positive attribute 'original_max_position_embeddings'", attrs.where(), type);
  }
  config.low_freq_factor = attrs.number_or("low_freq_factor", config.low_freq_factor);
  config.high_freq_factor = attrs.number_or("high_freq_factor", config.high_freq_factor);
  config.beta_fast = attrs.number_or("beta_fast", config.beta_fast);
  config.beta_slow = attrs.number_or("beta_slow", config.beta_slow);
  config.attention_factor = attrs.number_or("attention_factor", config.attention_factor);
  config.truncate = attrs.boolean_or("truncate", config.truncate);
  return config;
}

int64_t table_width(const Attrs& attrs) {
  if (attrs.has("inv_freq")) {
    const auto& values = attrs.raw().at("inv_freq");
    if (!values.is_array() || values.empty()) {
      fail_user("{}: attribute 'inv_freq' must be a non-empty list of numbers", attrs.where());
    }
    return static_cast<int64_t>(values.size());
  }
  return rope_config_from(attrs).rotary_dim / 2;
}

DType table_dtype(const Attrs& attrs) {
  std::string name = attrs.string_or("dtype", "F32");
  auto dtype = dtype_from_safetensors_name(name);
  if (!dtype || !dtype_is_floating(*dtype)) fail_user("{}: attribute 'dtype' is '{}', not a floating dtype", attrs.where(), name);
  return *dtype;
}

template <typename T>
RopeFrequencies<T> frequencies_from(const Attrs& attrs, int64_t sequence_length) {
  if (attrs.has("inv_freq")) {
    RopeFrequencies<T> frequencies;
    for (const auto& value : attrs.raw().at("inv_freq")) frequencies.inverse_frequency.push_back(static_cast<T>(value.get<double>()));
    frequencies.attention_scaling = static_cast<T>(attrs.number_or("attention_scaling", 1.0));
    return frequencies;
  }
  return rope_frequencies<T>(rope_config_from(attrs), sequence_length);
}

struct RopeLayout {
  int64_t tokens = 0, heads = 0, head_dim = 0, rotary_dim = 0;
};

// Checks x (index 0) against cos / sin (1, 2) and the attrs; returns the layout.
RopeLayout rope_layout(const InferContext& ctx) {
  ctx.expect_floating(0);
  ctx.expect_same_type(1, 2);
  if (ctx.input(1).dtype != ctx.input(0).dtype) ctx.fail("{} must have the dtype of {}", ctx.input_label(1), ctx.input_label(0));
  RopeLayout layout;
  const Shape& x = ctx.input(0).shape;
  if (x.size() == 4 && !ctx.attrs.has("heads")) {
    layout.heads = x[2];
    layout.head_dim = x[3];
  } else {
    layout.heads = ctx.attrs.integer("heads");
    layout.head_dim = ctx.attrs.integer("head_dim");
    if (layout.heads <= 0 || layout.head_dim <= 0) ctx.fail("attributes 'heads' and 'head_dim' must be positive");
    ctx.expect_min_rank(0, 1);
    if (x.size() == 4) {
      ctx.expect_dim(0, 2, layout.heads);
      ctx.expect_dim(0, 3, layout.head_dim);
    } else {
      ctx.expect_dim(0, -1, layout.heads * layout.head_dim);
    }
  }
  layout.tokens = ctx.input(0).numel() / (layout.heads * layout.head_dim);
  layout.rotary_dim = 2 * last_dim(ctx.input(1));
  if (ctx.input(1).numel() != layout.tokens * (layout.rotary_dim / 2)) {
    ctx.fail("{} must hold one row of rotary_dim / 2 values per token of {} ({} tokens)", ctx.input_label(1),
             ctx.input_label(0), layout.tokens);
  }
  if (layout.rotary_dim > layout.head_dim) {
    ctx.fail("rotary_dim {} (2 · the last dimension of cos) exceeds head_dim {}", layout.rotary_dim, layout.head_dim);
  }
  return layout;
}

RopeLayout bound_layout(const CpuBindContext& ctx) {
  std::vector<std::string> names{"x", "cos", "sin"};
  InferContext infer(ctx.node.op, ctx.attrs.where(), ctx.inputs, names, ctx.node.attrs);
  return rope_layout(infer);
}

// fused_rope(_backward): x (index 0) against position_ids (1) and the attrs.
RopeLayout fused_layout(const InferContext& ctx) {
  ctx.expect_floating(0);
  ctx.expect_dtype(1, DType::I32);
  RopeLayout layout;
  layout.heads = ctx.attrs.integer("heads");
  layout.head_dim = ctx.attrs.integer("head_dim");
  if (layout.heads <= 0 || layout.head_dim <= 0) ctx.fail("attributes 'heads' and 'head_dim' must be positive");
  if (ctx.input(0).shape.size() == 4) {
    ctx.expect_dim(0, 2, layout.heads);
    ctx.expect_dim(0, 3, layout.head_dim);
  } else {
    ctx.expect_dim(0, -1, layout.heads * layout.head_dim);
  }
  layout.tokens = ctx.input(0).numel() / (layout.heads * layout.head_dim);
  if (ctx.input(1).numel() != layout.tokens) {
    ctx.fail("{} must hold one position per token of {} ({} tokens)", ctx.input_label(1), ctx.input_label(0),
             layout.tokens);
  }
  layout.rotary_dim = 2 * table_width(ctx.attrs);
  if (layout.rotary_dim > layout.head_dim) {
    ctx.fail("rotary_dim {} (2 · the frequencies) exceeds head_dim {}", layout.rotary_dim, layout.head_dim);
  }
  return layout;
}

// The CPU kernel of fused_rope (backward = false) and fused_rope_backward: per token, its cos/sin
// row (rope_tables) and the rotation (rope_forward / rope_backward).
CpuKernel bind_fused_rope(const CpuBindContext& ctx, bool backward) {
  std::vector<std::string> names{"x", "position_ids"};
  InferContext infer(ctx.node.op, ctx.attrs.where(), ctx.inputs, names, ctx.node.attrs);
  const RopeLayout layout = fused_layout(infer);
  const int64_t sequence = ctx.inputs[1].shape.empty() ? 1 : ctx.inputs[1].shape.back();
  return bind_floating(ctx, ctx.inputs[0].dtype, [&](auto zero) -> CpuKernel {
    using T = decltype(zero);
    RopeFrequencies<T> frequencies = frequencies_from<T>(ctx.attrs, sequence);
    return [=](const CpuKernelArgs& args) {
      const int64_t half = layout.rotary_dim / 2, width = layout.heads * layout.head_dim;
      std::vector<T> cos(static_cast<size_t>(half)), sin(static_cast<size_t>(half));
      const int32_t* positions = args.inputs[1].as<int32_t>();
      for (int64_t token = 0; token < layout.tokens; ++token) {
        rope_tables(frequencies, positions + token, 1, cos.data(), sin.data());
        const T* source = args.inputs[0].as<T>() + token * width;
        T* target = args.outputs[0].as<T>() + token * width;
        if (backward) {
          rope_backward(source, cos.data(), sin.data(), 1, layout.heads, layout.head_dim, layout.rotary_dim, target);
        } else {
          rope_forward(source, cos.data(), sin.data(), 1, layout.heads, layout.head_dim, layout.rotary_dim, target);
        }
      }
    };
  });
}

void register_rope(OpRegistry& registry) {
  registry.add(OpDef{
      .name = "rope_cos_sin",
      .inputs = {"position_ids"},
      .outputs = {"cos", "sin"},
      .infer = [](const InferContext& ctx) {
        ctx.expect_dtype(0, DType::I32);
        Shape shape = ctx.input(0).shape;
        shape.push_back(table_width(ctx.attrs));
        DType dtype = table_dtype(ctx.attrs);
        return std::vector<TensorType>{{dtype, shape}, {dtype, shape}};
      },
      .gradient = {},
      .cpu = [](const CpuBindContext& ctx) {
        int64_t tokens = ctx.inputs[0].numel();
        int64_t sequence = ctx.inputs[0].shape.empty() ? 1 : ctx.inputs[0].shape.back();
        return bind_floating(ctx, ctx.outputs[0].dtype, [&](auto zero) -> CpuKernel {
          using T = decltype(zero);
          RopeFrequencies<T> frequencies = frequencies_from<T>(ctx.attrs, sequence);
          return [frequencies, tokens](const CpuKernelArgs& args) {
            rope_tables(frequencies, args.inputs[0].as<int32_t>(), tokens, args.outputs[0].as<T>(), args.outputs[1].as<T>());
          };
        });
      },
      // tables 1e-5, rotation 4e-3 (test_model_kernels.cpp, test_fused_rope_cuda.cpp)
      .backend_tolerance = graph::BackendTolerance{.f32 = 1e-5, .bf16 = 4e-3},
  });
  registry.add(OpDef{
      .name = "rope",
      .inputs = {"x", "cos", "sin"},
      .outputs = {"out"},
      .infer = [](const InferContext& ctx) {
        rope_layout(ctx);
        return std::vector<TensorType>{ctx.input(0)};
      },
      .gradient = [](GradientContext& ctx) -> InputGradients {
        return {ctx.op("rope_backward", {ctx.output_grad(0), ctx.input(1), ctx.input(2)}, ctx.attrs().raw()),
                std::nullopt, std::nullopt};
      },
      .cpu = [](const CpuBindContext& ctx) {
        RopeLayout layout = bound_layout(ctx);
        return bind_floating(ctx, ctx.inputs[0].dtype, [=](auto zero) -> CpuKernel {
          using T = decltype(zero);
          return [=](const CpuKernelArgs& args) {
            rope_forward(args.inputs[0].as<T>(), args.inputs[1].as<T>(), args.inputs[2].as<T>(), layout.tokens,
                         layout.heads, layout.head_dim, layout.rotary_dim, args.outputs[0].as<T>());
          };
        });
      },
      // tables 1e-5, rotation 4e-3 (test_model_kernels.cpp, test_fused_rope_cuda.cpp)
      .backend_tolerance = graph::BackendTolerance{.f32 = 1e-5, .bf16 = 4e-3},
  });
  registry.add(OpDef{
      .name = "rope_backward",
      .inputs = {"d_out", "cos", "sin"},
      .outputs = {"d_x"},
      .infer = [](const InferContext& ctx) {
        rope_layout(ctx);
        return std::vector<TensorType>{ctx.input(0)};
      },
      .gradient = {},
      .cpu = [](const CpuBindContext& ctx) {
        RopeLayout layout = bound_layout(ctx);
        return bind_floating(ctx, ctx.inputs[0].dtype, [=](auto zero) -> CpuKernel {
          using T = decltype(zero);
          return [=](const CpuKernelArgs& args) {
            rope_backward(args.inputs[0].as<T>(), args.inputs[1].as<T>(), args.inputs[2].as<T>(), layout.tokens,
                          layout.heads, layout.head_dim, layout.rotary_dim, args.outputs[0].as<T>());
          };
        });
      },
      // tables 1e-5, rotation 4e-3 (test_model_kernels.cpp, test_fused_rope_cuda.cpp)
      .backend_tolerance = graph::BackendTolerance{.f32 = 1e-5, .bf16 = 4e-3},
  });
  registry.add(OpDef{
      .name = "fused_rope",
      .inputs = {"x", "position_ids"},
      .outputs = {"out"},
      .infer = [](const InferContext& ctx) {
        fused_layout(ctx);
        return std::vector<TensorType>{ctx.input(0)};
      },
      .gradient = [](GradientContext& ctx) -> InputGradients {
        return {ctx.op("fused_rope_backward", {ctx.output_grad(0), ctx.input(1)}, ctx.attrs().raw()), std::nullopt};
      },
      .cpu = [](const CpuBindContext& ctx) { return bind_fused_rope(ctx, false); },
      // tables 1e-5, rotation 4e-3 (test_model_kernels.cpp, test_fused_rope_cuda.cpp)
      .backend_tolerance = graph::BackendTolerance{.f32 = 1e-5, .bf16 = 4e-3},
  });
  registry.add(OpDef{
      .name = "fused_rope_backward",
      .inputs = {"d_out", "position_ids"},
      .outputs = {"d_x"},
      .infer = [](const InferContext& ctx) {
        fused_layout(ctx);
        return std::vector<TensorType>{ctx.input(0)};
      },
      .gradient = {},
      .cpu = [](const CpuBindContext& ctx) { return bind_fused_rope(ctx, true); },
      // tables 1e-5, rotation 4e-3 (test_model_kernels.cpp, test_fused_rope_cuda.cpp)
      .backend_tolerance = graph::BackendTolerance{.f32 = 1e-5, .bf16 = 4e-3},
  });
}

}  // namespace

void register_rope_ops(OpRegistry& registry) { register_rope(registry); }

}  // namespace surogate::ops::defs
