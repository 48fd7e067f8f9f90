// The start-up's quantization of the frozen base, one weight behind the reader. Loading weight k
// (reading its safetensors and widening it to fp32) and quantizing weight k − 1 take about as long
// on the host, each on every core, and used to run one after the other; here the reader fills one
// of two scratch buffers while a worker thread quantizes the weight in the other, and the worker's
// pieces go to the device from the reader's thread (devices are driven from one thread) while the
// worker quantizes the next weight. The pieces' buffers are reused from weight to weight: fresh
// pages cost more than the quantization itself (~0.5 s per GB on one thread).
// The bytes are those of quantize_weight (train/quantized_weights.h); only the timing changes.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <future>
#include <span>
#include <vector>

#include "models/quantized_weight.h"
#include "train/quantized_weights.h"

namespace surogate::train {

class OverlappedQuantizer {
public:
  // Where a weight's pieces go (TrainingDevice::store_quantized), on the caller's thread; the
  // pieces' memory is reused after it returns.
  using Store = std::function<void(const models::QuantizedWeight& weight, const QuantizedPieces& pieces)>;
  // Two scratch buffers of the largest of `quantized`.
  OverlappedQuantizer(Store store, std::span<const models::QuantizedWeight> quantized);
  // Waits for a job still in flight (an error path: its pieces are dropped).
  ~OverlappedQuantizer();
  OverlappedQuantizer(const OverlappedQuantizer&) = delete;
  OverlappedQuantizer& operator=(const OverlappedQuantizer&) = delete;

  // Where the quantized weight number `ordinal` (in load order) of `numel` values is read: the two
  // buffers alternate.
  std::span<float> scratch(size_t ordinal, int64_t numel);
  // scratch(ordinal) holds `weight`: waits for the weight before it, starts quantizing this one on
  // the worker and stores the one before. Its buffer is free again when the next
  // call returns.
  void quantize(size_t ordinal, const models::QuantizedWeight& weight);
  // Waits for the job in flight and stores its pieces: before the device is given a weight another
  // way (taken as stored), and after the last weight.
  void drain();

  int64_t weights() const { return weights_; }
  double quantizing_seconds() const { return quantizing_seconds_; }  // the worker's time
  double waiting_seconds() const { return waiting_seconds_; }        // the reader's time waiting for it

private:
  struct Job {
    const models::QuantizedWeight* weight = nullptr;
    std::future<double> done;  // the seconds it took
  };
  // Waits for `job` (rethrowing its error) and returns its weight, or null when none is in flight.
  const models::QuantizedWeight* wait(Job& job);

  Store store_;
  std::array<std::vector<float>, 2> scratch_;
  std::array<QuantizedPieces, 2> pieces_;
  std::array<Job, 2> jobs_;  // per slot; at most one in flight
  int64_t weights_ = 0;
  double quantizing_seconds_ = 0.0, waiting_seconds_ = 0.0;
};

}  // namespace surogate::train
