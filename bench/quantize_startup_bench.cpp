// How fast the start-up quantizes a frozen base on the host (train/quantized_weights.h), per format,
// on one synthetic weight (default [12288, 4096], Qwen3-8B's MLP shape, values normal(0, 0.02)
// rounded to bf16 as a checkpoint holds them):
//   - "serial": the quantizer's own loop on one thread (quant/*.h), ns per value;
//   - "all cores": train::quantize_weight as the start-up calls it (every core), GB/s of bf16 in;
//   - "8B on 16 cores": the serial time scaled to Qwen3-8B's 7.6 G quantized values spread over 16
//     cores (the H200 host's), the figure to hold against the ~26–31 s the start-up took.
// The bf16 → fp32 widening of the safetensors reader (io/safetensors.h) is measured the same way,
// since every weight passes through it before quantization.
//   quantize_startup_bench [--rows R] [--cols C] [--repeats N]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
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

double best_seconds(int repeats, const std::function<void()>& body) {
  double best = 1e30;
  for (int r = 0; r < repeats; ++r) {
    const auto start = std::chrono::steady_clock::now();
    body();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return best;
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
       [&] { (void)train::quantize_weight(nf4, values); }},
      {"FP8 per tensor + transpose (fp8_hybrid)",
       [&] {
         // The serial reference of ops::quantize_fp8_tensor: amax, codes, transpose.
         const float scale = quant::fp8_scale(quant::amax_of(values), quant::Fp8Format::E4M3);
         for (int64_t i = 0; i < numel; ++i) codes[i] = quant::fp8_encode(values[i] * scale, quant::Fp8Format::E4M3);
         for (int64_t r = 0; r < rows; ++r) {
           for (int64_t c = 0; c < cols; ++c) transposed[c * rows + r] = codes[r * cols + c];
         }
       },
       [&] { (void)train::quantize_weight(fp8_tensor, values); }},
      {"FP8 blocks 128x128 (qlora_fp8)",
       [&] {
         quant::quantize_fp8_blocks(values.data(), fp8_blocks.fp8_blocks, 0, fp8_blocks.fp8_blocks.row_blocks(),
                                    codes.data(), scales.data());
       },
       [&] { (void)train::quantize_weight(fp8_blocks, values); }},
      {"NVFP4 Four Over Six (qlora_fp4)",
       [&] {
         quant::quantize_nvfp4_rows(values.data(), nvfp4.nvfp4, nvfp4_scale, quant::Nvfp4ScaleRule::FourOverSix, 0, rows,
                                    codes.data(), scale_codes.data());
       },
       [&] { (void)train::quantize_weight(nvfp4, values); }},
  };
  const double gb = static_cast<double>(numel) * 2.0 / 1e9;
  fmt::print("weight [{}, {}] ({:.2f} GB of bf16), {} threads here, best of {}\n", rows, cols, gb,
             std::thread::hardware_concurrency(), repeats);
  fmt::print("{:<42} {:>14} {:>18} {:>20}\n", "", "serial ns/value", "all cores GB/s", "8B on 16 cores, s");
  for (const Row& row : table) {
    const double serial = best_seconds(repeats, row.serial);
    const double all = best_seconds(repeats, row.all_cores);
    const double ns = serial / static_cast<double>(numel) * 1e9;
    fmt::print("{:<42} {:>14.2f} {:>18.2f} {:>20.1f}\n", row.name, ns, gb / all,
               ns * 1e-9 * kQwen3_8bQuantizedValues / kHostCores);
  }
  return 0;
}
