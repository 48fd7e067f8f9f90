// The CUDA backend's kernel table: op name -> CUDA binder. A binder runs once per plan step at
// load time, with the node, its concrete types and attrs, and returns a closure that only
// launches kernels on the given stream (no allocation, no host synchronisation). The table is
// filled by explicit functions, one per op family (register_core_cuda_ops, ...), like the op
// registry; the CUDA backend refuses a plan containing an op the table lacks, at load time.
// Closure contract = the CPU one (graph/op_registry.h): write every element of every output,
// never read outputs (accumulate excepted), inputs and outputs never alias.
#pragma once

#include <cuda_runtime_api.h>

#include <functional>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "graph/op_registry.h"

namespace surogate::runtime {

// A tensor as a CUDA kernel closure sees it at run time: a device pointer with dtype and dims.
struct CudaTensorView {
  void* data = nullptr;
  DType dtype = DType::F32;
  const int64_t* dims = nullptr;
  int rank = 0;
  int64_t count = 0;

  template <typename T>
  T* as() const { return static_cast<T*>(data); }
  int64_t numel() const { return count; }
  int64_t dim(int index) const { return dims[index < 0 ? index + rank : index]; }
};

struct CudaKernelArgs {
  std::span<const CudaTensorView> inputs;
  std::span<const CudaTensorView> outputs;
  cudaStream_t stream = nullptr;
};

using CudaKernel = std::function<void(const CudaKernelArgs&)>;

// What a CUDA binder sees at load time: types carry dtype and shape, no data.
struct CudaBindContext {
  const graph::Node& node;
  std::span<const graph::TensorType> inputs;
  std::span<const graph::TensorType> outputs;
  graph::Attrs attrs;

  // UserError naming the node unless every input and output is `dtype`.
  void expect_all(DType dtype) const;
};

using CudaBinder = std::function<CudaKernel(const CudaBindContext&)>;

class CudaOpTable {
public:
  // Registering a name twice is a bug (InternalError).
  void add(std::string name, CudaBinder binder);
  const CudaBinder* find(std::string_view name) const;
  std::vector<std::string> names() const;

private:
  std::map<std::string, CudaBinder, std::less<>> binders_;
};

// add, mul, scale, fill, sum, broadcast, accumulate (F32), in runtime/cuda_core_ops.cpp.
void register_core_cuda_ops(CudaOpTable& table);

// The table the engine uses: every family registered above, built once on first use.
const CudaOpTable& builtin_cuda_ops();

}  // namespace surogate::runtime
