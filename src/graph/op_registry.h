// The op registry: for every op name, the one place that says
//   * its shape/dtype rule       (input types + attrs -> output types, UserError on mismatch),
//   * its gradient rule          (emits backward nodes through a GraphBuilder), and
//   * its CPU kernel binder      (called once at plan time; returns a closure that only touches
//                                 pointers at run time).
// Registries are filled by explicit functions (register_core_ops(registry), one
// register_<op>_op(registry) per op file), never by static initialisers: static libraries drop
// those silently.
//
// ---- Contract, with one complete example: elementwise `mul` --------------------------------
//
//   void register_mul_op(OpRegistry& registry) {
//     registry.add(OpDef{
//         .name = "mul",
//         .inputs = {"a", "b"},
//         .outputs = {"out"},
//         .infer = [](const InferContext& ctx) {
//           ctx.expect_floating(0);
//           ctx.expect_same_type(0, 1);
//           return std::vector<TensorType>{ctx.input(0)};
//         },
//         .gradient = [](GradientContext& ctx) -> InputGradients {
//           TensorId grad = ctx.output_grad(0);            // absent grads: see below
//           std::optional<TensorId> grad_a, grad_b;
//           if (ctx.needs_input_grad(0)) grad_a = ctx.op("mul", {grad, ctx.input(1)});
//           if (ctx.needs_input_grad(1)) grad_b = ctx.op("mul", {grad, ctx.input(0)});
//           return {grad_a, grad_b};
//         },
//         .cpu = [](const CpuBindContext& ctx) -> CpuKernel {
//           const int64_t count = ctx.outputs[0].numel();   // decided once, at plan time
//           return [count](const CpuKernelArgs& args) {
//             const float* a = args.inputs[0].as<float>();
//             const float* b = args.inputs[1].as<float>();
//             float* out = args.outputs[0].as<float>();
//             for (int64_t i = 0; i < count; ++i) out[i] = a[i] * b[i];
//           };
//         },
//     });
//   }
//
// Shape rule: receives the input TensorTypes and the node's attrs (InferContext::attrs gives
// typed getters with readable errors) and returns one TensorType per output. Use ctx.fail(...) /
// the expect_* helpers: they throw a UserError naming the node, the op and the input.
//
// Gradient rule: called by autodiff once per forward node that lies between a trainable
// parameter and the loss, in reverse topological order. It returns one entry per forward input:
// the gradient tensor of that input (same dtype and shape) or std::nullopt (not needed /
// not differentiable, e.g. token ids). It may read ctx.input(i), ctx.output(i) (forward tensors:
// the planner decides whether they are kept alive or recomputed) and ctx.output_grad(i).
// An output gradient may be absent (that output does not reach the loss, e.g. rmsnorm's rstd);
// ctx.has_output_grad(i) says so, and ctx.output_grad(i) on an absent one emits zeros. At least
// one output gradient is always present. Fan-out is not the rule's concern: autodiff sums the
// contributions of every consumer. Backward math that is more than a composition of existing
// ops gets its own registered op ("rmsnorm_backward") with its own shape rule and CPU kernel and
// no gradient rule. Ops that backward needs data from forward for (rmsnorm's rstd, attention's
// logsumexp) return it as extra forward outputs ("outputs": {"out", "rstd"}), so it is an
// ordinary tensor the planner can save or recompute.
//
// CPU binder: runs once when a plan is bound to the CPU backend, with the node's attrs and the
// concrete input/output types; parse attrs there, capture plain values in the returned closure.
// At run time the closure gets raw pointers (CpuKernelArgs) and must: not allocate, fully
// overwrite every output (arena memory is reused and never cleared), and never read outputs
// (the one exception is `accumulate`, whose output is a persistent gradient it adds into).
// Inputs and outputs never alias. Floating tensors are F32 on the CPU backend (F64 in gradient
// checks): dispatch on ctx.inputs[i].dtype if both are supported.
//
// Spell out `.gradient = {}` for a non-differentiable op (e.g. "rmsnorm_backward"): it says so
// on purpose, and -Wextra warns about omitted designated initialisers.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "graph/builder.h"
#include "graph/graph.h"

namespace surogate::graph {

// Typed, error-checked access to a node's attrs. `where` names the node for messages.
class Attrs {
public:
  Attrs(const nlohmann::json& attrs, std::string where) : attrs_(attrs), where_(std::move(where)) {}

