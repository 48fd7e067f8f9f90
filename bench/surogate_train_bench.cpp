// Training-step throughput of the CUDA backend on a decoder model with random weights.
//
//   surogate_train_bench --config DIR --seq 2048 --batch 2 --steps 10 [--warmup 3] [--name qwen3-0.6b]
//                        [--mode fwd-bwd|full|lora] [--grad-accum 4] [--lora-rank 16]
//                        [--documents packed|full] [--recompute none|all] [--lmhead-chunks N]
//                        [--optimizer adamw|adamw_8bit|normuon] [--cuda-graphs on|off]
//
// Builds the BF16 decoder graph (models::build_decoder_graph) for one micro-batch, compiles the
// training plan (forward + backward), loads it on the CUDA backend with random bf16 weights
// (normal-ish, std 0.02; norms 1) and times steps:
//  * fwd-bwd: one micro-batch per step (zero_gradients + execute), no optimizer (the first
//    benchmark, bench/results/2026-11-22-h100-surogate.jsonl).
//  * full / lora: the job of docs/benchmarks.md. One optimizer step = zero_gradients, --grad-accum
//    micro-batches (gradients summed in the plan's bf16 gradient tensors), then the update over
//    the trainable parameters: bf16 gradient → fp32, global L2 norm and clip factor (max norm 1,
//    cuda/kernels/grad_norm.h), then the trainer's device optimizer (train/device/device_optimizer.h;
//    --optimizer, default adamw as torch's AdamW in the peers; lr 1e-4, weight decay 0.01) on fp32
//    master weights, writing the bf16 weights the plan reads. lora: models::apply_lora with rank r, alpha 2r, on all seven projections of
//    every layer, base frozen; full: every parameter trainable.
// --documents packed: rows of random documents of 256..2048 tokens (positions restart); full: one
// document per row (every row attends over its whole length, as the peers' rows do).
// Prints one JSON line: tokens/s, step time, optimizer-update time, GPU memory in use after the
// run (everything is allocated before timing, so this is the peak), the plan's regions, and the
// per-op time breakdown of one extra micro-batch (debug_time_breakdown). bench/run_surogate.sh
// turns tokens/s into TFLOP/s and MFU with bench/models.py.
#include <cuda_runtime_api.h>

#include <chrono>
#include <cmath>
#include <memory>
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
#include "cuda/cuda_check.h"
#include "cuda/device_buffer.h"
#include "cuda/kernels/elementwise_16bit.h"
#include "cuda/kernels/grad_norm.h"
#include "io/model_config.h"
#include "models/decoder_graph.h"
#include "models/lora.h"
#include "models/model_spec.h"
#include "ops/defs/register_ops.h"
#include "runtime/cuda_backend.h"
#include "train/device/device_optimizer.h"
#include "train/device/training_device.h"

namespace {

using namespace surogate;

struct Options {
  std::string config_dir, name = "model", recompute = "none", mode = "fwd-bwd", documents = "packed";
  std::string optimizer = "adamw";
  bool cuda_graphs = true;  // as the trainer's use_cuda_graphs default
  bool batch_lora_inputs = true;   // models::LoraOptions::batch_shared_inputs (on, as the CUDA trainer)
  bool fuse_lora_backward = true;  // models::LoraOptions::fuse_low_rank_backward (on, as the CUDA trainer)
  int64_t seq = 2048, batch = 2, steps = 10, warmup = 3, lmhead_chunks = 4, grad_accum = 4, lora_rank = 16;
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
    else if (flag == "--mode") options.mode = value;
    else if (flag == "--documents") options.documents = value;
    else if (flag == "--grad-accum") options.grad_accum = std::stoll(value);
    else if (flag == "--lora-rank") options.lora_rank = std::stoll(value);
    else if (flag == "--optimizer") options.optimizer = value;
    else if (flag == "--cuda-graphs") {
      if (value != "on" && value != "off") fail_user("--cuda-graphs is on or off");
      options.cuda_graphs = value == "on";
    }
    else if (flag == "--batch-lora-inputs") {
      if (value != "on" && value != "off") fail_user("--batch-lora-inputs is on or off");
      options.batch_lora_inputs = value == "on";
    }
    else if (flag == "--fuse-lora-backward") {
      if (value != "on" && value != "off") fail_user("--fuse-lora-backward is on or off");
      options.fuse_lora_backward = value == "on";
    }
    else fail_user("unknown option {}", flag);
  }
  if (options.config_dir.empty()) fail_user("--config <folder with config.json> is required");
  if (options.recompute != "none" && options.recompute != "all") fail_user("--recompute is none or all");
  if (options.mode != "fwd-bwd" && options.mode != "full" && options.mode != "lora") fail_user("--mode is fwd-bwd, full or lora");
  if (options.documents != "packed" && options.documents != "full") fail_user("--documents is packed or full");
  if (options.optimizer != "adamw" && options.optimizer != "adamw_8bit" && options.optimizer != "normuon") {
    fail_user("--optimizer is adamw, adamw_8bit or normuon");
  }
  if (options.grad_accum < 1 || options.lora_rank < 1) fail_user("--grad-accum and --lora-rank must be positive");
  return options;
}

