// Asynchronous checkpoint writing; see checkpoint_writer.h.
#include "train/checkpoint_writer.h"

#include <cstring>

#include "core/error.h"

namespace surogate::train {
namespace {
using Clock = std::chrono::steady_clock;

double elapsed_seconds(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// A copy of `bytes` kept in `owned`; returns where it lives.
std::byte* keep_copy(std::vector<std::vector<std::byte>>& owned, const void* data, size_t size) {
  owned.emplace_back(size);
  if (size > 0) std::memcpy(owned.back().data(), data, size);
  return owned.back().data();
}

}  // namespace

CheckpointSnapshot take_checkpoint_snapshot(TrainingDevice& device, const TrainingState& state, bool keep) {
  const Clock::time_point start = Clock::now();
  device.download();
  CheckpointSnapshot snapshot;
  snapshot.optimizer_state = device.optimizer_state();  // every process's shards, on rank 0
  if (!keep) {
    snapshot.optimizer_state.clear();
    return snapshot;
  }
  snapshot.state = state;
  const std::span<const WeightView> trainable = device.trainable();
  if (!device.host_views_are_live()) {
    snapshot.weights.assign(trainable.begin(), trainable.end());
  } else {
    // Reserved up front: the views point into these buffers, which must never move.
    snapshot.owned.reserve(trainable.size() + snapshot.optimizer_state.size());
    for (const WeightView& weight : trainable) {
      auto* copy = reinterpret_cast<float*>(keep_copy(snapshot.owned, weight.values.data(), weight.values.size_bytes()));
      snapshot.weights.push_back({weight.name, weight.shape, std::span<float>(copy, weight.values.size())});
    }
    for (StateTensor& tensor : snapshot.optimizer_state) {
      tensor.data = keep_copy(snapshot.owned, tensor.data, tensor.size_bytes);
    }
  }
  snapshot.blocked_seconds = elapsed_seconds(start);
  return snapshot;
}

CheckpointWriter::CheckpointWriter(CheckpointStore& store, std::chrono::milliseconds test_delay)
    : store_(store), test_delay_(test_delay) {}

CheckpointWriter::~CheckpointWriter() {
  if (thread_.joinable()) thread_.join();
}

void CheckpointWriter::start(CheckpointSnapshot snapshot) {
  SUROGATE_CHECK(!thread_.joinable(), "the previous checkpoint write was collected before the next one starts");
  snapshot_ = std::move(snapshot);
  finished_ = false;
  error_ = nullptr;
  result_ = {};
  result_.step = snapshot_.state.step;
  result_.blocked_seconds = snapshot_.blocked_seconds;
  for (const WeightView& weight : snapshot_.weights) result_.bytes += weight.values.size_bytes();
  for (const StateTensor& tensor : snapshot_.optimizer_state) result_.bytes += tensor.size_bytes;
  thread_ = std::thread([this] {
    const Clock::time_point start = Clock::now();
    try {
      result_.path = store_.save(snapshot_.state.step, [this](const std::filesystem::path& folder) {
        write_checkpoint_files(folder, snapshot_.weights, snapshot_.optimizer_state, snapshot_.state);
        if (test_delay_.count() > 0) std::this_thread::sleep_for(test_delay_);
      });
    } catch (...) {
      error_ = std::current_exception();
    }
    result_.write_seconds = elapsed_seconds(start);
    finished_ = true;
  });
}

std::optional<SavedCheckpoint> CheckpointWriter::collect() {
  thread_.join();
  snapshot_ = {};  // the copies are freed; the device's host copies may be written again
  if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
  return result_;
}

std::optional<SavedCheckpoint> CheckpointWriter::poll() {
  if (!thread_.joinable() || !finished_) return std::nullopt;
  return collect();
}

std::optional<SavedCheckpoint> CheckpointWriter::wait() {
  if (!thread_.joinable()) return std::nullopt;
  return collect();
}

}  // namespace surogate::train
