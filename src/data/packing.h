// Documents → fixed-length rows of T tokens, and the PackedBatch the trainer consumes.
//
// Three layouts, chosen from the config:
//   sample_packing: true   best-fit packing: documents (already ≤ T) are placed, longest first,
//                          into the row with the least room that still fits them; rows are then
//                          nearly full.
//   padding_free: true     (without sample_packing) documents are concatenated in their shuffled
//                          order; a document that does not fit starts the next row. No reordering,
//                          padding only at row ends.
//   both false             one document per row, padded to T.
// Padding sits at the end of a row (padding_side: right) or its start (left); pad tokens have
// label -100 and position 0. Every row is a list of segments (documents and padding runs) whose
// lengths add up to T; position_ids restart at 0 for each document, so with cu_seqlens (varlen
// attention) or document_ids (masking) attention never crosses a document.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "data/sample.h"

namespace surogate::data {

enum class PackingMode { OnePerRow, Sequential, BestFit };

struct PackingOptions {
  size_t sequence_length = 0;  // T
  PackingMode mode = PackingMode::BestFit;
  bool pad_left = false;
  int32_t pad_id = 0;
  uint64_t seed = 0;  // document order before packing
  // OnePerRow without the shuffle: row i is document i (KTO's rows stay in the chunks their KL
  // completions were built in, data/kto_rows.h).
  bool keep_order = false;
  // Vision-language rows (PackedRows' image fields): set for every split of a VL model's data, so
  // that text-only documents get M-RoPE positions too (equal on the three axes).
  bool vision = false;
};

// A packed split: rows × T tokens plus each row's segments.
struct PackedRows {
  size_t sequence_length = 0;
  std::vector<int32_t> input_ids;     // rows × T
  std::vector<int32_t> labels;        // rows × T, unshifted (sample.h)
  std::vector<int32_t> position_ids;  // rows × T
  // rows × T loss weights when some document has weights (sample.h), else empty; 0 wherever the
  // label is -100, 1 on the labelled tokens of documents without weights.
  std::vector<float> loss_weights;
  std::vector<uint64_t> row_segment_offsets{0};  // rows + 1 offsets into segment_lengths
  std::vector<int32_t> segment_lengths;          // > 0: a document, < 0: a padding run of -length
  // Vision-language rows (PackingOptions::vision; all empty otherwise). A row keeps the images of
  // its documents, in the order of their tokens, and each document's M-RoPE positions as computed
  // for it alone; padding gets position 0 on every axis.
  std::vector<int32_t> mrope_positions;     // rows × 3 × T: row r's axis a at [(r·3 + a)·T, +T)
  std::vector<uint64_t> row_image_offsets;  // rows + 1 offsets into the images
  std::vector<int32_t> image_sizes;         // images × 2: width, height (the processor's target size)
  std::vector<uint64_t> image_pixel_offsets;  // images + 1 offsets into image_pixels
  std::vector<uint8_t> image_pixels;        // each image's height × width × 3 RGB bytes
  size_t rows() const { return row_segment_offsets.size() - 1; }
};

struct PackingStats {
  uint64_t documents = 0;
  uint64_t rows = 0;
  uint64_t tokens = 0;       // non-padding
  uint64_t loss_tokens = 0;  // labels != -100
  uint64_t slots = 0;        // rows × T
  double efficiency() const { return slots == 0 ? 0.0 : static_cast<double>(tokens) / static_cast<double>(slots); }
};

// Read-only view of packed rows, from memory or from a memory-mapped token cache.
struct PackedRowsView {
  size_t sequence_length = 0;
  std::span<const int32_t> input_ids;
  std::span<const int32_t> labels;
  std::span<const int32_t> position_ids;
  std::span<const float> loss_weights;  // empty when unweighted
  std::span<const uint64_t> row_segment_offsets;
  std::span<const int32_t> segment_lengths;
  // Vision-language rows (PackedRows' fields of the same names); empty for text.
  std::span<const int32_t> mrope_positions;
  std::span<const uint64_t> row_image_offsets;
  std::span<const int32_t> image_sizes;
  std::span<const uint64_t> image_pixel_offsets;
  std::span<const uint8_t> image_pixels;
  bool vision() const { return !row_image_offsets.empty(); }
  size_t rows() const { return row_segment_offsets.empty() ? 0 : row_segment_offsets.size() - 1; }
};
PackedRowsView view_of(const PackedRows& rows);
// The first min(count, rows()) rows of `rows` (text rows only: a vision view's images are not cut).
PackedRowsView first_rows(const PackedRowsView& rows, size_t count);

// The most segments (documents and padding runs) any row of `rows` has; 0 without rows. A batch of
// B rows then has at most B times this many, which is what attention layouts that must be sized
// before the batches are seen (cuDNN's packed documents) take.
int64_t most_segments_per_row(const PackedRowsView& rows);

// Σ ℓ² over the documents of `rows` (ℓ: a document's tokens) divided by all their tokens, padding
// included: what causal attention's work per token scales with (its forward is 2 · ℓ² · heads ·
// head_dim FLOPs a document), so a row that is one document gives the row's length and rows of
// short packed documents far less. 0 without rows. The recompute choice weighs re-running
// attention by it (compiler/recompute_choice.h).
int64_t attention_span(const PackedRowsView& rows);

// Every document must have 1..T tokens (fit_to_length guarantees it).
PackedRows pack_documents(std::vector<TokenizedSample> documents, const PackingOptions& options, PackingStats& stats);

// Prompt sharing's tables (data/prompt_sharing.h) of a batch in the shared layout [B, T]: how its
// tokens map to and from the rows as packed, [B, E] (E = expanded_length), where attention runs.
// Indices are flat over the whole batch (b·T + i, b·E + j); −1 is none.
struct SharedPromptLayout {
  int64_t expanded_length = 0;                 // E
  std::vector<int32_t> expanded_document_ids;  // [B*E] the packed rows' document ids
  std::vector<int32_t> expand_index;           // [B*E] the shared token each packed token copies
  std::vector<int32_t> expand_sources;         // [B*T*2] the packed tokens that copy each shared token
  std::vector<int32_t> take_index;             // [B*T] the packed token whose attention output a shared token takes
  std::vector<int32_t> take_sources;           // [B*E] the shared token that takes a packed token's output
};

// A micro-batch of B rows of T tokens, flattened row-major.
struct PackedBatch {
  int64_t batch_size = 0;       // B
  int64_t sequence_length = 0;  // T
  std::vector<int32_t> input_ids;     // [B*T]
  std::vector<int32_t> labels;        // [B*T] unshifted; the loss scores logits[i] against labels[i+1] within a row
  std::vector<int32_t> position_ids;  // [B*T], restart at 0 per document
  std::vector<int32_t> document_ids;  // [B*T], index of the token's document in the batch, -1 for padding
  // Offsets into the flattened B*T tokens of every segment (documents and padding runs), from 0 to
  // B*T; no segment crosses a row. Feed to varlen attention as cu_seqlens.
  std::vector<int32_t> cu_seqlens;
  int32_t max_seqlen = 0;        // longest segment
  int64_t num_tokens = 0;        // non-padding tokens
  int64_t num_loss_tokens = 0;   // labels != -100
  // [B*T], unshifted like labels, only when the rows are weighted (loss_scale hermes / react);
  // empty otherwise, and then every labelled token weighs 1.
  std::vector<float> loss_weights;
  double loss_weight_sum = 0.0;  // Σ weights of labelled tokens (= num_loss_tokens unweighted): the loss normaliser
  // The packed rows it holds, in order (rows.rows() for a padding-only row): what per-row data kept
  // beside the cache (a preference run's reference log-probabilities) is looked up by.
  std::vector<uint64_t> rows;
  // Vision-language batches (empty for text): the M-RoPE positions [3, B, T] (axis-major) and the
  // rows' images in order (each at the processor's target size: ImageProcessor::patches gives
  // pixel_values and grid_thw).
  std::vector<int32_t> mrope_position_ids;
  std::vector<vision::RgbImage> images;
  // A preference batch in the shared layout (data/prompt_sharing.h); expanded_length 0 otherwise.
  SharedPromptLayout shared_prompts;
};

// Assembles the rows `row_indices` into a batch; an index equal to rows.rows() stands for a row
// of padding only (used to fill the last batch of an epoch).
PackedBatch make_batch(const PackedRowsView& rows, std::span<const uint64_t> row_indices, int32_t pad_id);

}  // namespace surogate::data