  bool has(const std::string& key) const { return attrs_.contains(key); }
  double number(const std::string& key) const;
  double number_or(const std::string& key, double fallback) const;
  int64_t integer(const std::string& key) const;
  int64_t integer_or(const std::string& key, int64_t fallback) const;
  bool boolean_or(const std::string& key, bool fallback) const;
  std::string string(const std::string& key) const;
  std::string string_or(const std::string& key, const std::string& fallback) const;
  std::vector<int64_t> integers(const std::string& key) const;
  const nlohmann::json& raw() const { return attrs_; }
  const std::string& where() const { return where_; }

private:
  const nlohmann::json& lookup(const std::string& key) const;
  const nlohmann::json& attrs_;
  std::string where_;
};

class InferContext {
public:
  InferContext(std::string_view op, std::string where, std::span<const TensorType> inputs,
               const std::vector<std::string>& input_names, const nlohmann::json& attrs)
      : op_(op), where_(std::move(where)), inputs_(inputs), input_names_(input_names), attrs(attrs, where_) {}

  size_t input_count() const { return inputs_.size(); }
  const TensorType& input(size_t index) const;
  std::string input_label(size_t index) const;  // "input 1 ('weight', F32[64])"
  const std::string& where() const { return where_; }

  template <typename... Args>
  [[noreturn]] void fail(fmt::format_string<Args...> format, Args&&... args) const {
    throw UserError(where_ + ": " + fmt::format(format, std::forward<Args>(args)...));
  }
  void expect_rank(size_t index, size_t rank) const;
  void expect_min_rank(size_t index, size_t rank) const;
  void expect_dtype(size_t index, DType dtype) const;
  void expect_floating(size_t index) const;
  void expect_integer(size_t index) const;
  void expect_same_type(size_t first, size_t second) const;
  // Asserts input(index).shape[dim] (negative counts from the end) equals `size`.
  void expect_dim(size_t index, int dim, int64_t size) const;

private:
  std::string_view op_;
  std::string where_;
  std::span<const TensorType> inputs_;
  const std::vector<std::string>& input_names_;

public:
  Attrs attrs;
};

using InputGradients = std::vector<std::optional<TensorId>>;

class GradientContext {
public:
  // Hands over the sum of the contributions a tensor's gradient has received so far (autodiff's
  // table, emptied for that tensor); nullopt when there are none.
  using TakePendingGrad = std::function<std::optional<TensorId>(TensorId)>;

  GradientContext(GraphBuilder& builder, Node forward_node, std::vector<std::optional<TensorId>> output_grads,
                  std::vector<bool> needs_input_grad, TakePendingGrad take_pending = {});

  GraphBuilder& builder;
  const Node& node() const { return node_; }
  const Attrs& attrs() const { return attrs_; }
  TensorId input(size_t index) const;
  TensorId output(size_t index) const;
  const TensorType& type(TensorId id) const { return builder.type(id); }
  bool has_output_grad(size_t index) const;
  // Whether output `index`'s gradient is autodiff's seed, the constant 1 (a fill of 1.0): a rule
  // may then return ∂output/∂x itself instead of scaling it by the gradient — the same values,
  // without a pass over it or a second tensor of its size (the LM head's [V, C] weight gradient).
  bool output_grad_is_one(size_t index) const;
  // The gradient of output `index`; emits a zeros tensor of the output's type when absent.
  TensorId output_grad(size_t index);
  bool needs_input_grad(size_t index) const;
  // The gradient contributions input `index` already has from the consumers differentiated
  // before this node (later in forward order), summed, and handed to this rule: the gradient the
  // rule returns for that input must include them. nullopt when there are none or the input
  // needs no gradient. Lets a rule fold autodiff's fan-out `add` into its own kernel (a matmul
  // with beta = 1: linear's input gradient in low-precision graphs).
  std::optional<TensorId> take_pending_input_grad(size_t index);
  // Inputs whose pending contributions this rule took (autodiff checks it returned a gradient).
  const std::vector<bool>& taken_pending() const { return taken_pending_; }
  // builder.op with names under "grad.<forward node>"; phase is already Backward.
  OpOutputs op(const std::string& op_name, std::vector<TensorId> inputs,
               nlohmann::json attrs = nlohmann::json::object(), const std::string& name = "");
  // A zeros tensor of the given type.
  TensorId zeros(const TensorType& type);

private:
  Node node_;
  Attrs attrs_;
  std::vector<std::optional<TensorId>> output_grads_;
  std::vector<bool> needs_input_grad_;
  TakePendingGrad take_pending_;
  std::vector<bool> taken_pending_;
};

// A tensor as a CPU kernel sees it at run time.
struct CpuTensorView {
  void* data = nullptr;
  DType dtype = DType::F32;
  const int64_t* dims = nullptr;
  int rank = 0;
  int64_t count = 0;  // number of elements

