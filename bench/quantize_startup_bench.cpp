// How fast the start-up quantizes a frozen base on the host (train/quantized_weights.h), per format,
// on one synthetic weight (default [12288, 4096], Qwen3-8B's MLP shape, values normal(0, 0.02)
// rounded to bf16 as a checkpoint holds them):
//   - "serial ns/v": the quantizer's own loop on one thread (quant/*.h), CPU time per value;
//   - "all cores ns/v": train::quantize_weight as the start-up calls it, the CPU time of every
//     thread per value (the split's costs count), into pieces reused from the call before as the
//     start-up's overlapped quantizer does; "GB/s": bf16 in per wall second (meaningful only on an
//     idle machine);
//   - "8B on 16 cores s": the all-cores CPU time scaled to Qwen3-8B's 7.57 G quantized values over
//     the 16 cores of the H200 host, what the start-up spends quantizing if the cores scale.
// The bf16 → fp32 widening of the safetensors reader (io/safetensors.h) is measured the same way,
// since every weight passes through it before quantization.
//   quantize_startup_bench [--rows R] [--cols C] [--repeats N]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <ctime>
#include <functional>
#include <utility>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "io/safetensors.h"
#include "models/quantized_weight.h"
#include "quant/dynamic_map.h"
#include "quant/fp8_blocks.h"
#include "quant/fp8_scaling.h"
#include "quant/nf4.h"
#include "quant/nvfp4.h"
#include "train/quantized_weights.h"

