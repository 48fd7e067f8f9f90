// Training-step throughput of the CUDA backend on a decoder model with random weights.
//
//   surogate_train_bench --config DIR/config.json-folder --seq 2048 --batch 2 --steps 10 [--warmup 3]
//                        [--recompute none|all] [--lmhead-chunks N] [--name qwen3-0.6b]
//
// Builds the BF16 decoder graph (models::build_decoder_graph) for one micro-batch, compiles the
// training plan (forward + backward), loads it on the CUDA backend with random bf16 weights
// (normal-ish, std 0.02; norms 1) and runs `steps` micro-batch steps of packed random documents
// (lengths 256..2048, positions restarting per document, -100 on each document's last target).
// Each step is zero_gradients + execute: forward and backward, gradients accumulated into the
// bf16 parameter gradients; no optimizer update (the CUDA AdamW kernel is not wired to the plan
// yet). Prints one JSON line: tokens/s, step time, GPU memory in use after the run (everything is
// allocated at load, so this is the peak), the plan's regions, and the per-op time breakdown of
// one extra step (CUDA events between steps, debug_time_breakdown). bench/run_surogate.sh turns
// tokens/s into TFLOP/s and MFU with bench/models.py.
#include <cuda_runtime_api.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "compiler/execution_plan.h"
#include "core/bfloat16.h"
#include "core/error.h"
#include "io/model_config.h"
#include "models/decoder_graph.h"
#include "models/model_spec.h"
#include "ops/defs/register_ops.h"
#include "runtime/cuda_backend.h"

namespace {

using namespace surogate;

struct Options {
  std::string config_dir, name = "model", recompute = "none";
  int64_t seq = 2048, batch = 2, steps = 10, warmup = 3, lmhead_chunks = 4;
};

Options parse(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i];
    if (i + 1 >= argc) fail_user("{} needs a value", flag);
    std::string value = argv[++i];
    if (flag == "--config") options.config_dir = value;
    else if (flag == "--name") options.name = value;
    else if (flag == "--recompute") options.recompute = value;
    else if (flag == "--seq") options.seq = std::stoll(value);
    else if (flag == "--batch") options.batch = std::stoll(value);
    else if (flag == "--steps") options.steps = std::stoll(value);
    else if (flag == "--warmup") options.warmup = std::stoll(value);
    else if (flag == "--lmhead-chunks") options.lmhead_chunks = std::stoll(value);
    else fail_user("unknown option {}", flag);
  }
  if (options.config_dir.empty()) fail_user("--config <folder with config.json> is required");
  if (options.recompute != "none" && options.recompute != "all") fail_user("--recompute is none or all");
  return options;
}

struct Batch {
  std::vector<int32_t> input_ids, position_ids, document_ids, targets;
};

Batch random_batch(int64_t rows, int64_t seq, int64_t vocab, std::mt19937& rng) {
  Batch batch;
  std::uniform_int_distribution<int32_t> token(0, static_cast<int32_t>(vocab - 1));
  std::uniform_int_distribution<int64_t> length(256, 2048);
  for (int64_t row = 0; row < rows; ++row) {
    int64_t t = 0;
    int32_t document = 0;
    while (t < seq) {
      int64_t end = std::min(seq, t + length(rng));
      for (int64_t i = t; i < end; ++i) {
        batch.input_ids.push_back(token(rng));
        batch.position_ids.push_back(static_cast<int32_t>(i - t));
        batch.document_ids.push_back(document);
      }
      for (int64_t i = t; i < end; ++i) {
        batch.targets.push_back(i + 1 < end ? batch.input_ids[static_cast<size_t>(row * seq + i + 1)] : -100);
      }
      t = end;
      ++document;
    }
  }
  return batch;
}

std::vector<runtime::InputBinding> bindings(const compiler::ExecutionPlan& plan, const Batch& batch) {
  return {{plan.tensor("input_ids"), std::as_bytes(std::span<const int32_t>(batch.input_ids))},
          {plan.tensor("position_ids"), std::as_bytes(std::span<const int32_t>(batch.position_ids))},
          {plan.tensor("document_ids"), std::as_bytes(std::span<const int32_t>(batch.document_ids))},
          {plan.tensor("targets"), std::as_bytes(std::span<const int32_t>(batch.targets))}};
}

double gib(size_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0); }

