// CudaOpTable: the op name -> CUDA binder map and the engine's built-in table.
#include "runtime/cuda_op_table.h"

#include <fmt/ranges.h>

#include "core/error.h"

namespace surogate::runtime {

void CudaBindContext::expect_all(DType dtype) const {
  auto check = [&](std::span<const graph::TensorType> types, const char* what) {
    for (size_t i = 0; i < types.size(); ++i) {
      if (types[i].dtype != dtype) {
        fail_user("node '{}' (op {}): the CUDA backend runs this op on {} tensors, but {} {} is {}",
                  node.name, node.op, dtype_safetensors_name(dtype), what, i, graph::format_type(types[i]));
      }
    }
  };
  check(inputs, "input");
  check(outputs, "output");
}

void CudaOpTable::add(std::string name, CudaBinder binder) {
  SUROGATE_CHECK(static_cast<bool>(binder), "CUDA binder for op '{}' is empty", name);
  SUROGATE_CHECK(!binders_.contains(name), "CUDA binder for op '{}' registered twice", name);
  binders_.emplace(std::move(name), std::move(binder));
}

const CudaBinder* CudaOpTable::find(std::string_view name) const {
  auto found = binders_.find(name);
  return found == binders_.end() ? nullptr : &found->second;
}

std::vector<std::string> CudaOpTable::names() const {
  std::vector<std::string> result;
  for (const auto& [name, binder] : binders_) result.push_back(name);
  return result;
}

const CudaOpTable& builtin_cuda_ops() {
  static const CudaOpTable table = [] {
    CudaOpTable built;
    register_core_cuda_ops(built);
    register_model_cuda_ops(built);
    register_attention_cuda_ops(built);
    register_loss_cuda_ops(built);
    register_linear_cuda_ops(built);
    register_lora_cuda_ops(built);
    register_fused_cuda_ops(built);
    register_quant_cuda_ops(built);
    register_fp8_cuda_ops(built);
    register_moe_cuda_ops(built);
    register_gelu_layernorm_cuda_ops(built);
    register_generation_cuda_ops(built);
    register_decode_linear_cuda_ops(built);
    register_gather_rows_cuda_ops(built);
    return built;
  }();
  return table;
}

}  // namespace surogate::runtime
