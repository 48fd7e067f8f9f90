// Graph ops for the preference losses (ops/preference_loss.h):
//   preference_loss(logps [2P], reference_logps [2P], lengths [2P], labels [P], scales [2]){type, beta, ...}
//     -> loss [] (scales[0]·Σ pair losses, ORPO also −scales[1]·Σ chosen logps)
//   preference_loss_backward(logps, reference_logps, lengths, labels, scales, d_loss []) -> d_logps [2P]
// All inputs in the statistic dtype (F32 in training graphs, F64 in gradient checks); only logps is
// differentiable (the reference, lengths, labels and scales are data).
#include <vector>

#include "ops/defs/def_util.h"
#include "ops/defs/preference_attrs.h"

namespace surogate::ops::defs {

nlohmann::json preference_loss_attrs(const PreferenceLossOptions& o) {
  return {{"type", preference_loss_type_name(o.type)}, {"beta", o.beta}, {"label_smoothing", o.label_smoothing},
          {"length_norm", o.length_norm}, {"reference_free", o.reference_free}, {"target_margin", o.target_margin},
          {"simpo_gamma", o.simpo_gamma}, {"orpo_beta", o.orpo_beta}, {"desirable_weight", o.desirable_weight},
          {"undesirable_weight", o.undesirable_weight}};
}

PreferenceLossOptions preference_loss_options(const graph::Attrs& attrs) {
  PreferenceLossOptions o;
  const std::string type = attrs.string_or("type", "dpo");
  if (!parse_preference_loss_type(type, o.type)) {
    fail_user("{}: unknown preference loss type '{}' (dpo, ipo, simpo, orpo or kto)", attrs.where(), type);
  }
  o.beta = attrs.number_or("beta", o.beta);
  o.label_smoothing = attrs.number_or("label_smoothing", o.label_smoothing);
  o.length_norm = attrs.boolean_or("length_norm", o.length_norm);
  o.reference_free = attrs.boolean_or("reference_free", o.reference_free);
  o.target_margin = attrs.number_or("target_margin", o.target_margin);
  o.simpo_gamma = attrs.number_or("simpo_gamma", o.simpo_gamma);
  o.orpo_beta = attrs.number_or("orpo_beta", o.orpo_beta);
  o.desirable_weight = attrs.number_or("desirable_weight", o.desirable_weight);
  o.undesirable_weight = attrs.number_or("undesirable_weight", o.undesirable_weight);
  return o;
}

namespace {
using namespace graph;

// logps (0), reference_logps (1), lengths (2), labels (3), scales (4): the pair count P.
int64_t check_preference_inputs(const InferContext& ctx) {
  ctx.expect_floating(0);
  ctx.expect_rank(0, 1);
  const int64_t sequences = ctx.input(0).shape[0];
  if (sequences % 2 != 0) ctx.fail("{} must hold 2·P values (chosen, then rejected), got {}", ctx.input_label(0), sequences);
  const int64_t pairs = sequences / 2;
  const DType dtype = ctx.input(0).dtype;
  const std::vector<std::pair<size_t, int64_t>> sizes = {{1, sequences}, {2, sequences}, {3, pairs}, {4, 2}};
  for (const auto& [index, size] : sizes) {
    if (ctx.input(index) != TensorType{dtype, Shape{size}}) ctx.fail("{} must be {}", ctx.input_label(index), format_type({dtype, Shape{size}}));
  }
  preference_loss_options(ctx.attrs);
  return pairs;
}

// The CPU kernel of preference_loss (`backward` false: the loss into output 0) and of its backward
// (d_logps into output 0 for the d_loss of input 5): the inputs in double, ops/preference_loss.h.
CpuKernel bind_preference(const CpuBindContext& ctx, bool backward) {
  const PreferenceLossOptions options = preference_loss_options(ctx.attrs);
  return bind_floating(ctx, ctx.inputs[0].dtype, [=](auto zero) -> CpuKernel {
    using T = decltype(zero);
    return [=](const CpuKernelArgs& args) {
      const int64_t pairs = args.inputs[3].numel();
      std::vector<double> in[5];
      for (size_t i = 0; i < 5; ++i) in[i].assign(args.inputs[i].as<T>(), args.inputs[i].as<T>() + args.inputs[i].numel());
      T* out = args.outputs[0].as<T>();
      if (!backward) {
        out[0] = static_cast<T>(preference_loss_forward(options, pairs, in[0].data(), in[1].data(), in[2].data(),
                                                        in[3].data(), in[4].data()));
        return;
      }
      std::vector<double> d_logps(static_cast<size_t>(2 * pairs));
      preference_loss_backward(options, pairs, in[0].data(), in[1].data(), in[2].data(), in[3].data(), in[4].data(),
                               static_cast<double>(args.inputs[5].as<T>()[0]), d_logps.data());
      for (size_t i = 0; i < d_logps.size(); ++i) out[i] = static_cast<T>(d_logps[i]);
    };
  });
}

void register_preference_loss(OpRegistry& registry) {
  registry.add(OpDef{
      .name = "preference_loss",
      .inputs = {"logps", "reference_logps", "lengths", "labels", "scales"},
      .outputs = {"loss"},
      .infer = [](const InferContext& ctx) {
        check_preference_inputs(ctx);
        return std::vector<TensorType>{{ctx.input(0).dtype, Shape{}}};
      },
      .gradient = [](GradientContext& ctx) -> InputGradients {
        auto grad = ctx.op("preference_loss_backward",
                           {ctx.input(0), ctx.input(1), ctx.input(2), ctx.input(3), ctx.input(4), ctx.output_grad(0)},
                           ctx.attrs().raw());
        return {if_needed(ctx, 0, grad[0]), std::nullopt, std::nullopt, std::nullopt, std::nullopt};
      },
      .cpu = [](const CpuBindContext& ctx) { return bind_preference(ctx, false); },
      // fp32 math on both backends over F32 inputs: tests/runtime_cuda/test_preference_ops_cuda.cpp
      .backend_tolerance = graph::BackendTolerance{.f32 = 1e-5, .bf16 = 1e-5},
  });
  registry.add(OpDef{
      .name = "preference_loss_backward",
      .inputs = {"logps", "reference_logps", "lengths", "labels", "scales", "d_loss"},
      .outputs = {"d_logps"},
      .infer = [](const InferContext& ctx) {
        check_preference_inputs(ctx);
        if (ctx.input(5) != TensorType{ctx.input(0).dtype, Shape{}}) ctx.fail("{} must be a scalar", ctx.input_label(5));
        return std::vector<TensorType>{ctx.input(0)};
      },
      .gradient = {},
      .cpu = [](const CpuBindContext& ctx) { return bind_preference(ctx, true); },
      .backend_tolerance = graph::BackendTolerance{.f32 = 1e-5, .bf16 = 1e-5},
  });
}

}  // namespace

void register_preference_loss_ops(OpRegistry& registry) { register_preference_loss(registry); }

}  // namespace surogate::ops::defs
