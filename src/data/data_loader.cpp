// Deterministic, resumable batching over packed rows; see data_loader.h.
#include "data/data_loader.h"

#include <numeric>
#include <random>

#include "core/error.h"
#include "data/prompt_sharing.h"

namespace surogate::data {

DataLoader::DataLoader(std::shared_ptr<const TokenCache> cache, PackedRowsView rows, int64_t batch_size, uint64_t seed,
                       int32_t pad_id, bool shuffle)
    : cache_(std::move(cache)),
      rows_(rows),
      batch_size_(static_cast<uint64_t>(batch_size)),
      seed_(seed),
      pad_id_(pad_id),
      shuffle_(shuffle) {
  if (batch_size <= 0) fail_user("per_device_train_batch_size must be positive (got {})", batch_size);
  if (rows_.rows() == 0) fail_user("the dataset split is empty: there are no packed rows to train or evaluate on");
}

uint64_t DataLoader::batches_per_epoch() const { return (rows_.rows() + batch_size_ - 1) / batch_size_; }

void DataLoader::shuffle_for_epoch() {
  if (order_epoch_ == position_.epoch) return;
  order_.resize(rows_.rows());
  std::iota(order_.begin(), order_.end(), 0);
  // One generator per epoch, seeded from (seed, epoch), so any epoch can be rebuilt on resume.
  std::seed_seq sequence{static_cast<uint32_t>(seed_), static_cast<uint32_t>(seed_ >> 32),
                         static_cast<uint32_t>(position_.epoch), static_cast<uint32_t>(position_.epoch >> 32)};
  std::mt19937_64 generator(sequence);
  for (size_t i = shuffle_ ? order_.size() : 0; i > 1; --i) std::swap(order_[i - 1], order_[generator() % i]);
  order_epoch_ = position_.epoch;
}

PackedBatch DataLoader::next() {
  shuffle_for_epoch();
  std::vector<uint64_t> indices;
  indices.reserve(batch_size_);
  for (uint64_t k = 0; k < batch_size_; ++k) {
    uint64_t slot = position_.index * batch_size_ + k;
    indices.push_back(slot < order_.size() ? order_[slot] : rows_.rows());  // rows() = a padding row
  }
  PackedBatch batch = make_batch(rows_, indices, pad_id_);
  skip();
  return shared_length_ > 0 ? data::share_prompts(batch, shared_length_, pad_id_) : batch;
}

void DataLoader::skip() {
  if (++position_.index >= batches_per_epoch()) {
    ++position_.epoch;
    position_.index = 0;
  }
}

void DataLoader::seek(LoaderPosition position) {
  if (position.index >= batches_per_epoch()) {
    fail_user("cannot resume the data loader at batch {} of epoch {}: an epoch has {} batches", position.index,
              position.epoch, batches_per_epoch());
  }
  position_ = position;
}

}  // namespace surogate::data
