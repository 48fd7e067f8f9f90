// The replica reduction's bucket schedule; see bucket_reduction.h.
#include "train/device/bucket_reduction.h"

#include "train/device/sharded_gradients.h"

namespace surogate::train {

void BucketReduction::after_step(size_t step) {
  const size_t element = dtype_size_bytes(dtype_);
  for (size_t b : buckets_.ready_after[step]) {
    const GradientBucket& bucket = buckets_.buckets[b];
    std::byte* data = buffers_.fill(b, bucket);
    communicator_.reduce_scatter_sum(data, bucket.piece_counts, dtype_);
    const BucketPiece piece = owned_piece(bucket, shard_);
    if (piece.size() > 0) {
      buffers_.add_piece(data + (piece.begin - bucket.begin) * element, piece.begin - shard_.begin, piece.size());
    }
    buffers_.release(data);
  }
}

}  // namespace surogate::train