  template <typename T>
  T* as() const { return static_cast<T*>(data); }
  int64_t numel() const { return count; }
  int64_t dim(int index) const { return dims[index < 0 ? index + rank : index]; }
};

struct CpuKernelArgs {
  std::span<const CpuTensorView> inputs;
  std::span<const CpuTensorView> outputs;
};

using CpuKernel = std::function<void(const CpuKernelArgs&)>;

// What a binder sees at plan time. `inputs` / `outputs` carry dtype and shape but no data.
struct CpuBindContext {
  const Node& node;
  std::span<const TensorType> inputs;
  std::span<const TensorType> outputs;
  Attrs attrs;
};

using ShapeRule = std::function<std::vector<TensorType>(const InferContext&)>;
using GradientRule = std::function<InputGradients(GradientContext&)>;
using CpuBinder = std::function<CpuKernel(const CpuBindContext&)>;

// How far another backend's output (CUDA's) may lie from the CPU reference's on the same inputs:
// the largest deviation relative to the CPU output's scale, max|other − cpu| / max|cpu|, per dtype
// of the output on the other backend: `f32` for F32 outputs, `bf16` for the narrower floating ones
// (BF16, F16, and FP8 codes read as the values they stand for). Integer outputs must match exactly.
// Each op declares the bounds its per-op CUDA tests (tests/runtime_cuda, tests/cuda) hold;
// tests/runtime_cuda/test_every_op_cuda.cpp runs every op alone on both backends against them.
struct BackendTolerance {
  double f32 = 0.0;
  double bf16 = 0.0;
};

struct OpDef {
  std::string name;
  std::vector<std::string> inputs;   // input names, for messages; the count unless variadic
  std::vector<std::string> outputs;  // output names: the first is the main output, the rest auxiliary
  ShapeRule infer;
  GradientRule gradient;  // `.gradient = {}`: gradients cannot flow through this op
  CpuBinder cpu;          // `.cpu = {}`: no CPU kernel (planning works, the CPU backend refuses)
  bool variadic_inputs = false;
  // The op adds into its output instead of overwriting it (accumulate,
  // linear_backward_weight_accumulate): the only ops that may write a parameter's gradient.
  bool accumulates_into_output = false;
  // Inputs the kernels never read: an edge for autodiff and shapes only (linear_fp8's bf16 x, the
  // input its gradient flows to; the quantized FP8 backward ops' d_out). A backend may skip
  // writing a tensor that only such inputs take (runtime::CudaBindContext::outputs_read).
  std::vector<size_t> unread_inputs = {};
  // The CUDA-versus-CPU bound of this op (see BackendTolerance); every registered op declares one
  // (tests/runtime/test_op_coverage.cpp checks it).
  std::optional<BackendTolerance> backend_tolerance = std::nullopt;
};

class OpRegistry {
public:
  // Adds an op; registering a name twice is a bug (InternalError).
  void add(OpDef def);
  const OpDef* find(std::string_view name) const;
  // Like find, but an unknown name is a UserError with a "did you mean" suggestion.
  const OpDef& get(std::string_view name) const;
  std::vector<std::string> names() const;

  // Runs the shape rule of `op` with arity checks; `where` names the node for messages.
  std::vector<TensorType> infer(const std::string& op, const std::string& where,
                                std::span<const TensorType> inputs, const nlohmann::json& attrs) const;

private:
  std::map<std::string, OpDef, std::less<>> ops_;
};

// The ops the engine itself relies on (autodiff emits them): add, mul, scale, fill, sum,
// accumulate. See graph/core_ops.cpp for their semantics.
void register_core_ops(OpRegistry& registry);

}  // namespace surogate::graph
