// Packing documents into rows and assembling batches; see packing.h.
#include "data/packing.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <random>
#include <utility>

#include "core/error.h"

namespace surogate::data {
namespace {

// Document indices in a deterministic pseudo-random order (std::shuffle's output is not
// specified across standard libraries, so the Fisher-Yates loop is written out).
std::vector<size_t> shuffled_order(size_t count, uint64_t seed) {
  std::vector<size_t> order(count);
  std::iota(order.begin(), order.end(), 0);
  std::mt19937_64 generator(seed);
  for (size_t i = count; i > 1; --i) {
    size_t j = static_cast<size_t>(generator() % i);
    std::swap(order[i - 1], order[j]);
  }
  return order;
}

// Tokens [begin, end) of `document` as one segment of the row being written.
void write_part(PackedRows& out, const TokenizedSample& document, size_t begin, size_t end, bool weighted,
                PackingStats& stats) {
  const size_t length = end - begin;
  out.input_ids.insert(out.input_ids.end(), document.input_ids.begin() + static_cast<long>(begin),
                       document.input_ids.begin() + static_cast<long>(end));
  out.labels.insert(out.labels.end(), document.labels.begin() + static_cast<long>(begin),
                    document.labels.begin() + static_cast<long>(end));
  out.labels[out.labels.size() - length] = kIgnoreLabel;  // nothing in this document predicts its first token
  if (weighted) {
    for (size_t p = begin; p < end; ++p) {
      const bool labelled = p > begin && document.labels[p] != kIgnoreLabel;
      out.loss_weights.push_back(!labelled ? 0.0f : document.weights.empty() ? 1.0f : document.weights[p]);
    }
  }
  for (size_t p = 0; p < length; ++p) out.position_ids.push_back(static_cast<int32_t>(p));
  out.segment_lengths.push_back(static_cast<int32_t>(length));
  stats.tokens += length;
  for (size_t p = begin + 1; p < end; ++p) stats.loss_tokens += document.labels[p] != kIgnoreLabel ? 1 : 0;
}

// The row just written's M-RoPE positions and images (PackedRows' vision fields): a text document's
// positions on every axis are its 1-D ones, a document with images brings its own; `start` is the
// row's first document token (after left padding).
void add_vision_row(PackedRows& out, const std::vector<const TokenizedSample*>& documents, size_t T, size_t start) {
  const auto row_begin = static_cast<long>(out.position_ids.size() - T);
  std::vector<int32_t> positions(3 * T);
  for (size_t axis = 0; axis < 3; ++axis) {
    std::copy(out.position_ids.begin() + row_begin, out.position_ids.end(), positions.begin() + static_cast<long>(axis * T));
  }
  size_t at = start;
  for (const auto* document : documents) {
    const size_t length = document->input_ids.size();
    if (document->images) {
      const SampleImages& images = *document->images;
      SUROGATE_CHECK(images.positions.size() == 3 * length, "{} M-RoPE positions for a document of {} tokens",
                     images.positions.size(), length);
      for (size_t axis = 0; axis < 3; ++axis) {
        std::copy_n(images.positions.begin() + static_cast<long>(axis * length), length,
                    positions.begin() + static_cast<long>(axis * T + at));
      }
      for (const vision::RgbImage& image : images.resized) {
        out.image_sizes.push_back(image.width);
        out.image_sizes.push_back(image.height);
        out.image_pixels.insert(out.image_pixels.end(), image.pixels.begin(), image.pixels.end());
        out.image_pixel_offsets.push_back(out.image_pixels.size());
      }
    }
    at += length;
  }
  out.mrope_positions.insert(out.mrope_positions.end(), positions.begin(), positions.end());
  out.row_image_offsets.push_back(out.image_sizes.size() / 2);
}

void write_row(PackedRows& out, const std::vector<const TokenizedSample*>& documents, const PackingOptions& options,
               bool weighted, PackingStats& stats) {
  const size_t T = options.sequence_length;
  size_t used = 0;
  for (const auto* document : documents) used += document->input_ids.size();
  SUROGATE_CHECK(used <= T, "row overflow: {} > {}", used, T);
  size_t padding = T - used;
  auto add_padding = [&] {
    if (padding == 0) return;
    out.input_ids.insert(out.input_ids.end(), padding, options.pad_id);
    out.labels.insert(out.labels.end(), padding, kIgnoreLabel);
    out.position_ids.insert(out.position_ids.end(), padding, 0);
    if (weighted) out.loss_weights.insert(out.loss_weights.end(), padding, 0.0f);
    out.segment_lengths.push_back(-static_cast<int32_t>(padding));
  };
  if (options.pad_left) add_padding();
  for (const auto* document : documents) {
    // A preference pair (sample.h: first_part) is two documents: each restarts its positions and
    // its first token predicts nothing.
    const size_t length = document->input_ids.size();
    const size_t split = document->first_part > 0 ? static_cast<size_t>(document->first_part) : length;
    for (const auto& [begin, end] : {std::pair{size_t{0}, split}, std::pair{split, length}}) {
      if (begin < end) write_part(out, *document, begin, end, weighted, stats);
    }
  }
  if (!options.pad_left) add_padding();
  if (options.vision) add_vision_row(out, documents, T, options.pad_left ? T - used : 0);
  out.row_segment_offsets.push_back(out.segment_lengths.size());
  ++stats.rows;
  stats.slots += T;
}

// A vision-language batch's M-RoPE positions [3, B, T] (zeros for a padding-only row) and images.
void add_batch_images(const PackedRowsView& rows, std::span<const uint64_t> row_indices, PackedBatch& batch) {
  const size_t T = rows.sequence_length;
  const size_t B = row_indices.size();
  batch.mrope_position_ids.assign(3 * B * T, 0);
  for (size_t b = 0; b < B; ++b) {
    const uint64_t row = row_indices[b];
    if (row == rows.rows()) continue;
    for (size_t axis = 0; axis < 3; ++axis) {
      std::copy_n(rows.mrope_positions.begin() + static_cast<long>((row * 3 + axis) * T), T,
                  batch.mrope_position_ids.begin() + static_cast<long>((axis * B + b) * T));
    }
    for (uint64_t image = rows.row_image_offsets[row]; image < rows.row_image_offsets[row + 1]; ++image) {
      vision::RgbImage& out = batch.images.emplace_back();
      out.width = rows.image_sizes[2 * image];
      out.height = rows.image_sizes[2 * image + 1];
      out.pixels.assign(rows.image_pixels.begin() + static_cast<long>(rows.image_pixel_offsets[image]),
                        rows.image_pixels.begin() + static_cast<long>(rows.image_pixel_offsets[image + 1]));
    }
  }
}

}  // namespace

PackedRows pack_documents(std::vector<TokenizedSample> documents, const PackingOptions& options, PackingStats& stats) {
  const size_t T = options.sequence_length;
  SUROGATE_CHECK(T > 0, "sequence length must be positive");
  for (const auto& document : documents) {
    SUROGATE_CHECK(!document.input_ids.empty() && document.input_ids.size() <= T, "document of {} tokens for T={}",
                   document.input_ids.size(), T);
  }
  PackedRows out;
  out.sequence_length = T;
  if (options.vision) out.row_image_offsets = out.image_pixel_offsets = {0};
  stats.documents += documents.size();
  std::vector<size_t> order = shuffled_order(documents.size(), options.seed);
  if (options.keep_order) std::iota(order.begin(), order.end(), 0);
  std::vector<std::vector<const TokenizedSample*>> rows;
  switch (options.mode) {
    case PackingMode::OnePerRow:
      for (size_t index : order) rows.push_back({&documents[index]});
      break;
    case PackingMode::Sequential: {
      size_t used = T;
      for (size_t index : order) {
        size_t length = documents[index].input_ids.size();
        if (used + length > T) {
          rows.emplace_back();
          used = 0;
        }
        rows.back().push_back(&documents[index]);
        used += length;
      }
      break;
    }
    case PackingMode::BestFit: {
      std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
        return documents[a].input_ids.size() > documents[b].input_ids.size();
      });
      std::multimap<size_t, size_t> room;  // free tokens → row
      for (size_t index : order) {
        size_t length = documents[index].input_ids.size();
        auto best = room.lower_bound(length);
        size_t row;
        size_t free_tokens;
        if (best == room.end()) {
          row = rows.size();
          rows.emplace_back();
          free_tokens = T;
        } else {
          row = best->second;
          free_tokens = best->first;
          room.erase(best);
        }
        rows[row].push_back(&documents[index]);
        if (free_tokens - length > 0) room.emplace(free_tokens - length, row);
      }
      break;
    }
  }
  out.input_ids.reserve(rows.size() * T);
  out.labels.reserve(rows.size() * T);
  out.position_ids.reserve(rows.size() * T);
  const bool weighted = std::any_of(documents.begin(), documents.end(),
                                   [](const TokenizedSample& document) { return !document.weights.empty(); });
  for (const auto& row : rows) write_row(out, row, options, weighted, stats);
  return out;
}

