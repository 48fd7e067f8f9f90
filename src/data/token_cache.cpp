// Token cache writing and validated memory-mapped reading; see token_cache.h.
#include "data/token_cache.h"

#include <cstring>

#include <xxhash.h>

#include "core/error.h"
#include "io/atomic_file.h"
#include "io/mapped_file.h"

namespace surogate::data {
namespace {

constexpr char kMagic[8] = {'S', 'U', 'R', 'O', 'T', 'O', 'K', '\0'};
constexpr size_t kHeaderBytes = 128;

struct Header {
  char magic[8];
  uint32_t version;
  uint32_t header_bytes;
  uint64_t key;
  uint64_t payload_bytes;
  uint64_t payload_checksum;
  uint64_t sequence_length;
  uint64_t train_rows;
  uint64_t train_segments;
  uint64_t eval_rows;
  uint64_t eval_segments;
  uint64_t stats_bytes;
  uint64_t weighted;  // 1: each split stores rows × T float loss weights after its segment table
  uint64_t vision_bytes;  // > 0: the splits' vision-language fields follow them (token_cache.h)
};
static_assert(sizeof(Header) <= kHeaderBytes);

uint64_t split_bytes(uint64_t rows, uint64_t segments, uint64_t T, bool weighted) {
  return rows * T * 4 * (weighted ? 4 : 3) + (rows + 1) * 8 + segments * 4;
}

template <typename T>
void put(const io::ByteSink& sink, XXH3_state_t* state, const std::vector<T>& values) {
  if (values.empty()) return;
  sink(values.data(), values.size() * sizeof(T));
  XXH3_64bits_update(state, values.data(), values.size() * sizeof(T));
}

// The vision block of one split (token_cache.h), in write order.
uint64_t vision_split_bytes(const PackedRows& rows) {
  const uint64_t pixels = rows.image_pixels.size();
  return rows.mrope_positions.size() * 4 + rows.row_image_offsets.size() * 8 + rows.image_sizes.size() * 4 +
         rows.image_pixel_offsets.size() * 8 + pixels + (8 - pixels % 8) % 8;
}

void put_vision_split(const io::ByteSink& sink, XXH3_state_t* state, const PackedRows& rows) {
  put(sink, state, rows.mrope_positions);
  put(sink, state, rows.row_image_offsets);
  put(sink, state, rows.image_sizes);
  put(sink, state, rows.image_pixel_offsets);
  put(sink, state, rows.image_pixels);
  put(sink, state, std::vector<uint8_t>((8 - rows.image_pixels.size() % 8) % 8, 0));
}

// Reads one split's vision block at `cursor` (advanced) into `view`, checking every offset against
// what remains before `end`; false when the block does not hold together.
bool take_vision_split(const uint8_t*& cursor, const uint8_t* end, uint64_t rows, uint64_t T, PackedRowsView& view) {
  auto take = [&]<typename V>(uint64_t count, std::span<const V>& out) {
    if (count > static_cast<uint64_t>(end - cursor) / sizeof(V)) return false;
    out = std::span<const V>(reinterpret_cast<const V*>(cursor), count);
    cursor += count * sizeof(V);
    return true;
  };
  if (!take(rows * 3 * T, view.mrope_positions) || !take(rows + 1, view.row_image_offsets)) return false;
  for (size_t r = 0; r < rows; ++r) {
    if (view.row_image_offsets[r] > view.row_image_offsets[r + 1]) return false;
  }
  const uint64_t images = view.row_image_offsets[rows];
  if (view.row_image_offsets[0] != 0 || !take(images * 2, view.image_sizes) ||
      !take(images + 1, view.image_pixel_offsets) || view.image_pixel_offsets[0] != 0) {
    return false;
  }
  for (uint64_t i = 0; i < images; ++i) {
    const int64_t width = view.image_sizes[2 * i], height = view.image_sizes[2 * i + 1];
    if (width <= 0 || height <= 0 ||
        view.image_pixel_offsets[i + 1] - view.image_pixel_offsets[i] != static_cast<uint64_t>(width * height * 3)) {
      return false;
    }
  }
  const uint64_t pixels = view.image_pixel_offsets[images];
  if (!take(pixels, view.image_pixels)) return false;
  cursor += (8 - pixels % 8) % 8;
  return cursor <= end;
}

}  // namespace

void write_token_cache(const std::filesystem::path& path, uint64_t key, const PackedRows& train,
                       const PackedRows& eval, const nlohmann::json& report) {
  std::string stats = report.dump(2, ' ', false, nlohmann::json::error_handler_t::replace);
  const uint64_t T = train.sequence_length;
  SUROGATE_CHECK(eval.rows() == 0 || eval.sequence_length == T, "train and eval differ in T");
  Header header{};
  std::memcpy(header.magic, kMagic, 8);
  header.version = kTokenCacheVersion;
  header.header_bytes = kHeaderBytes;
  header.key = key;
  header.sequence_length = T;
  header.train_rows = train.rows();
  header.train_segments = train.segment_lengths.size();
  header.eval_rows = eval.rows();
  header.eval_segments = eval.segment_lengths.size();
  header.stats_bytes = stats.size();
  const bool weighted = !train.loss_weights.empty() || !eval.loss_weights.empty();
  header.weighted = weighted ? 1 : 0;
  // Both splits store weights when either has them; a split without them gets 1 per labelled token.
  auto weights_of = [&](const PackedRows& rows) {
    if (!weighted || !rows.loss_weights.empty()) return rows.loss_weights;
    std::vector<float> ones(rows.labels.size());
    for (size_t i = 0; i < ones.size(); ++i) ones[i] = rows.labels[i] != kIgnoreLabel ? 1.0f : 0.0f;
    return ones;
  };
  const std::vector<float> train_weights = weights_of(train), eval_weights = weights_of(eval);
  const bool vision = !train.row_image_offsets.empty();
  SUROGATE_CHECK(vision == !eval.row_image_offsets.empty(), "train and eval differ in vision (PackingOptions::vision)");
  header.vision_bytes = vision ? vision_split_bytes(train) + vision_split_bytes(eval) : 0;
  header.payload_bytes = split_bytes(header.train_rows, header.train_segments, T, weighted) +
                         split_bytes(header.eval_rows, header.eval_segments, T, weighted) + header.vision_bytes +
                         stats.size();
  // The checksum covers the payload, which is written after the header: compute it first.
  auto hash_payload = [&](const io::ByteSink& sink) {
    XXH3_state_t* state = XXH3_createState();
    XXH3_64bits_reset(state);
    for (const PackedRows* rows : {&train, &eval}) {
      put(sink, state, rows->input_ids);
      put(sink, state, rows->labels);
      put(sink, state, rows->position_ids);
      put(sink, state, rows->row_segment_offsets);
      put(sink, state, rows->segment_lengths);
      put(sink, state, rows == &train ? train_weights : eval_weights);
    }
    if (vision) {
      put_vision_split(sink, state, train);
      put_vision_split(sink, state, eval);
    }
    sink(stats.data(), stats.size());
    XXH3_64bits_update(state, stats.data(), stats.size());
    uint64_t digest = XXH3_64bits_digest(state);
    XXH3_freeState(state);
    return digest;
  };
  header.payload_checksum = hash_payload([](const void*, size_t) {});
  const std::filesystem::path folder = path.parent_path().empty() ? "." : path.parent_path();
  std::error_code error;
  std::filesystem::create_directories(folder, error);
  if (error) {
    fail_user("cannot create the token cache folder {}: {}; output_dir (or `surogate tokenize --output`) must be a "
              "writable folder, not a file", folder.string(), error.message());
  }
  io::write_file_atomically(path, [&](const io::ByteSink& sink) {
    char block[kHeaderBytes] = {};
    std::memcpy(block, &header, sizeof(header));
    sink(block, kHeaderBytes);
    hash_payload(sink);
  });
}

std::shared_ptr<TokenCache> TokenCache::open(const std::filesystem::path& path, uint64_t expected_key, Problem& problem) {
  if (!std::filesystem::exists(path)) {
    problem.reason = "missing";
    return nullptr;
  }
  auto file = std::make_unique<io::MappedFile>(path);
  auto bytes = file->bytes();
  if (bytes.size() < kHeaderBytes) {
    problem.reason = "corrupt (shorter than its header)";
    return nullptr;
  }
  Header header;
  std::memcpy(&header, bytes.data(), sizeof(header));
  if (std::memcmp(header.magic, kMagic, 8) != 0) {
    problem.reason = "corrupt (not a Surogate token cache)";
    return nullptr;
  }
  if (header.version != kTokenCacheVersion || header.header_bytes != kHeaderBytes) {
    problem.reason = "stale (written by another format version)";
    return nullptr;
  }
  if (header.key != expected_key) {
    problem.reason = "stale (the datasets, tokenizer, template or data settings changed)";
    return nullptr;
  }
  const uint64_t T = header.sequence_length;
  // Guard the size arithmetic against absurd header values before trusting it.
  if (T == 0 || T > (1ull << 24) || header.train_rows > (1ull << 36) || header.eval_rows > (1ull << 36) ||
      header.train_segments > (1ull << 40) || header.eval_segments > (1ull << 40) ||
      header.stats_bytes > (1ull << 40) || header.vision_bytes > (1ull << 48)) {
    problem.reason = "corrupt (impossible sizes in the header)";
    return nullptr;
  }
  const bool weighted = header.weighted == 1;
  uint64_t expected_payload = split_bytes(header.train_rows, header.train_segments, T, weighted) +
                              split_bytes(header.eval_rows, header.eval_segments, T, weighted) + header.vision_bytes +
                              header.stats_bytes;
  if (header.payload_bytes != expected_payload || bytes.size() != kHeaderBytes + expected_payload) {
    problem.reason = "corrupt (truncated or wrong size)";
    return nullptr;
  }
  const auto* payload = reinterpret_cast<const uint8_t*>(bytes.data()) + kHeaderBytes;
  if (XXH3_64bits(payload, expected_payload) != header.payload_checksum) {
    problem.reason = "corrupt (checksum mismatch)";
    return nullptr;
  }
  auto cache = std::shared_ptr<TokenCache>(new TokenCache());
  const uint8_t* cursor = payload;
  auto take_split = [&](uint64_t rows, uint64_t segments) {
    PackedRowsView view;
    view.sequence_length = T;
    auto ints = [&](uint64_t count) {
      std::span<const int32_t> span(reinterpret_cast<const int32_t*>(cursor), count);
      cursor += count * 4;
      return span;
    };
    view.input_ids = ints(rows * T);
    view.labels = ints(rows * T);
    view.position_ids = ints(rows * T);
    view.row_segment_offsets = std::span<const uint64_t>(reinterpret_cast<const uint64_t*>(cursor), rows + 1);
    cursor += (rows + 1) * 8;
    view.segment_lengths = ints(segments);
    if (weighted) {
      view.loss_weights = std::span<const float>(reinterpret_cast<const float*>(cursor), rows * T);
      cursor += rows * T * 4;
    }
    return view;
  };
  cache->train_ = take_split(header.train_rows, header.train_segments);
  cache->eval_ = take_split(header.eval_rows, header.eval_segments);
  if (header.vision_bytes > 0) {
    const uint8_t* vision_end = cursor + header.vision_bytes;
    if (!take_vision_split(cursor, vision_end, header.train_rows, T, cache->train_) ||
        !take_vision_split(cursor, vision_end, header.eval_rows, T, cache->eval_) || cursor != vision_end) {
      problem.reason = "corrupt (bad image table)";
      return nullptr;
    }
  }
  cache->report_ = nlohmann::json::parse(reinterpret_cast<const char*>(cursor),
                                         reinterpret_cast<const char*>(cursor) + header.stats_bytes, nullptr, false);
  // Segment tables index the token arrays: check them once so batches never read out of bounds.
  for (const PackedRowsView* view : {&cache->train_, &cache->eval_}) {
    uint64_t previous = 0;
    for (size_t r = 0; r < view->row_segment_offsets.size(); ++r) {
      uint64_t offset = view->row_segment_offsets[r];
      if (offset < previous || offset > view->segment_lengths.size() || (r == 0 && offset != 0)) {
        problem.reason = "corrupt (bad segment table)";
        return nullptr;
      }
      if (r > 0) {
        int64_t total = 0;
        for (uint64_t s = previous; s < offset; ++s) total += std::abs(static_cast<int64_t>(view->segment_lengths[s]));
        if (static_cast<uint64_t>(total) != T) {
          problem.reason = "corrupt (segments do not cover a row)";
          return nullptr;
        }
      }
      previous = offset;
    }
  }
  cache->key_ = header.key;
  cache->file_ = std::move(file);
  return cache;
}

TokenCache::~TokenCache() = default;

}  // namespace surogate::data
