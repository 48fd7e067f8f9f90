// The "_fp8" producers of the fp8_hybrid recipe: rmsnorm, fused_residual_rmsnorm and swiglu that
// also quantize their main output, as models/fp8_fusion.h writes them in place of the producer
// and the quantize_fp8 node that read its output:
//
//   <op>_fp8(<op's inputs>..., state){<op's attrs>, site} -> (<op's outputs>..., q F8_E4M3
//   [out's shape], scale_inv F32[1])
//
// and, in the backward (models/fp8_fusion.h's fuse_fp8_gradients),
//
//   swiglu_backward_fp8(d_out, gate, up, state){gate_site, up_site, format} -> (d_gate, d_up,
//   d_gate_q, d_gate_scale_inv, d_up_q, d_up_scale_inv)
//   fused_residual_rmsnorm_backward_fp8(<its inputs>..., state){<its attrs>, site, format} ->
//   (d_input [, d_weight], q, scale_inv): the residual stream's gradient quantized for the
//   projection (o_proj, down_proj) whose output joined the stream
//   fused_rmsnorm_rope_backward_fp8(d_out, x, weight, rstd, position_ids, state){<its attrs>, site,
//   format} -> (d_x [, d_weight], q, scale_inv): Qwen3's q / k gradient quantized for the q / k
//   projection
//
// Everything but the extra outputs is the op's own: shapes, gradients (q and scale_inv carry
// none; the state gets none), and the CPU kernel, after which the CPU form quantizes `out` exactly
// as quantize_fp8(out, state){format: e4m3, site} does (fp8_site_quantize.h). So a graph with the
// fused ops computes bit for bit what the pair computed; on the GPU the quantization is the
// producer kernel's epilogue (cuda/kernels/fp8_epilogue.cuh), one pass over the tensor fewer.
#include <string>

#include "ops/defs/def_util.h"
#include "ops/defs/fp8_site_quantize.h"

