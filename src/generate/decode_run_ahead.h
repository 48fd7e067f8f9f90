// One greedy sequence's next decode step launched before this step's id is read back (the KV
// cache model's feed_greedy on CUDA, generate/kv_cache_model.cpp). On the GPU, step n's greedy id
// is copied into the decode plan's input_ids (the next execute is given every input but that one,
// and an input it is not given stays as it is); step n + 1 runs on it while the host reads step
// n's id, feeds the engine and comes back. Without it the GPU idles between steps for the host's
// turn-around (about 32 µs on Qwen3-8B's 4.3 ms step: engine, inputs, upload, graph launch) and
// the read-back's latency.
//
// This class is the device side: where the ids go (two pinned host buffers, each behind an event,
// so a step's ids can be waited for while the next step is enqueued after them) and the
// device-side copy. Which step is in flight, and whether the engine's next call is the one it
// guessed, is the model's (kv_cache_model.cpp).
#pragma once

#if SUROGATE_WITH_CUDA

#include <cstdint>
#include <span>

#include "cuda/device_buffer.h"
#include "cuda/host_buffer.h"
#include "graph/graph.h"
#include "runtime/cuda_backend.h"

namespace surogate::generate {

class DecodeRunAhead {
 public:
  // `tokens` (I32 [rows], the greedy ids) and `input_ids` (I32 [rows], the decode plan's input of
  // one token a row) of `backend`'s loaded plan; `backend` must outlive this.
  DecodeRunAhead(runtime::CudaBackend& backend, graph::TensorId tokens, graph::TensorId input_ids, int64_t rows);

  // After an execute: its ids copied to host buffer `which` (0 or 1) behind an event.
  void read_ids(int which);
  // The ids of buffer `which` once their copy has run (what was enqueued after it may still run).
  std::span<const int32_t> wait(int which);
  // The last execute's ids become the next execute's input_ids, on the device, in stream order.
  void feed_ids_forward();
  // Every enqueued step done (a speculative one dropped: nothing it wrote is read any more).
  void settle();

 private:
  runtime::CudaBackend& backend_;
  graph::TensorId tokens_, input_ids_;
  int64_t rows_;
  cuda::PinnedHostBuffer<int32_t> ids_[2];
  cuda::Event copied_[2]{cuda::Event(false), cuda::Event(false)};
};

}  // namespace surogate::generate

#endif