struct Batch {
  std::vector<int32_t> input_ids, position_ids, document_ids, targets;
};

Batch random_batch(int64_t rows, int64_t seq, int64_t vocab, bool packed, std::mt19937& rng) {
  Batch batch;
  std::uniform_int_distribution<int32_t> token(0, static_cast<int32_t>(vocab - 1));
  std::uniform_int_distribution<int64_t> length(packed ? 256 : seq, packed ? 2048 : seq);
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

// The optimizer update over the plan's trainable parameters, enqueued on the backend's stream:
// fp32 gradient copies, master weights and the device optimizer's state (all allocated here,
// before timing).
class OptimizerUpdate {
public:
  OptimizerUpdate(runtime::CudaBackend& backend, const compiler::ExecutionPlan& plan, surogate::Optimizer which)
      : backend_(backend) {
    std::vector<const float*> gradient_pointers;
    std::vector<int64_t> counts;
    for (const auto& [parameter, gradient] : plan.parameter_gradients) {
      Slot slot;
      slot.name = plan.graph.tensor(parameter).name;
      slot.shape = plan.graph.tensor(parameter).type.shape;
      slot.count = plan.graph.tensor(parameter).type.numel();
      slot.weight = static_cast<__nv_bfloat16*>(backend.device_address(parameter));
      slot.gradient = static_cast<const __nv_bfloat16*>(backend.device_address(gradient));
      slot.offset = total_;
      total_ += (slot.count + 3) / 4 * 4;  // 16-byte aligned slices: float4 paths in both kernels
      slots_.push_back(slot);
    }
    gradients_ = cuda::DeviceBuffer<float>(total_);
    master_ = cuda::DeviceBuffer<float>(total_);
    std::vector<train::DeviceParameter> parameters;
    for (const Slot& slot : slots_) {
      train::DeviceParameter p;
      p.name = slot.name;
      p.rows = slot.shape.size() == 2 ? slot.shape[0] : 1;
      p.cols = slot.shape.size() == 2 ? slot.shape[1] : slot.count;
      p.weight = slot.weight;
      p.master = master_.data() + slot.offset;
      p.gradient = gradients_.data() + slot.offset;
      p.apply_weight_decay = train::applies_weight_decay(slot.name);
      p.is_hidden_matrix = train::is_hidden_matrix(slot.name, slot.shape);
      parameters.push_back(p);
    }
    Config config;
    config.optimizer.algorithm = which;
    optimizer_ = train::make_device_optimizer(config.optimizer, static_cast<uint64_t>(config.data.train_seed),
                                              std::move(parameters));
    optimizer_->upload(backend.stream());
    for (const Slot& slot : slots_) {
      cuda::convert_bf16_to_f32(slot.weight, master_.data() + slot.offset, slot.count, backend.stream());
      gradient_pointers.push_back(gradients_.data() + slot.offset);
      counts.push_back(slot.count);
    }
    pointers_ = cuda::to_device(gradient_pointers);
    counts_ = cuda::to_device(counts);
    partials_ = cuda::DeviceBuffer<float>(static_cast<size_t>(cuda::kGradNormBlocks) * slots_.size());
    norm_ = cuda::DeviceBuffer<float>(2);
    CUDA_CHECK(cudaStreamSynchronize(backend.stream()));
  }

  void step() {
    ++t_;
    cudaStream_t stream = backend_.stream();
    for (const Slot& slot : slots_) {
      cuda::convert_bf16_to_f32(slot.gradient, gradients_.data() + slot.offset, slot.count, stream);
    }
    cuda::global_grad_norm(norm_.data(), partials_.data(), pointers_.data(), counts_.data(),
                           static_cast<int>(slots_.size()), 1.0f, stream);
    optimizer_->step(train::OptimizerStep{t_ - 1, 1e-4, 0.01}, norm_.data() + 1, stream);
  }

  int64_t parameters() const {
    int64_t sum = 0;
    for (const Slot& slot : slots_) sum += slot.count;
    return sum;
  }
  size_t tensors() const { return slots_.size(); }

private:
  struct Slot {
    std::string name;
    std::vector<int64_t> shape;
    __nv_bfloat16* weight = nullptr;
    const __nv_bfloat16* gradient = nullptr;
    int64_t count = 0;
    size_t offset = 0;
  };
  runtime::CudaBackend& backend_;
  std::vector<Slot> slots_;
  size_t total_ = 0;
  int64_t t_ = 0;
  cuda::DeviceBuffer<float> gradients_, master_, partials_, norm_;
  std::unique_ptr<train::DeviceOptimizer> optimizer_;
  cuda::DeviceBuffer<const float*> pointers_;
  cuda::DeviceBuffer<int64_t> counts_;
};

int run(const Options& options) {
  const io::ModelConfig config = io::load_model_config(options.config_dir);
  const graph::OpRegistry registry = ops::make_model_registry();
  models::DecoderGraphOptions graph_options{.batch = options.batch, .sequence = options.seq,
                                            .lmhead_chunks = options.lmhead_chunks};
  graph_options.dtype = DType::BF16;
  models::DecoderGraph decoder = models::build_decoder_graph(config, registry, graph_options);
  const bool lora = options.mode == "lora", optimize = options.mode != "fwd-bwd";
  models::LoraOptions lora_options{.rank = options.lora_rank, .alpha = 2.0 * double(options.lora_rank), .dropout = 0.0,
                                   .target_modules = {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj",
                                                      "down_proj"},
                                   .batch_shared_inputs = options.batch_lora_inputs,
                                   .fuse_low_rank_backward = options.fuse_lora_backward};
  std::vector<models::LoraAdapter> adapters;
  if (lora) adapters = models::lora_adapters(config, lora_options);
  graph::Graph forward = lora ? models::apply_lora(decoder.graph, registry, adapters, lora_options, true)
                              : std::move(decoder.graph);
  compiler::CompileOptions compile;
  if (options.recompute == "all") compile.recompute = compiler::RecomputePolicy::all();
  const auto compile_start = std::chrono::steady_clock::now();
  compiler::ExecutionPlan plan = compiler::compile_training(std::move(forward), decoder.loss, registry, compile);
  const double compile_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - compile_start).count();

  runtime::CudaBackend backend;
  backend.load(plan, registry);
  backend.set_cuda_graphs(options.cuda_graphs);  // the micro-batch's kernels replayed as one graph

  // Random weights: a pool of 2^20 + 1 bf16 values from a cheap xorshift sum of uniforms
  // (Irwin–Hall, ≈ normal), std 0.02, each tensor read cyclically from a different pool offset
  // (drawing 8B values one by one took most of the 8B benchmark's wall time); norms = 1.
  uint64_t state = 0x9E3779B97F4A7C15ull;
  auto next = [&state] {
    state ^= state << 13; state ^= state >> 7; state ^= state << 17;
    return static_cast<float>(state >> 40) / static_cast<float>(1 << 24);
  };
  std::vector<uint16_t> pool((1u << 20) + 1);
  for (uint16_t& b : pool) b = float_to_bf16(0.02f * 1.732f * (next() + next() + next() + next() - 2.0f) / 1.155f);
  std::vector<models::ParameterSpec> specs = models::parameter_specs(config);
  int64_t parameter_count = 0;
  for (const models::ParameterSpec& spec : specs) parameter_count += graph::shape_numel(spec.shape);
  for (const models::LoraAdapter& adapter : adapters) specs.push_back(adapter.a), specs.push_back(adapter.b);
  for (const models::ParameterSpec& spec : specs) {
    const size_t count = static_cast<size_t>(graph::shape_numel(spec.shape));
    std::vector<uint16_t> bits(count, float_to_bf16(1.0f));
    if (spec.shape.size() != 1) {
      size_t offset = static_cast<size_t>(next() * static_cast<float>(pool.size())) % pool.size();
      for (size_t i = 0; i < count;) {
        const size_t n = std::min(count - i, pool.size() - offset);
        std::copy_n(pool.begin() + static_cast<std::ptrdiff_t>(offset), n, bits.begin() + static_cast<std::ptrdiff_t>(i));
        i += n;
        offset = 0;
      }
    }
    backend.write(plan.tensor(spec.name), std::as_bytes(std::span<const uint16_t>(bits)));
  }
  std::unique_ptr<OptimizerUpdate> optimizer;
  if (optimize) {
    const surogate::Optimizer which = options.optimizer == "adamw_8bit" ? surogate::Optimizer::AdamW8bit
                                      : options.optimizer == "normuon"  ? surogate::Optimizer::NorMuon
                                                                        : surogate::Optimizer::AdamW;
    optimizer = std::make_unique<OptimizerUpdate>(backend, plan, which);
  }
  const int64_t accum = optimize ? options.grad_accum : 1;

  std::mt19937 rng(1234);
  std::vector<Batch> batches;
  int64_t scored = 0;
  for (int64_t i = 0; i < accum; ++i) {
    batches.push_back(random_batch(options.batch, options.seq, config.vocab_size, options.documents == "packed", rng));
    scored += std::count_if(batches.back().targets.begin(), batches.back().targets.end(), [](int32_t t) { return t != -100; });
  }
  const float loss_scale = 1.0f / static_cast<float>(scored);  // the mean over the optimizer step's tokens
  backend.write(plan.tensor("loss_scale"), std::as_bytes(std::span<const float>(&loss_scale, 1)));
  std::vector<std::vector<runtime::InputBinding>> inputs;
  for (const Batch& batch : batches) inputs.push_back(bindings(plan, batch));

  auto step = [&] {
    backend.zero_gradients();
    for (const auto& micro : inputs) backend.execute(micro);  // inputs re-uploaded each time, as a trainer would
    if (optimizer) optimizer->step();
  };
  float loss = 0.0f;
  for (int64_t i = 0; i < options.warmup; ++i) step();
  backend.read(plan.loss, std::as_writable_bytes(std::span<float>(&loss, 1)));
  cuda::Event start, stop, optimizer_start, optimizer_stop;
  start.record(backend.stream());
  for (int64_t i = 0; i < options.steps; ++i) step();
  stop.record(backend.stream());
  CUDA_CHECK(cudaEventSynchronize(stop.get()));
  const float total_ms = stop.elapsed_ms_since(start);
  backend.read(plan.loss, std::as_writable_bytes(std::span<float>(&loss, 1)));
  float optimizer_ms = 0.0f;
  if (optimizer) {  // the update alone, averaged over the timed steps' count
    optimizer_start.record(backend.stream());
    for (int64_t i = 0; i < options.steps; ++i) optimizer->step();
    optimizer_stop.record(backend.stream());
    CUDA_CHECK(cudaEventSynchronize(optimizer_stop.get()));
    optimizer_ms = optimizer_stop.elapsed_ms_since(optimizer_start) / static_cast<float>(options.steps);
  }
  size_t free_bytes = 0, total_bytes = 0;
  CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  if (!std::isfinite(loss)) fail_user("the loss is not finite ({}): the benchmark's step is broken", loss);

  backend.set_time_breakdown(true);
  backend.zero_gradients();
  backend.execute(inputs[0]);
  std::vector<std::pair<std::string, double>> breakdown = backend.time_breakdown();
  double breakdown_total = 0.0;
  for (const auto& [op, ms] : breakdown) breakdown_total += ms;

  const double step_ms = total_ms / static_cast<double>(options.steps);
  const double tokens_per_s = static_cast<double>(accum * options.batch * options.seq) / (step_ms / 1000.0);
  cudaDeviceProp properties{};
  CUDA_CHECK(cudaGetDeviceProperties(&properties, 0));
  const runtime::DeviceMemoryReport& memory = backend.memory_report();
  std::string ops_json;
  for (const auto& [op, ms] : breakdown) {
    ops_json += fmt::format("{}\"{}\": {:.3f}", ops_json.empty() ? "" : ", ", op, ms);
  }
  const std::string mode = options.mode == "fwd-bwd" ? "full-fwd-bwd" : options.mode;
  std::printf("%s\n", fmt::format(
      "{{\"engine\": \"surogate\", \"model\": \"{}\", \"mode\": \"{}\", \"tokens_per_s\": {:.1f}, \"step_ms\": {:.3f}, "
      "\"cuda_graphs\": {}, \"batch_lora_inputs\": {}, \"fuse_lora_backward\": {}, \"optimizer\": \"{}\", \"optimizer_ms\": {:.3f}, \"loss\": {:.5f}, \"parameters\": {}, \"trainable_parameters\": {}, "
      "\"trainable_tensors\": {}, \"lora_rank\": {}, \"seq_len\": {}, \"micro_batch\": {}, \"grad_accum\": {}, "
      "\"documents\": \"{}\", \"recompute\": \"{}\", \"lmhead_chunks\": {}, \"steps\": {}, \"peak_mem_gib\": {:.2f}, "
      "\"regions_gib\": {:.2f}, \"scratch_gib\": {:.2f}, \"compile_s\": {:.2f}, \"gpu\": \"{}\", "
      "\"breakdown_total_ms\": {:.3f}, \"breakdown_ms\": {{{}}}}}",
      options.name, mode, tokens_per_s, step_ms, options.cuda_graphs, lora && options.batch_lora_inputs,
      lora && options.fuse_lora_backward, optimize ? options.optimizer : "none", optimizer_ms, loss, parameter_count,
      optimizer ? optimizer->parameters() : 0, optimizer ? optimizer->tensors() : 0, lora ? options.lora_rank : 0,
      options.seq, options.batch, accum, options.documents, options.recompute, options.lmhead_chunks, options.steps,
      gib(total_bytes - free_bytes), gib(memory.required_bytes), gib(memory.scratch_bytes), compile_s, properties.name,
      breakdown_total, ops_json).c_str());
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