PackedRowsView view_of(const PackedRows& rows) {
  return PackedRowsView{rows.sequence_length,     rows.input_ids,         rows.labels,
                        rows.position_ids,        rows.loss_weights,      rows.row_segment_offsets,
                        rows.segment_lengths,     rows.mrope_positions,   rows.row_image_offsets,
                        rows.image_sizes,         rows.image_pixel_offsets, rows.image_pixels};
}

PackedRowsView first_rows(const PackedRowsView& rows, size_t count) {
  SUROGATE_CHECK(!rows.vision(), "first_rows of text rows");
  count = std::min(count, rows.rows());
  const size_t tokens = count * rows.sequence_length;
  PackedRowsView first = rows;
  first.input_ids = rows.input_ids.first(tokens);
  first.labels = rows.labels.first(tokens);
  first.position_ids = rows.position_ids.first(tokens);
  if (!rows.loss_weights.empty()) first.loss_weights = rows.loss_weights.first(tokens);
  first.row_segment_offsets = rows.row_segment_offsets.first(count + 1);
  first.segment_lengths = rows.segment_lengths.first(rows.row_segment_offsets[count]);
  return first;
}

int64_t most_segments_per_row(const PackedRowsView& rows) {
  uint64_t most = 0;
  for (size_t row = 0; row < rows.rows(); ++row) {
    most = std::max(most, rows.row_segment_offsets[row + 1] - rows.row_segment_offsets[row]);
  }
  return static_cast<int64_t>(most);
}

