#include "vision/mrope_positions.h"

#include <algorithm>

#include "core/error.h"

namespace surogate::vision {
namespace {

struct PositionWriter {
  std::vector<int32_t>& ids;
  size_t tokens;
  void put(size_t token, int64_t t, int64_t h, int64_t w) const {
    ids[token] = static_cast<int32_t>(t);
    ids[tokens + token] = static_cast<int32_t>(h);
    ids[2 * tokens + token] = static_cast<int32_t>(w);
  }
};

}  // namespace

MropePositions mrope_positions(std::span<const int32_t> ids, int32_t image_pad_id,
                               std::span<const std::array<int64_t, 3>> grid_thw, int merge_size,
                               std::span<const int64_t> document_lengths, std::string_view where) {
  SUROGATE_CHECK(merge_size > 0, "merge_size must be positive");
  std::vector<int64_t> lengths(document_lengths.begin(), document_lengths.end());
  if (lengths.empty()) lengths.push_back(static_cast<int64_t>(ids.size()));
  int64_t total = 0;
  for (int64_t length : lengths) total += length;
  SUROGATE_CHECK(total == static_cast<int64_t>(ids.size()), "document lengths sum to {} but there are {} tokens",
                 total, ids.size());

  MropePositions result;
  result.ids.assign(3 * ids.size(), 0);
  const PositionWriter writer{result.ids, ids.size()};
  size_t image = 0;
  size_t token = 0;
  for (int64_t length : lengths) {
    const size_t end = token + static_cast<size_t>(length);
    int64_t position = 0;
    int64_t largest = -1;
    while (token < end) {
      if (ids[token] != image_pad_id) {
        writer.put(token++, position, position, position);
        largest = std::max(largest, position);
        ++position;
        continue;
      }
      if (image >= grid_thw.size()) {
        fail_user("{}: more image tokens than images ({} image{} given)", where, grid_thw.size(),
                  grid_thw.size() == 1 ? "" : "s");
      }
      const auto& grid = grid_thw[image++];
      if (grid[1] % merge_size != 0 || grid[2] % merge_size != 0) {
        fail_user("{}: image {} grid {}x{} is not a multiple of merge_size {}", where, image, grid[1], grid[2], merge_size);
      }
      const int64_t grid_h = grid[1] / merge_size;
      const int64_t grid_w = grid[2] / merge_size;
      const int64_t count = grid[0] * grid_h * grid_w;
      for (int64_t k = 0; k < count; ++k, ++token) {
        if (token >= end || ids[token] != image_pad_id) {
          fail_user("{}: image {} needs {} image tokens but its run has {}", where, image, count, k);
        }
        const int64_t t = k / (grid_h * grid_w);
        const int64_t h = (k / grid_w) % grid_h;
        const int64_t w = k % grid_w;
        writer.put(token, position + t, position + h, position + w);
        largest = std::max({largest, position + t, position + h, position + w});
      }
      position += std::max(grid_h, grid_w);
    }
    result.deltas.push_back(largest + 1 - length);
  }
  if (image != grid_thw.size()) {
    fail_user("{}: {} image{} given but the tokens hold {}", where, grid_thw.size(), grid_thw.size() == 1 ? "" : "s",
              image);
  }
  return result;
}

}  // namespace surogate::vision
