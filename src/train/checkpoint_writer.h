// Asynchronous checkpoints: a saving step costs training only the copy of its state off the
// device; a writer thread writes the checkpoint folder while training goes on.
//
//   take_checkpoint_snapshot(device, state)  the step's trainable weights, optimizer state and
//       trainer state, fixed: on GPUs download() into the device's (pinned) host copies, read in
//       place until the next download(); on the CPU backend, whose host views are the live
//       buffers, a copy of them in host memory.
//   CheckpointWriter::start(snapshot)        writes it through CheckpointStore::save on its own
//       thread (checkpoint-<step>.partial, manifest with sizes and checksums, rename, rotation).
//
// One write is in flight at a time: the trainer collects the previous one (wait()) before the
// next snapshot and before anything else downloads into the host copies (outputs). A write that
// failed rethrows its error on the trainer's thread when collected; the destructor waits for a
// write in flight, so a run that stops with an error still finishes the checkpoint it started.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <filesystem>
#include <optional>
#include <thread>
#include <vector>

#include "train/checkpoint_io.h"
#include "train/checkpoint_store.h"
#include "train/device/training_device.h"
#include "train/training_state.h"

namespace surogate::train {

struct CheckpointSnapshot {
  std::vector<WeightView> weights;          // trainable parameters (views into `owned` or the device's host copies)
  std::vector<StateTensor> optimizer_state;
  TrainingState state;
  std::vector<std::vector<std::byte>> owned;  // the copies, when the device's host views are live
  double blocked_seconds = 0.0;              // training time the save cost (waiting + download / copy)
};

// `keep`: this process writes the checkpoint (rank 0's); the others only take part in the
// download (a collective across processes) and keep nothing.
CheckpointSnapshot take_checkpoint_snapshot(TrainingDevice& device, const TrainingState& state, bool keep = true);

struct SavedCheckpoint {
  int64_t step = 0;
  std::filesystem::path path;
  double blocked_seconds = 0.0;  // training time it cost
  double write_seconds = 0.0;    // time on the writer thread
  uint64_t bytes = 0;            // of its weights and optimizer state
};

class CheckpointWriter {
public:
  // `test_delay`: tests only, the writer sleeps this long after writing the files, before the
  // manifest (so a test can kill the process while a checkpoint is half-written).
  explicit CheckpointWriter(CheckpointStore& store, std::chrono::milliseconds test_delay = {});
  ~CheckpointWriter();
  CheckpointWriter(const CheckpointWriter&) = delete;
  CheckpointWriter& operator=(const CheckpointWriter&) = delete;

  // Starts writing; a previous write must have been collected.
  void start(CheckpointSnapshot snapshot);
  bool busy() const { return thread_.joinable(); }
  // The write in flight once it has finished (its error rethrown); nullopt while it runs or when none.
  std::optional<SavedCheckpoint> poll();
  // Waits for the write in flight; nullopt when none.
  std::optional<SavedCheckpoint> wait();

private:
  std::optional<SavedCheckpoint> collect();

  CheckpointStore& store_;
  std::chrono::milliseconds test_delay_;
  std::thread thread_;
  std::atomic<bool> finished_{false};
  SavedCheckpoint result_;
  std::exception_ptr error_;
  CheckpointSnapshot snapshot_;
};

}  // namespace surogate::train
