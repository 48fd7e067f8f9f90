// Checkpoint contents; see checkpoint_io.h.
#include "train/checkpoint_io.h"

#include <cstring>

#include "core/error.h"
#include "io/safetensors.h"
#include "io/safetensors_writer.h"
#include "train/checkpoint_store.h"

namespace surogate::train {
namespace fs = std::filesystem;

void write_checkpoint_files(const fs::path& folder, std::span<const WeightView> weights,
                            std::span<const StateTensor> optimizer_state, const TrainingState& state) {
  std::vector<io::TensorToWrite> tensors;
  for (const WeightView& weight : weights) {
    tensors.push_back({weight.name, DType::F32, weight.shape, std::as_bytes(weight.values)});
  }
  io::write_safetensors(folder / "model.safetensors", tensors, {{"format", "surogate-checkpoint"}});
  tensors.clear();
  for (const StateTensor& tensor : optimizer_state) {
    tensors.push_back({tensor.name, tensor.dtype, tensor.shape,
                       std::span<const std::byte>(static_cast<const std::byte*>(tensor.data), tensor.size_bytes)});
  }
  io::write_safetensors(folder / "optimizer.safetensors", tensors, {{"format", "surogate-checkpoint"}});
  write_file_atomically(folder / "trainer_state.json", to_json(state).dump(1));
}

namespace {
void copy_tensor(const io::SafetensorsFile& file, const std::string& name, DType dtype, void* destination,
                 size_t size_bytes) {
  const io::SafetensorsTensor* tensor = file.find(name);
  if (tensor == nullptr) {
    fail_user("{}: checkpoint has no tensor '{}' (it was written for another model, LoRA setting or optimizer); "
              "start a new run or set resume_from_checkpoint: false",
              file.path().string(), name);
  }
  if (tensor->dtype != dtype || tensor->bytes.size() != size_bytes) {
    fail_user("{}: tensor '{}' has {} bytes of {}, this run needs {} bytes of {}; the checkpoint belongs to another "
              "configuration",
              file.path().string(), name, tensor->bytes.size(), dtype_safetensors_name(tensor->dtype), size_bytes,
              dtype_safetensors_name(dtype));
  }
  std::memcpy(destination, tensor->bytes.data(), size_bytes);
}
}  // namespace

TrainingState restore_checkpoint(const fs::path& folder, std::span<const WeightView> weights,
                                 std::span<const StateTensor> optimizer_state) {
  io::SafetensorsFile model = io::SafetensorsFile::open(folder / "model.safetensors");
  for (const WeightView& weight : weights) {
    copy_tensor(model, weight.name, DType::F32, weight.values.data(), weight.values.size_bytes());
  }
  io::SafetensorsFile optimizer = io::SafetensorsFile::open(folder / "optimizer.safetensors");
  for (const StateTensor& tensor : optimizer_state) {
    copy_tensor(optimizer, tensor.name, tensor.dtype, tensor.data, tensor.size_bytes);
  }
  return read_training_state(folder / "trainer_state.json");
}

}  // namespace surogate::train