int run(const Options& options) {
  const io::ModelConfig config = io::load_model_config(options.config_dir);
  const graph::OpRegistry registry = ops::make_model_registry();
  models::DecoderGraphOptions graph_options{.batch = options.batch, .sequence = options.seq,
                                            .lmhead_chunks = options.lmhead_chunks};
  graph_options.dtype = DType::BF16;
  models::DecoderGraph decoder = models::build_decoder_graph(config, registry, graph_options);
  compiler::CompileOptions compile;
  if (options.recompute == "all") compile.recompute = compiler::RecomputePolicy::all();
  const auto compile_start = std::chrono::steady_clock::now();
  compiler::ExecutionPlan plan = compiler::compile_training(std::move(decoder.graph), decoder.loss, registry, compile);
  const double compile_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - compile_start).count();

  runtime::CudaBackend backend;
  backend.load(plan, registry);

  // Random weights: a cheap xorshift sum of uniforms (Irwin–Hall, ≈ normal), std 0.02; norms = 1.
  uint64_t state = 0x9E3779B97F4A7C15ull;
  auto next = [&state] {
    state ^= state << 13; state ^= state >> 7; state ^= state << 17;
    return static_cast<float>(state >> 40) / static_cast<float>(1 << 24);
  };
  int64_t parameter_count = 0;
  for (const models::ParameterSpec& spec : models::parameter_specs(config)) {
    const size_t count = static_cast<size_t>(graph::shape_numel(spec.shape));
    parameter_count += static_cast<int64_t>(count);
    std::vector<uint16_t> bits(count);
    const bool norm = spec.shape.size() == 1;
    for (uint16_t& b : bits) b = float_to_bf16(norm ? 1.0f : 0.02f * 1.732f * (next() + next() + next() + next() - 2.0f) / 1.155f);
    backend.write(plan.tensor(spec.name), std::as_bytes(std::span<const uint16_t>(bits)));
  }
  std::mt19937 rng(1234);
  Batch batch = random_batch(options.batch, options.seq, config.vocab_size, rng);
  int64_t scored = std::count_if(batch.targets.begin(), batch.targets.end(), [](int32_t t) { return t != -100; });
  const float loss_scale = 1.0f / static_cast<float>(scored);
  backend.write(plan.tensor("loss_scale"), std::as_bytes(std::span<const float>(&loss_scale, 1)));
  std::vector<runtime::InputBinding> inputs = bindings(plan, batch);

  float loss = 0.0f;
  for (int64_t i = 0; i < options.warmup; ++i) {
    backend.zero_gradients();
    backend.execute(inputs);
  }
  backend.read(plan.loss, std::as_writable_bytes(std::span<float>(&loss, 1)));
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  cudaEventRecord(start, backend.stream());
  for (int64_t i = 0; i < options.steps; ++i) {
    backend.zero_gradients();
    backend.execute(inputs);  // the same batch every step: inputs are re-uploaded, as a trainer would
  }
  cudaEventRecord(stop, backend.stream());
  cudaEventSynchronize(stop);
  float total_ms = 0.0f;
  cudaEventElapsedTime(&total_ms, start, stop);
  backend.read(plan.loss, std::as_writable_bytes(std::span<float>(&loss, 1)));
  size_t free_bytes = 0, total_bytes = 0;
  cudaMemGetInfo(&free_bytes, &total_bytes);

  backend.set_time_breakdown(true);
  backend.zero_gradients();
  backend.execute(inputs);
  std::vector<std::pair<std::string, double>> breakdown = backend.time_breakdown();
  double breakdown_total = 0.0;
  for (const auto& [op, ms] : breakdown) breakdown_total += ms;

  const double step_ms = total_ms / static_cast<double>(options.steps);
  const double tokens_per_s = static_cast<double>(options.batch * options.seq) / (step_ms / 1000.0);
  cudaDeviceProp properties{};
  cudaGetDeviceProperties(&properties, 0);
  const runtime::DeviceMemoryReport& memory = backend.memory_report();
  std::string ops_json;
  for (const auto& [op, ms] : breakdown) {
    ops_json += fmt::format("{}\"{}\": {:.3f}", ops_json.empty() ? "" : ", ", op, ms);
  }
  std::printf(
      "{\"engine\": \"surogate\", \"model\": \"%s\", \"mode\": \"full-fwd-bwd\", \"tokens_per_s\": %.1f, "
      "\"step_ms\": %.3f, \"loss\": %.5f, \"parameters\": %lld, \"seq_len\": %lld, \"micro_batch\": %lld, "
      "\"recompute\": \"%s\", \"lmhead_chunks\": %lld, \"steps\": %lld, \"peak_mem_gib\": %.2f, "
      "\"regions_gib\": %.2f, \"scratch_gib\": %.2f, \"compile_s\": %.2f, \"gpu\": \"%s\", "
      "\"breakdown_total_ms\": %.3f, \"breakdown_ms\": {%s}}\n",
      options.name.c_str(), tokens_per_s, step_ms, loss, static_cast<long long>(parameter_count),
      static_cast<long long>(options.seq), static_cast<long long>(options.batch), options.recompute.c_str(),
      static_cast<long long>(options.lmhead_chunks), static_cast<long long>(options.steps),
      gib(total_bytes - free_bytes), gib(memory.required_bytes), gib(memory.scratch_bytes), compile_s, properties.name,
      breakdown_total, ops_json.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(parse(argc, argv));
  } catch (const surogate::UserError& error) {
    std::fprintf(stderr, "error: %s\n", error.what());
    return 2;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "internal error: %s\n", error.what());
    return 1;
  }
}
