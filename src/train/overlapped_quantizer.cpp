// The start-up's quantization one weight behind the reader; see overlapped_quantizer.h.
#include "train/overlapped_quantizer.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "core/error.h"

namespace surogate::train {
namespace {

double seconds_between(std::chrono::steady_clock::time_point start, std::chrono::steady_clock::time_point end) {
  return std::chrono::duration<double>(end - start).count();
}

}  // namespace

OverlappedQuantizer::OverlappedQuantizer(Store store, std::span<const models::QuantizedWeight> quantized)
    : store_(std::move(store)) {
  int64_t largest = 0;
  for (const models::QuantizedWeight& weight : quantized) largest = std::max(largest, weight.numel());
  for (std::vector<float>& buffer : scratch_) buffer.resize(static_cast<size_t>(largest));
}

OverlappedQuantizer::~OverlappedQuantizer() {
  for (Job& job : jobs_) {
    if (job.done.valid()) job.done.wait();
  }
}

std::span<float> OverlappedQuantizer::scratch(size_t ordinal, int64_t numel) {
  return std::span<float>(scratch_[ordinal % 2]).first(static_cast<size_t>(numel));
}

const models::QuantizedWeight* OverlappedQuantizer::wait(Job& job) {
  if (!job.done.valid()) return nullptr;
  const auto start = std::chrono::steady_clock::now();
  quantizing_seconds_ += job.done.get();  // rethrows the worker's error
  waiting_seconds_ += seconds_between(start, std::chrono::steady_clock::now());
  return std::exchange(job.weight, nullptr);
}

void OverlappedQuantizer::quantize(size_t ordinal, const models::QuantizedWeight& weight) {
  const size_t slot = ordinal % 2;
  SUROGATE_CHECK(!jobs_[slot].done.valid(), "scratch {} of weight '{}' is still being quantized", slot, weight.name);
  // The weight before (the other slot) is quantized before its buffer is read into again; it goes
  // to the device below, while this one is quantized.
  const models::QuantizedWeight* before = wait(jobs_[1 - slot]);
  const std::span<const float> values = scratch(ordinal, weight.numel());
  QuantizedPieces& pieces = pieces_[slot];
  jobs_[slot].weight = &weight;
  jobs_[slot].done = std::async(std::launch::async, [&weight, values, &pieces] {
    const auto start = std::chrono::steady_clock::now();
    quantize_weight_into(weight, values, pieces);
    return seconds_between(start, std::chrono::steady_clock::now());
  });
  ++weights_;
  if (before) store_(*before, pieces_[1 - slot]);
}

void OverlappedQuantizer::drain() {
  for (size_t slot = 0; slot < jobs_.size(); ++slot) {
    if (const models::QuantizedWeight* weight = wait(jobs_[slot])) store_(*weight, pieces_[slot]);
  }
}

}  // namespace surogate::train
