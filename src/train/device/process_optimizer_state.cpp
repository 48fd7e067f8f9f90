// Optimizer state to and from the leader; see process_optimizer_state.h. A process's state
// travels as a JSON index (name, dtype, shape, bytes per tensor) after its length, then the
// tensors' bytes back to back.
#include "train/device/process_optimizer_state.h"

#include <cstring>
#include <string>

#include <nlohmann/json.hpp>

#include "core/dtype.h"
#include "core/error.h"

namespace surogate::train {
namespace {

std::string pack(std::span<const StateTensor> tensors, bool with_index) {
  nlohmann::json index = nlohmann::json::array();
  size_t total = 0;
  for (const StateTensor& tensor : tensors) {
    index.push_back({{"name", tensor.name}, {"dtype", std::string(dtype_safetensors_name(tensor.dtype))},
                     {"shape", tensor.shape}, {"bytes", tensor.size_bytes}});
    total += tensor.size_bytes;
  }
  std::string packed;
  if (with_index) {
    const std::string text = index.dump();
    const uint64_t length = text.size();
    packed.append(reinterpret_cast<const char*>(&length), sizeof(length));
    packed += text;
  }
  packed.reserve(packed.size() + total);
  for (const StateTensor& tensor : tensors) packed.append(static_cast<const char*>(tensor.data), tensor.size_bytes);
  return packed;
}

}  // namespace

std::vector<StateTensor> ProcessOptimizerState::gather(std::vector<StateTensor> local) {
  held_.clear();
  if (world_ == nullptr || world_->alone()) return local;
  const std::vector<std::string> pieces = world_->gather(pack(local, true));
  if (!world_->leads()) return local;
  for (size_t process = 1; process < pieces.size(); ++process) {
    const std::string& piece = pieces[process];
    uint64_t length = 0;
    SUROGATE_CHECK(piece.size() >= sizeof(length), "an optimizer-state piece starts with its index length");
    std::memcpy(&length, piece.data(), sizeof(length));
    const nlohmann::json index = nlohmann::json::parse(piece.substr(sizeof(length), length));
    Held& held = held_.emplace_back();
    held.bytes.resize(piece.size() - sizeof(length) - length);
    std::memcpy(held.bytes.data(), piece.data() + sizeof(length) + length, held.bytes.size());
    size_t offset = 0;
    for (const nlohmann::json& entry : index) {
      const size_t bytes = entry["bytes"].get<size_t>();
      SUROGATE_CHECK(offset + bytes <= held.bytes.size(), "an optimizer-state piece holds its tensors");
      held.tensors.push_back({entry["name"].get<std::string>(),
                              *dtype_from_safetensors_name(entry["dtype"].get<std::string>()),
                              entry["shape"].get<std::vector<int64_t>>(), held.bytes.data() + offset, bytes});
      offset += bytes;
    }
  }
  for (const Held& held : held_) local.insert(local.end(), held.tensors.begin(), held.tensors.end());
  return local;
}

void ProcessOptimizerState::scatter(std::span<const StateTensor> local) {
  if (world_ == nullptr || world_->alone()) return;
  std::vector<std::string> pieces;
  if (world_->leads()) {
    pieces.resize(static_cast<size_t>(world_->size()));
    for (size_t process = 1; process < pieces.size() && process - 1 < held_.size(); ++process) {
      pieces[process] = pack(held_[process - 1].tensors, false);
    }
  }
  held_.clear();
  const std::string own = world_->scatter(pieces);
  if (own.empty()) return;
  size_t offset = 0;
  for (const StateTensor& tensor : local) {
    SUROGATE_CHECK(offset + tensor.size_bytes <= own.size(), "the leader sends this process's whole state");
    std::memcpy(tensor.data, own.data() + offset, tensor.size_bytes);
    offset += tensor.size_bytes;
  }
  SUROGATE_CHECK(offset == own.size(), "the leader sends exactly this process's state");
}

}  // namespace surogate::train
