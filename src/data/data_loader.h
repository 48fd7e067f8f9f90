// The trainer's view of a packed split: micro-batches of B rows × T tokens in an order that is a
// deterministic function of (seed, epoch), resumable from any (epoch, index) position.
// Each epoch visits every row exactly once; the last batch of an epoch is filled with
// padding-only rows (no loss tokens) so every batch has the same shape.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "data/packing.h"
#include "data/token_cache.h"

namespace surogate::data {

struct LoaderPosition {
  uint64_t epoch = 0;
  uint64_t index = 0;  // batches already taken in this epoch
  bool operator==(const LoaderPosition&) const = default;
};

class DataLoader {
public:
  // `cache` keeps the mapping alive; `rows` is cache->train() or cache->eval().
  // `shuffle` false: every epoch takes the rows in their order (KTO, data/kto_rows.h).
  DataLoader(std::shared_ptr<const TokenCache> cache, PackedRowsView rows, int64_t batch_size, uint64_t seed,
             int32_t pad_id, bool shuffle = true);

  uint64_t batches_per_epoch() const;
  // The next batch; moves to the next epoch after the last batch of one.
  PackedBatch next();
  // Moves past the next batch without reading it (its position advances exactly as next()'s):
  // a process of a data-parallel world skips the micro-batches other processes' ranks train.
  void skip();
  LoaderPosition position() const { return position_; }
  // From now on next() gives each batch in prompt sharing's layout of `shared_length` tokens a row
  // (data/prompt_sharing.h: `surogate dpo`'s pairs).
  void share_prompts(int64_t shared_length) { shared_length_ = shared_length; }
  void seek(LoaderPosition position);

private:
  void shuffle_for_epoch();

  std::shared_ptr<const TokenCache> cache_;
  PackedRowsView rows_;
  uint64_t batch_size_;
  uint64_t seed_;
  int32_t pad_id_;
  bool shuffle_ = true;
  int64_t shared_length_ = 0;  // 0: the rows as packed
  LoaderPosition position_;
  std::vector<uint64_t> order_;  // row order of position_.epoch
  uint64_t order_epoch_ = UINT64_MAX;
};

}  // namespace surogate::data
