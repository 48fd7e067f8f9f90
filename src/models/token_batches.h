// Pre-tokenized evaluation data → fixed-shape [B, T] batches for a model graph.
// Input: JSONL, one object per line with "input_ids" (ints) and optionally "labels" (same
// length, -100 = not scored), or a row the data pipeline formats (see RowTokenizer). Labels default to input_ids. They are shifted once, here:
// targets[i] = labels[i + 1], and the last token of a sequence gets -100, so the graph's loss
// op (which never shifts) scores next-token predictions within each sequence only.
// Sequences are packed first-fit in file order into rows of T tokens; each keeps its own
// position ids (restarting at 0) and document id, so attention never crosses sequences and the
// packed loss equals the loss of every sequence run alone. Unused slots are padding: token 0,
// position 0, target -100, a document of their own.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace surogate::models {

struct TokenSequence {
  std::vector<int32_t> input_ids;
  std::vector<int32_t> labels;  // same length; -100 where not scored
  int64_t line = 0;             // read_token_jsonl's: the row's 1-based line in the file
};

// Tokenizes a row that has no "input_ids" (a text, instruction or conversation row): the caller
// plugs in the data pipeline's formatter, so this module needs no tokenizer. `line` is 1-based.
// Returns labels aligned with input_ids (-100 = not scored), like a pre-tokenized row.
using RowTokenizer =
    std::function<TokenSequence(const nlohmann::json& row, const std::filesystem::path& path, int64_t line)>;

// Reads a JSONL file. Rows without "input_ids" go through `tokenize_row`; without one they are
// an error naming the line. Errors name the file and line: invalid JSON, ids outside
// [0, vocab_size) (also for ids the tokenizer produced), labels of another length, empty
// sequences.
std::vector<TokenSequence> read_token_jsonl(const std::filesystem::path& path, int64_t vocab_size,
                                            const RowTokenizer& tokenize_row = {});

struct TokenBatch {
  int64_t batch = 0;
  int64_t sequence = 0;
  std::vector<int32_t> input_ids;     // [B, T]
  std::vector<int32_t> position_ids;  // [B, T]
  std::vector<int32_t> document_ids;  // [B, T], contiguous runs per row
  std::vector<int32_t> targets;       // [B, T], already shifted
  int64_t scored_tokens() const;      // targets != -100
};

// Packs sequences into batches of `batch` rows of `sequence` tokens. A sequence longer than
// `sequence` is a UserError naming `source` and the sequence's index (raise --seq-len).
std::vector<TokenBatch> pack_token_batches(const std::vector<TokenSequence>& sequences, int64_t batch,
                                           int64_t sequence, const std::string& source);

}  // namespace surogate::models