namespace surogate::ops::defs {
namespace {
using namespace graph;

// The "<op>_fp8" form's name and slots: the op's inputs and the scaling state, its outputs and the
// codes and scale_inv of the quantized one.
OpDef with_fp8_slots(const OpDef& base) {
  OpDef def;
  def.name = base.name + "_fp8";
  def.inputs = base.inputs;
  def.inputs.push_back("state");
  def.outputs = base.outputs;
  def.outputs.push_back("q");
  def.outputs.push_back("scale_inv");
  // The op's own outputs as it bounds them; the codes within the FP8 bound (test_fp8_cuda.cpp: 1e-2).
  def.backend_tolerance = graph::BackendTolerance{.f32 = 1e-2, .bf16 = 1e-2};
  return def;
}

void register_with_fp8_output(OpRegistry& registry, const std::string& base_name) {
  const OpDef base = registry.get(base_name);
  const size_t base_inputs = base.inputs.size();
  OpDef def = with_fp8_slots(base);
  def.infer = [infer = base.infer, base_inputs](const InferContext& ctx) {
    if (ctx.input_count() != base_inputs + 1) ctx.fail("takes the inputs of its op and the FP8 scaling state");
    expect_fp8_state(ctx, base_inputs, ctx.attrs.integer("site"));
    std::vector<TensorType> types = infer(ctx);
    types.push_back({DType::F8_E4M3, types[0].shape});
    types.push_back({DType::F32, Shape{1}});
    return types;
  };
  def.gradient = [gradient = base.gradient](GradientContext& ctx) -> InputGradients {
    InputGradients gradients = gradient(ctx);
    gradients.push_back(std::nullopt);  // the scaling state
    return gradients;
  };
  def.cpu = [cpu = base.cpu, base_inputs](const CpuBindContext& ctx) -> CpuKernel {
    const CpuKernel produce = cpu(ctx);
    const size_t q_index = ctx.outputs.size() - 2;
    const int64_t offset = ctx.attrs.integer("site") * ctx.inputs[base_inputs].shape[1];
    const int64_t count = ctx.outputs[0].numel();
    return bind_floating(ctx, ctx.outputs[0].dtype, [=](auto zero) -> CpuKernel {
      using T = decltype(zero);
      return [=](const CpuKernelArgs& args) {
        produce(args);
        float* row = args.inputs[base_inputs].as<float>() + offset;
        *args.outputs[q_index + 1].as<float>() =
            quantize(args.outputs[0].as<T>(), count, quant::Fp8Format::E4M3, row, args.outputs[q_index].as<uint8_t>());
      };
    });
  };
  def.variadic_inputs = base.variadic_inputs;
  registry.add(std::move(def));
}

// swiglu_backward_fp8(d_out, gate, up, state){gate_site, up_site, format} -> (d_gate, d_up,
// d_gate_q, d_gate_scale_inv, d_up_q, d_up_scale_inv): swiglu_backward, then each gradient
// quantized at its site as the input gradient of its projection would quantize it (the
// linear_fp8_backward_input_quantized nodes that read the codes).
void register_swiglu_backward_fp8(OpRegistry& registry) {
  const OpDef base = registry.get("swiglu_backward");
  OpDef def;
  def.name = "swiglu_backward_fp8";
  // d_gate / d_up and their codes within the FP8 bound (test_fp8_cuda.cpp: 1e-2).
  def.backend_tolerance = graph::BackendTolerance{.f32 = 1e-2, .bf16 = 1e-2};
  def.inputs = {"d_out", "gate", "up", "state"};
  def.outputs = {"d_gate", "d_up", "d_gate_q", "d_gate_scale_inv", "d_up_q", "d_up_scale_inv"};
  def.infer = [infer = base.infer](const InferContext& ctx) {
    if (ctx.input_count() != 4) ctx.fail("takes d_out, gate, up and the FP8 scaling state");
    expect_fp8_state(ctx, 3, ctx.attrs.integer("gate_site"));
    expect_fp8_state(ctx, 3, ctx.attrs.integer("up_site"));
    const DType codes = dtype_of(format_named(ctx.attrs.string("format"), ctx.where()));
    std::vector<TensorType> types = infer(ctx);
    const TensorType scale{DType::F32, Shape{1}};
    return std::vector<TensorType>{types[0], types[1], {codes, types[0].shape}, scale, {codes, types[1].shape}, scale};
  };
  def.cpu = [cpu = base.cpu](const CpuBindContext& ctx) -> CpuKernel {
    const CpuKernel produce = cpu(ctx);
    const int64_t history = ctx.inputs[3].shape[1];
    const int64_t gate_row = ctx.attrs.integer("gate_site") * history, up_row = ctx.attrs.integer("up_site") * history;
    const quant::Fp8Format format = format_named(ctx.attrs.string("format"), ctx.attrs.where());
    const int64_t count = ctx.outputs[0].numel();
    return bind_floating(ctx, ctx.outputs[0].dtype, [=](auto zero) -> CpuKernel {
      using T = decltype(zero);
      return [=](const CpuKernelArgs& args) {
        produce(args);
        float* state = args.inputs[3].as<float>();
        *args.outputs[3].as<float>() =
            quantize(args.outputs[0].as<T>(), count, format, state + gate_row, args.outputs[2].as<uint8_t>());
        *args.outputs[5].as<float>() =
            quantize(args.outputs[1].as<T>(), count, format, state + up_row, args.outputs[4].as<uint8_t>());
      };
    });
  };
  registry.add(std::move(def));
}

// <op>_fp8(<op's inputs>..., state){<op's attrs>, site, format} -> (<op's outputs>..., q, scale_inv)
// for an op with a variable input count (the backward ops above; attention's optional document
// ids): the op sees its own inputs and outputs only (the state and the codes are stripped), then
// its first output is quantized at `site` in `format` — a gradient as linear_fp8_backward_input
// would quantize it, an input (E4M3) as quantize_fp8 does.
void register_gradient_with_fp8_output(OpRegistry& registry, const std::string& base_name) {
  const OpDef base = registry.get(base_name);
  OpDef def = with_fp8_slots(base);
  def.infer = [infer = base.infer, names = base.inputs, base_name](const InferContext& ctx) {
    if (ctx.input_count() < 2) ctx.fail("takes the inputs of {} and the FP8 scaling state", base_name);
    const size_t state = ctx.input_count() - 1;
    expect_fp8_state(ctx, state, ctx.attrs.integer("site"));
    std::vector<TensorType> inputs;
    for (size_t i = 0; i < state; ++i) inputs.push_back(ctx.input(i));
    const InferContext inner(base_name, ctx.where(), inputs, names, ctx.attrs.raw());
    std::vector<TensorType> types = infer(inner);
    const DType codes = dtype_of(format_named(ctx.attrs.string("format"), ctx.where()));
    types.push_back({codes, types[0].shape});
    types.push_back({DType::F32, Shape{1}});
    return types;
  };
  if (base.gradient) {  // attention: its inputs' gradients, none for the state (the rule reads no state)
    def.gradient = [gradient = base.gradient](GradientContext& ctx) -> InputGradients {
      InputGradients gradients = gradient(ctx);
      gradients.push_back(std::nullopt);
      return gradients;
    };
  }
  def.cpu = [cpu = base.cpu](const CpuBindContext& ctx) -> CpuKernel {
    const size_t state = ctx.inputs.size() - 1, q_index = ctx.outputs.size() - 2;
    const CpuBindContext inner{ctx.node, ctx.inputs.first(state), ctx.outputs.first(q_index), ctx.attrs};
    const CpuKernel produce = cpu(inner);
    const int64_t offset = ctx.attrs.integer("site") * ctx.inputs[state].shape[1];
    const quant::Fp8Format format = format_named(ctx.attrs.string("format"), ctx.attrs.where());
    const int64_t count = ctx.outputs[0].numel();
    return bind_floating(ctx, ctx.outputs[0].dtype, [=](auto zero) -> CpuKernel {
      using T = decltype(zero);
      return [=](const CpuKernelArgs& args) {
        produce(CpuKernelArgs{args.inputs.first(state), args.outputs.first(q_index)});
        float* row = args.inputs[state].as<float>() + offset;
        *args.outputs[q_index + 1].as<float>() =
            quantize(args.outputs[0].as<T>(), count, format, row, args.outputs[q_index].as<uint8_t>());
      };
    });
  };
  def.variadic_inputs = true;
  registry.add(std::move(def));
}

}  // namespace

void register_fp8_output_ops(OpRegistry& registry) {
  for (const char* base : {"rmsnorm", "fused_residual_rmsnorm", "swiglu"}) register_with_fp8_output(registry, base);
  register_swiglu_backward_fp8(registry);
  register_gradient_with_fp8_output(registry, "fused_residual_rmsnorm_backward");
  register_gradient_with_fp8_output(registry, "fused_rmsnorm_rope_backward");
  // attention (q, k, v [, document_ids]): variadic, so the state is found as the last input; its
  // output, o_proj's input, in E4M3 (the fusion sets format e4m3).
  register_gradient_with_fp8_output(registry, "attention");
}

}  // namespace surogate::ops::defs