int64_t attention_span(const PackedRowsView& rows) {
  const uint64_t tokens = rows.rows() * rows.sequence_length;
  if (tokens == 0) return 0;
  double squares = 0.0;  // up to rows · T² (10⁵ rows of 10⁵ tokens: 10¹⁵), exact in a double
  for (int32_t length : rows.segment_lengths) {
    if (length > 0) squares += static_cast<double>(length) * static_cast<double>(length);
  }
  return static_cast<int64_t>(std::llround(squares / static_cast<double>(tokens)));
}

PackedBatch make_batch(const PackedRowsView& rows, std::span<const uint64_t> row_indices, int32_t pad_id) {
  const size_t T = rows.sequence_length;
  PackedBatch batch;
  batch.batch_size = static_cast<int64_t>(row_indices.size());
  batch.sequence_length = static_cast<int64_t>(T);
  batch.input_ids.reserve(row_indices.size() * T);
  batch.labels.reserve(row_indices.size() * T);
  batch.position_ids.reserve(row_indices.size() * T);
  batch.document_ids.reserve(row_indices.size() * T);
  batch.cu_seqlens.push_back(0);
  int32_t offset = 0;
  int32_t document = 0;
  for (uint64_t row : row_indices) {
    SUROGATE_CHECK(row <= rows.rows(), "row {} of {}", row, rows.rows());
    batch.rows.push_back(row);
    if (row == rows.rows()) {  // a padding-only row
      batch.input_ids.insert(batch.input_ids.end(), T, pad_id);
      batch.labels.insert(batch.labels.end(), T, kIgnoreLabel);
      batch.position_ids.insert(batch.position_ids.end(), T, 0);
      batch.document_ids.insert(batch.document_ids.end(), T, -1);
      if (!rows.loss_weights.empty()) batch.loss_weights.insert(batch.loss_weights.end(), T, 0.0f);
      offset += static_cast<int32_t>(T);
      batch.cu_seqlens.push_back(offset);
      batch.max_seqlen = std::max(batch.max_seqlen, static_cast<int32_t>(T));
      continue;
    }
    auto begin = static_cast<long>(row * T);
    batch.input_ids.insert(batch.input_ids.end(), rows.input_ids.begin() + begin, rows.input_ids.begin() + begin + static_cast<long>(T));
    batch.labels.insert(batch.labels.end(), rows.labels.begin() + begin, rows.labels.begin() + begin + static_cast<long>(T));
    batch.position_ids.insert(batch.position_ids.end(), rows.position_ids.begin() + begin,
                              rows.position_ids.begin() + begin + static_cast<long>(T));
    if (!rows.loss_weights.empty()) {
      batch.loss_weights.insert(batch.loss_weights.end(), rows.loss_weights.begin() + begin,
                                rows.loss_weights.begin() + begin + static_cast<long>(T));
    }
    for (uint64_t s = rows.row_segment_offsets[row]; s < rows.row_segment_offsets[row + 1]; ++s) {
      int32_t length = rows.segment_lengths[s];
      bool padding = length < 0;
      int32_t size = padding ? -length : length;
      batch.document_ids.insert(batch.document_ids.end(), static_cast<size_t>(size), padding ? -1 : document);
      if (!padding) {
        ++document;
        batch.num_tokens += size;
      }
      offset += size;
      batch.cu_seqlens.push_back(offset);
      batch.max_seqlen = std::max(batch.max_seqlen, size);
    }
  }
  if (rows.vision()) add_batch_images(rows, row_indices, batch);
  for (int32_t label : batch.labels) batch.num_loss_tokens += label != kIgnoreLabel ? 1 : 0;
  batch.loss_weight_sum = static_cast<double>(batch.num_loss_tokens);
  if (!batch.loss_weights.empty()) {
    batch.loss_weight_sum = 0.0;
    for (size_t i = 0; i < batch.labels.size(); ++i) {
      if (batch.labels[i] != kIgnoreLabel) batch.loss_weight_sum += batch.loss_weights[i];
    }
  }
  return batch;
}

}  // namespace surogate::data
