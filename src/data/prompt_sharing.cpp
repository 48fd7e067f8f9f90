// Preference rows in the shared layout; see prompt_sharing.h.
#include "data/prompt_sharing.h"

#include <algorithm>
#include <span>

#include "core/error.h"
#include "data/sample.h"

namespace surogate::data {
namespace {

// A document of a row: its first token and length (tokens of the row).
struct DocumentRun {
  int64_t start = 0, length = 0;
};

// L, the tokens the two documents share as prefix: c − 1 where c counts their common leading tokens
// that carry no loss (the prompt, when the tokenizer left it whole), so that the last of them, whose
// logits predict each completion's first token, stays in both.
int64_t shared_prefix(std::span<const int32_t> ids, std::span<const int32_t> labels, DocumentRun a, DocumentRun b) {
  int64_t common = 0;
  const int64_t most = std::min(a.length, b.length);
  while (common < most) {
    const auto i = static_cast<size_t>(a.start + common), j = static_cast<size_t>(b.start + common);
    if (ids[i] != ids[j] || labels[i] != kIgnoreLabel || labels[j] != kIgnoreLabel) break;
    ++common;
  }
  return std::max<int64_t>(0, common - 1);
}

// The prefix length a row of these documents shares: L for two documents, 0 otherwise.
int64_t row_prefix(std::span<const int32_t> ids, std::span<const int32_t> labels, const std::vector<DocumentRun>& runs) {
  return runs.size() == 2 ? shared_prefix(ids, labels, runs[0], runs[1]) : 0;
}

int64_t shared_tokens(const std::vector<DocumentRun>& runs, int64_t prefix) {
  int64_t tokens = -prefix;
  for (const DocumentRun& run : runs) tokens += run.length;
  return tokens;
}

// The documents of row `row` of a batch: its segments (cu_seqlens; none crosses a row) that are
// not padding.
std::vector<DocumentRun> batch_runs(const PackedBatch& batch, int64_t row) {
  std::vector<DocumentRun> runs;
  const int64_t T = batch.sequence_length;
  for (size_t s = 0; s + 1 < batch.cu_seqlens.size(); ++s) {
    const int64_t start = batch.cu_seqlens[s], end = batch.cu_seqlens[s + 1];
    if (start < row * T || start >= (row + 1) * T || batch.document_ids[static_cast<size_t>(start)] < 0) continue;
    runs.push_back({start, end - start});
  }
  return runs;
}

}  // namespace

int64_t longest_shared_row(const PackedRowsView& rows) {
  int64_t longest = 0;
  const auto T = static_cast<int64_t>(rows.sequence_length);
  for (size_t row = 0; row < rows.rows(); ++row) {
    std::vector<DocumentRun> runs;
    int64_t at = static_cast<int64_t>(row) * T;
    for (uint64_t s = rows.row_segment_offsets[row]; s < rows.row_segment_offsets[row + 1]; ++s) {
      const int32_t length = rows.segment_lengths[s];
      if (length > 0) runs.push_back({at, length});
      at += length > 0 ? length : -static_cast<int64_t>(length);
    }
    longest = std::max(longest, shared_tokens(runs, row_prefix(rows.input_ids, rows.labels, runs)));
  }
  return longest;
}

PackedBatch share_prompts(const PackedBatch& expanded, int64_t shared_length, int32_t pad_id) {
  SUROGATE_CHECK(expanded.mrope_position_ids.empty() && expanded.images.empty(),
                 "prompt sharing of text rows only");
  const int64_t B = expanded.batch_size, E = expanded.sequence_length, T = shared_length;
  const bool weighted = !expanded.loss_weights.empty();

  PackedBatch shared;
  shared.batch_size = B;
  shared.sequence_length = T;
  const auto tokens = static_cast<size_t>(B * T);
  shared.input_ids.assign(tokens, pad_id);
  shared.labels.assign(tokens, kIgnoreLabel);
  shared.position_ids.assign(tokens, 0);
  shared.document_ids.assign(tokens, -1);
  if (weighted) shared.loss_weights.assign(tokens, 0.0f);
  shared.num_tokens = expanded.num_tokens;
  shared.num_loss_tokens = expanded.num_loss_tokens;
  shared.loss_weight_sum = expanded.loss_weight_sum;
  shared.rows = expanded.rows;

  SharedPromptLayout& layout = shared.shared_prompts;
  layout.expanded_length = E;
  layout.expanded_document_ids = expanded.document_ids;
  layout.expand_index.assign(static_cast<size_t>(B * E), -1);
  layout.expand_sources.assign(2 * tokens, -1);
  layout.take_index.assign(tokens, -1);
  layout.take_sources.assign(static_cast<size_t>(B * E), -1);

  shared.cu_seqlens.push_back(0);
  for (int64_t row = 0; row < B; ++row) {
    const std::vector<DocumentRun> runs = batch_runs(expanded, row);
    const int64_t prefix = row_prefix(expanded.input_ids, expanded.labels, runs);
    SUROGATE_CHECK(shared_tokens(runs, prefix) <= T, "a shared row of {} tokens fits {}", shared_tokens(runs, prefix), T);
    int64_t next = 0;  // the row's next free shared token
    for (size_t r = 0; r < runs.size(); ++r) {
      const int64_t skip = r == 1 ? prefix : 0;  // the second document's prefix is the first's
      const int64_t first_shared = next - skip;  // the shared token of the run's token i ≥ skip: first_shared + i
      for (int64_t i = 0; i < runs[r].length; ++i) {
        const auto from = static_cast<size_t>(runs[r].start + i);
        const auto to = static_cast<size_t>(row * T + (i < skip ? i : first_shared + i));
        layout.expand_index[from] = static_cast<int32_t>(to);
        layout.expand_sources[2 * to + (i < skip ? 1 : 0)] = static_cast<int32_t>(from);
        if (i < skip) continue;  // the prefix token is the first document's
        layout.take_index[to] = static_cast<int32_t>(from);
        layout.take_sources[from] = static_cast<int32_t>(to);
        shared.input_ids[to] = expanded.input_ids[from];
        shared.labels[to] = expanded.labels[from];
        shared.position_ids[to] = expanded.position_ids[from];
        // prefix + A is one document (the first's id), B another
        shared.document_ids[to] = expanded.document_ids[static_cast<size_t>(runs[r].start)];
        if (weighted) shared.loss_weights[to] = expanded.loss_weights[from];
      }
      next += runs[r].length - skip;
      // Segments: the first document with the prefix, each other one, then the padding.
      shared.cu_seqlens.push_back(static_cast<int32_t>(row * T + next));
      shared.max_seqlen = std::max(shared.max_seqlen, static_cast<int32_t>(runs[r].length - skip));
    }
    if (next < T) {
      shared.cu_seqlens.push_back(static_cast<int32_t>((row + 1) * T));
      shared.max_seqlen = std::max(shared.max_seqlen, static_cast<int32_t>(T - next));
    }
  }
  return shared;
}

}  // namespace surogate::data
