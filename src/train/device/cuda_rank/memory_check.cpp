// A CUDA rank's out-of-memory report; see memory_check.h.
#include "train/device/cuda_rank/memory_check.h"

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <string>

#include <fmt/format.h>

#include "core/error.h"
#include "cuda/cuda_check.h"
#include "train/device/cuda_rank/gradient_accumulators.h"
#include "train/device/cuda_rank/masters.h"

namespace surogate::train {
namespace {

double gib(size_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0); }

}  // namespace

void check_rank_memory(const RankMemoryNeeds& needs, const runtime::CudaBackend& backend) {
  const HostOffloadPlan& offload = *needs.offload;
  const auto elements = static_cast<size_t>(needs.accumulators);
  const size_t master_bytes = CudaMasters::device_bytes(needs.masters, needs.bf16_master, offload.masters);
  const size_t accumulator_bytes =
      CudaGradientAccumulators::device_bytes(needs.accumulators, needs.bf16_gradients, offload.gradients);
  const size_t needed = master_bytes + accumulator_bytes + needs.optimizer_bytes;
  size_t free_bytes = 0, total_bytes = 0;
  CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  if (needed <= free_bytes) return;
  const runtime::DeviceMemoryReport& plan = backend.memory_report();
  const std::string masters =
      needs.bf16_master ? fmt::format("no master copy (master_dtype: bf16 saves {:.2f} GiB)",
                                      gib(static_cast<size_t>(needs.trainable) * sizeof(float)))
      : offload.masters ? std::string("fp32 master weights in host memory (offload_master)")
                        : fmt::format("fp32 master weights {:.2f} GiB", gib(master_bytes));
  const std::string accumulators =
      offload.gradients ? std::string("gradient accumulators in host memory (offload_grads)")
      : needs.bf16_gradients
          ? fmt::format("bf16 gradient accumulators {:.2f} GiB (gradient_dtype: bf16 saves {:.2f} GiB)",
                        gib(accumulator_bytes), gib(elements * sizeof(float) - accumulator_bytes))
          : fmt::format("fp32 gradient accumulators {:.2f} GiB", gib(accumulator_bytes));
  fail_user(
      "training needs {:.2f} GiB more GPU memory than the plan's {:.2f} GiB ({}, {}, {} optimizer state and "
      "offload staging {:.2f} GiB), but GPU {} has only {:.2f} GiB free of {:.2f} GiB. Train fewer parameters "
      "(LoRA, a smaller lora_rank), use optimizer: adamw_8bit, master_dtype: bf16 or gradient_dtype: bf16, "
      "offload_optimizer / offload_master / offload_grads: true, or reduce the micro-batch or sequence length",
      gib(needed), gib(plan.required_bytes + plan.scratch_bytes), masters, accumulators, to_string(needs.optimizer),
      gib(needs.optimizer_bytes), plan.device, gib(free_bytes), gib(total_bytes));
}

}  // namespace surogate::train
