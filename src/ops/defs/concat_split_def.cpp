// Graph ops that join and cut tensors along one axis (the LoRA rewrite batches the low-rank
// products of adapters that read the same input with them, models/lora.h):
//   concat(x_1, ..., x_n){axis}        -> out, the inputs side by side along `axis`
//   split(x){axis, sizes = [s_1, ...]} -> out_1, ..., out_n, consecutive pieces of x along `axis`
// axis may count from the end (-1: the last). Inputs of concat share dtype, rank and every other
// dimension. Each is the other's gradient. The CPU kernels copy bytes, so any dtype works.
#include <cstring>
#include <numeric>
#include <vector>

#include "ops/defs/def_util.h"

namespace surogate::ops::defs {
namespace {
using namespace graph;

// The axis attribute as an index into a shape of `rank` dimensions.
size_t axis_index(const InferContext& ctx, size_t rank) {
  const int64_t axis = ctx.attrs.integer("axis");
  const int64_t resolved = axis < 0 ? axis + static_cast<int64_t>(rank) : axis;
  if (resolved < 0 || resolved >= static_cast<int64_t>(rank)) {
    ctx.fail("attribute 'axis' is {}, outside the {} dimensions of the input", axis, rank);
  }
  return static_cast<size_t>(resolved);
}

// A tensor viewed as [outer, along, inner] around `axis`.
struct AxisView {
  int64_t outer = 1, inner = 1;
};

AxisView axis_view(const Shape& shape, size_t axis) {
  AxisView view;
  for (size_t d = 0; d < axis; ++d) view.outer *= shape[d];
  for (size_t d = axis + 1; d < shape.size(); ++d) view.inner *= shape[d];
  return view;
}

size_t resolved_axis(const Attrs& attrs, size_t rank) {
  const int64_t axis = attrs.integer("axis");
  return static_cast<size_t>(axis < 0 ? axis + static_cast<int64_t>(rank) : axis);
}

std::vector<TensorType> infer_concat(const InferContext& ctx) {
  if (ctx.input_count() == 0) ctx.fail("concat takes at least one input");
  const TensorType& first = ctx.input(0);
  if (first.shape.empty()) ctx.fail("{} is a scalar; concat joins tensors of rank 1 or more", ctx.input_label(0));
  const size_t axis = axis_index(ctx, first.shape.size());
  Shape shape = first.shape;
  for (size_t i = 1; i < ctx.input_count(); ++i) {
    const TensorType& input = ctx.input(i);
    bool same = input.dtype == first.dtype && input.shape.size() == first.shape.size();
    for (size_t d = 0; same && d < first.shape.size(); ++d) same = d == axis || input.shape[d] == first.shape[d];
    if (!same) {
      ctx.fail("{} must match {} in dtype and in every dimension but {}", ctx.input_label(i), ctx.input_label(0), axis);
    }
    shape[axis] += input.shape[axis];
  }
  return {{first.dtype, shape}};
}

std::vector<TensorType> infer_split(const InferContext& ctx) {
  const TensorType& input = ctx.input(0);
  if (input.shape.empty()) ctx.fail("{} is a scalar; split cuts tensors of rank 1 or more", ctx.input_label(0));
  const size_t axis = axis_index(ctx, input.shape.size());
  const std::vector<int64_t> sizes = ctx.attrs.integers("sizes");
  if (sizes.empty()) ctx.fail("attribute 'sizes' must list at least one piece");
  int64_t total = 0;
  std::vector<TensorType> outputs;
  for (int64_t size : sizes) {
    if (size <= 0) ctx.fail("attribute 'sizes' must be positive, got {}", size);
    total += size;
    Shape shape = input.shape;
    shape[axis] = size;
    outputs.push_back({input.dtype, shape});
  }
  if (total != input.shape[axis]) {
    ctx.fail("attribute 'sizes' sums to {}, but dimension {} of {} is {}", total, axis, ctx.input_label(0),
             input.shape[axis]);
  }
  return outputs;
}

// Copies `pieces` (each [outer, size_i · inner] bytes-wise) into / out of one [outer, Σ size_i · inner].
void copy_pieces(std::byte* joined, const std::vector<std::byte*>& pieces, const std::vector<int64_t>& sizes,
                 const AxisView& view, size_t element_bytes, bool join) {
  const int64_t total = std::accumulate(sizes.begin(), sizes.end(), int64_t{0});
  const size_t row = static_cast<size_t>(total * view.inner) * element_bytes;
  size_t offset = 0;
  for (size_t p = 0; p < pieces.size(); ++p) {
    const size_t width = static_cast<size_t>(sizes[p] * view.inner) * element_bytes;
    for (int64_t o = 0; o < view.outer; ++o) {
      std::byte* whole = joined + static_cast<size_t>(o) * row + offset;
      std::byte* piece = pieces[p] + static_cast<size_t>(o) * width;
      if (join) std::memcpy(whole, piece, width);
      else std::memcpy(piece, whole, width);
    }
    offset += width;
  }
}

void register_concat(OpRegistry& registry) {
  registry.add(OpDef{
      .name = "concat",
      .inputs = {"x"},
      .outputs = {"out"},
      .infer = infer_concat,
      .gradient = [](GradientContext& ctx) -> InputGradients {
        const size_t count = ctx.node().inputs.size();
        const size_t axis = resolved_axis(ctx.attrs(), ctx.type(ctx.input(0)).shape.size());
        std::vector<int64_t> sizes;
        for (size_t i = 0; i < count; ++i) sizes.push_back(ctx.type(ctx.input(i)).shape[axis]);
        OpOutputs pieces = ctx.op("split", {ctx.output_grad(0)}, {{"axis", static_cast<int64_t>(axis)}, {"sizes", sizes}});
        InputGradients result(count);
        for (size_t i = 0; i < count; ++i) result[i] = if_needed(ctx, i, pieces[i]);
        return result;
      },
      .cpu = [](const CpuBindContext& ctx) -> CpuKernel {
        const size_t axis = resolved_axis(ctx.attrs, ctx.inputs[0].shape.size());
        const AxisView view = axis_view(ctx.inputs[0].shape, axis);
        std::vector<int64_t> sizes;
        for (const TensorType& input : ctx.inputs) sizes.push_back(input.shape[axis]);
        const size_t element_bytes = dtype_size_bytes(ctx.inputs[0].dtype);
        return [=](const CpuKernelArgs& args) {
          std::vector<std::byte*> pieces;
          for (const CpuTensorView& input : args.inputs) pieces.push_back(static_cast<std::byte*>(input.data));
          copy_pieces(static_cast<std::byte*>(args.outputs[0].data), pieces, sizes, view, element_bytes, true);
        };
      },
      .variadic_inputs = true,
      // byte copies (test_model_kernels.cpp)
      .backend_tolerance = graph::BackendTolerance{.f32 = 0.0, .bf16 = 0.0},
  });
}

void register_split(OpRegistry& registry) {
  registry.add(OpDef{
      .name = "split",
      .inputs = {"x"},
      .outputs = {"out"},
      .infer = infer_split,
      .gradient = [](GradientContext& ctx) -> InputGradients {
        std::vector<TensorId> pieces;
        for (size_t i = 0; i < ctx.node().outputs.size(); ++i) {
          pieces.push_back(ctx.has_output_grad(i) ? ctx.output_grad(i) : ctx.zeros(ctx.type(ctx.output(i))));
        }
        const size_t axis = resolved_axis(ctx.attrs(), ctx.type(ctx.input(0)).shape.size());
        return {ctx.op("concat", pieces, {{"axis", static_cast<int64_t>(axis)}})};
      },
      .cpu = [](const CpuBindContext& ctx) -> CpuKernel {
        const size_t axis = resolved_axis(ctx.attrs, ctx.inputs[0].shape.size());
        const AxisView view = axis_view(ctx.inputs[0].shape, axis);
        const std::vector<int64_t> sizes = ctx.attrs.integers("sizes");
        const size_t element_bytes = dtype_size_bytes(ctx.inputs[0].dtype);
        return [=](const CpuKernelArgs& args) {
          std::vector<std::byte*> pieces;
          for (const CpuTensorView& output : args.outputs) pieces.push_back(static_cast<std::byte*>(output.data));
          copy_pieces(static_cast<std::byte*>(args.inputs[0].data), pieces, sizes, view, element_bytes, false);
        };
      },
      // byte copies (test_model_kernels.cpp)
      .backend_tolerance = graph::BackendTolerance{.f32 = 0.0, .bf16 = 0.0},
  });
}

}  // namespace

void register_concat_split_ops(OpRegistry& registry) {
  register_concat(registry);
  register_split(registry);
}

}  // namespace surogate::ops::defs