namespace {

using namespace surogate;

constexpr double kQwen3_8bQuantizedValues = 7.57e9;  // 36 layers × 7 projections of Qwen3-8B
constexpr double kHostCores = 16.0;

// Seconds of `clock` (CPU time: the box may be shared, so wall time would measure the others too).
double cpu_seconds(clockid_t clock) {
  timespec now{};
  clock_gettime(clock, &now);
  return static_cast<double>(now.tv_sec) + static_cast<double>(now.tv_nsec) * 1e-9;
}

// The best of `repeats` runs of `body`: {CPU seconds of `clock`, wall seconds}.
std::pair<double, double> best_seconds(int repeats, clockid_t clock, const std::function<void()>& body) {
  double best_cpu = 1e30, best_wall = 1e30;
  for (int r = 0; r < repeats; ++r) {
    const double cpu = cpu_seconds(clock);
    const auto start = std::chrono::steady_clock::now();
    body();
    best_wall = std::min(best_wall, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    best_cpu = std::min(best_cpu, cpu_seconds(clock) - cpu);
  }
  return {best_cpu, best_wall};
}

struct Row {
  std::string name;
  std::function<void()> serial;
  std::function<void()> all_cores;
};

}  // namespace

int main(int argc, char** argv) {
  int64_t rows = 12288, cols = 4096;
  int repeats = 3;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--rows") rows = std::stoll(argv[i + 1]);
    else if (flag == "--cols") cols = std::stoll(argv[i + 1]);
    else if (flag == "--repeats") repeats = std::stoi(argv[i + 1]);
    else {
      fmt::print(stderr, "unknown flag {}\n", flag);
      return 2;
    }
  }
  const int64_t numel = rows * cols;
  std::vector<uint16_t> bf16(static_cast<size_t>(numel));
  std::mt19937_64 generator(7);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  for (uint16_t& value : bf16) {
    const float x = normal(generator);
    uint32_t bits;
    std::memcpy(&bits, &x, 4);
    value = static_cast<uint16_t>((bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16);
  }
  std::vector<float> values(static_cast<size_t>(numel));
  io::SafetensorsTensor tensor{"bench", DType::BF16, {rows, cols},
                               std::span<const std::byte>(reinterpret_cast<const std::byte*>(bf16.data()), bf16.size() * 2)};
  io::read_tensor_as_float32(tensor, values);

  models::QuantizedWeight weight;
  weight.name = "bench";
  weight.shape = {rows, cols};
  auto as = [&](models::WeightFormat format, size_t pieces) {
    models::QuantizedWeight w = weight;
    w.format = format;
    w.pieces.assign(pieces, "piece");
    return w;
  };
  models::QuantizedWeight nf4 = as(models::WeightFormat::Nf4, 4);
  nf4.nf4 = {numel, 64, true};
  models::QuantizedWeight fp8_tensor = as(models::WeightFormat::Fp8Tensor, 3);
  models::QuantizedWeight fp8_blocks = as(models::WeightFormat::Fp8Block, 2);
  fp8_blocks.fp8_blocks = {rows, cols, 128, 128};
  models::QuantizedWeight nvfp4 = as(models::WeightFormat::Nvfp4, 3);
  nvfp4.nvfp4 = {rows, cols};

  std::vector<uint8_t> codes(static_cast<size_t>(numel)), transposed(static_cast<size_t>(numel));
  std::vector<float> scales(static_cast<size_t>(numel / 16 + cols + 1));
  std::vector<uint8_t> scale_codes(static_cast<size_t>(numel / 16 + rows + 1));
  const quant::Nvfp4TensorScale nvfp4_scale =
      quant::nvfp4_tensor_scale(quant::amax_of(values), quant::Nvfp4ScaleRule::FourOverSix);
  std::vector<float> widened(static_cast<size_t>(numel));
  train::QuantizedPieces reused;  // as the start-up's overlapped quantizer keeps them
  std::vector<Row> table = {
      {"bf16 -> fp32 widening (reader)",
       [&] {
         for (int64_t i = 0; i < numel; ++i) {
           const uint32_t bits = static_cast<uint32_t>(bf16[static_cast<size_t>(i)]) << 16;
           std::memcpy(&widened[static_cast<size_t>(i)], &bits, 4);
         }
       },
       [&] { io::read_tensor_as_float32(tensor, widened); }},
      {"NF4 block 64 + double quant (qlora_bnb)",
       [&] {
         quant::quantize_nf4_blocks(values.data(), nf4.nf4, 0, nf4.nf4.blocks(), codes.data(), scales.data());
         (void)quant::quantize_absmax(std::span<const float>(scales.data(), static_cast<size_t>(nf4.nf4.blocks())));
       },
       [&] { train::quantize_weight_into(nf4, values, reused); }},
      {"FP8 per tensor + transpose (fp8_hybrid)",
       [&] {
         // The serial reference of ops::quantize_fp8_tensor: amax, codes, transpose.
         const float scale = quant::fp8_scale(quant::amax_of(values), quant::Fp8Format::E4M3);
         for (int64_t i = 0; i < numel; ++i) codes[i] = quant::fp8_encode(values[i] * scale, quant::Fp8Format::E4M3);
         for (int64_t r = 0; r < rows; ++r) {
           for (int64_t c = 0; c < cols; ++c) transposed[c * rows + r] = codes[r * cols + c];
         }
       },
       [&] { train::quantize_weight_into(fp8_tensor, values, reused); }},
      {"FP8 blocks 128x128 (qlora_fp8)",
       [&] {
         quant::quantize_fp8_blocks(values.data(), fp8_blocks.fp8_blocks, 0, fp8_blocks.fp8_blocks.row_blocks(),
                                    codes.data(), scales.data());
       },
       [&] { train::quantize_weight_into(fp8_blocks, values, reused); }},
      {"NVFP4 Four Over Six (qlora_fp4)",
       [&] {
         quant::quantize_nvfp4_rows(values.data(), nvfp4.nvfp4, nvfp4_scale, quant::Nvfp4ScaleRule::FourOverSix, 0, rows,
                                    codes.data(), scale_codes.data());
       },
       [&] { train::quantize_weight_into(nvfp4, values, reused); }},
  };
  const double gb = static_cast<double>(numel) * 2.0 / 1e9;
  fmt::print("weight [{}, {}] ({:.2f} GB of bf16), {} threads here, best of {}\n", rows, cols, gb,
             std::thread::hardware_concurrency(), repeats);
  fmt::print("{:<42} {:>12} {:>14} {:>14} {:>16}\n", "", "serial ns/v", "all cores ns/v", "all cores GB/s",
             "8B on 16 cores s");
  for (const Row& row : table) {
    const double serial = best_seconds(repeats, CLOCK_THREAD_CPUTIME_ID, row.serial).first;
    const auto [all_cpu, all_wall] = best_seconds(repeats, CLOCK_PROCESS_CPUTIME_ID, row.all_cores);
    const double serial_ns = serial / static_cast<double>(numel) * 1e9;
    const double all_ns = all_cpu / static_cast<double>(numel) * 1e9;  // CPU time over every thread
    fmt::print("{:<42} {:>12.2f} {:>14.2f} {:>14.2f} {:>16.1f}\n", row.name, serial_ns, all_ns, gb / all_wall,
               all_ns * 1e-9 * kQwen3_8bQuantizedValues / kHostCores);
  }
  return 0;
}
