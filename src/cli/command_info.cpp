// `surogate info`: the host, the GPUs, the library versions, and which recipes can run here.
#include <fmt/format.h>

#include "cli/commands.h"
#include "core/system_info.h"
#include "cuda/device_info.h"

namespace surogate::cli {
namespace {

double gib(uint64_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0); }

std::string or_missing(const std::string& version) { return version.empty() ? "not found" : version; }

void print_recipes(const cuda::CudaEnvironment& env) {
  fmt::print("recipes:\n");
  int best_sm = 0;
  for (const auto& gpu : env.gpus) best_sm = std::max(best_sm, gpu.sm_major * 10 + gpu.sm_minor);
  auto verdict = [&](int min_sm) -> std::string {
    if (env.gpus.empty()) return "no (needs a GPU)";
    return best_sm >= min_sm ? "yes" : fmt::format("no (needs SM{}+)", min_sm);
  };
  fmt::print("  {:<11} CPU reference backend: yes (fp32 math)\n", "bf16");
  fmt::print("  {:<11} GPU: {}\n", "bf16", verdict(80));
  fmt::print("  {:<11} GPU: {}\n", "fp8_hybrid", verdict(89));
  fmt::print("  {:<11} GPU: {}\n", "nvfp4", verdict(100));
}

int run_info() {
  HostInfo host = query_host_info();
  fmt::print("cpu: {} ({} logical cores)\n", host.cpu_model, host.logical_cores);
  fmt::print("memory: {:.1f} GiB total, {:.1f} GiB available\n", gib(host.memory_total_bytes),
             gib(host.memory_available_bytes));

  cuda::CudaEnvironment env = cuda::query_cuda_environment();
  fmt::print("cuda: {}\n", env.status);
  if (env.built_with_cuda) {
    fmt::print("  driver supports CUDA {}\n",
               env.driver_version ? cuda::format_cuda_version(env.driver_version) : "none (no driver)");
    fmt::print("  runtime CUDA {}\n", cuda::format_cuda_version(env.runtime_version));
    fmt::print("  cuBLAS(Lt) {}\n", or_missing(env.cublas_version));
  }
  fmt::print("  cuDNN {}\n", or_missing(env.cudnn_version));
  fmt::print("  NCCL {}\n", or_missing(env.nccl_version));
  for (const auto& gpu : env.gpus) {
    fmt::print("gpu {}: {}, {:.1f} GiB, SM {}.{}, {} multiprocessors\n", gpu.index, gpu.name,
               gib(gpu.memory_total_bytes), gpu.sm_major, gpu.sm_minor, gpu.multiprocessors);
  }
  print_recipes(env);
  return 0;
}

}  // namespace

Command register_info_command(CLI::App& parent) {
  CLI::App* app = parent.add_subcommand("info", "Print CPU, memory, GPUs, library versions and usable recipes");
  return Command{app, run_info};
}

const CommandRegistration kInfoRegistration{10, register_info_command};

}  // namespace surogate::cli
