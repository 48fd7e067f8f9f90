// Reading pre-tokenized JSONL and packing it into [B, T] batches (see token_batches.h).
#include "models/token_batches.h"

#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace surogate::models {
namespace {

constexpr int32_t kIgnore = -100;

void check_id(int64_t id, size_t index, const char* key, const std::string& where, int64_t vocab_size,
              bool allow_ignore) {
  const bool ignored = allow_ignore && id == kIgnore;
  if (!ignored && (id < 0 || id >= vocab_size)) {
    fail_user("{}: \"{}\"[{}] = {} is outside the model's vocabulary [0, {}){}.", where, key, index, id, vocab_size,
              allow_ignore ? " (use -100 to leave a label unscored)" : "");
  }
}

void check_ids(const std::vector<int32_t>& ids, const char* key, const std::string& where, int64_t vocab_size,
               bool allow_ignore) {
  for (size_t i = 0; i < ids.size(); ++i) check_id(ids[i], i, key, where, vocab_size, allow_ignore);
}

std::vector<int32_t> read_ints(const nlohmann::json& array, const char* key, const std::string& where,
                               int64_t vocab_size, bool allow_ignore) {
  if (!array.is_array()) fail_user("{}: \"{}\" must be a list of integers.", where, key);
  std::vector<int32_t> out;
  out.reserve(array.size());
  for (size_t i = 0; i < array.size(); ++i) {
    const nlohmann::json& value = array[i];
    if (!value.is_number_integer()) fail_user("{}: \"{}\"[{}] is not an integer.", where, key, i);
    const int64_t id = value.get<int64_t>();
    check_id(id, i, key, where, vocab_size, allow_ignore);
    out.push_back(static_cast<int32_t>(id));
  }
  return out;
}

}  // namespace

int64_t TokenBatch::scored_tokens() const {
  int64_t count = 0;
  for (int32_t target : targets) count += target != kIgnore;
  return count;
}

std::vector<TokenSequence> read_token_jsonl(const std::filesystem::path& path, int64_t vocab_size,
                                            const RowTokenizer& tokenize_row) {
  if (std::filesystem::is_directory(path)) fail_user("{}: is a folder; --data takes one JSONL file.", path.string());
  std::ifstream file(path);
  if (!file) fail_user("{}: cannot open the data file; check the --data path.", path.string());
  std::vector<TokenSequence> sequences;
  std::string line;
  for (int64_t number = 1; std::getline(file, line); ++number) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = path.string() + ":" + std::to_string(number);
    nlohmann::json row = nlohmann::json::parse(line, nullptr, false);
    if (row.is_discarded() || !row.is_object()) fail_user("{}: not a JSON object.", where);
    TokenSequence sequence;
    if (!row.contains("input_ids")) {
      if (!tokenize_row) {
        fail_user("{}: no \"input_ids\". This reader takes pre-tokenized rows {{\"input_ids\": [...], "
                  "\"labels\": [...]}} only.", where);
      }
      sequence = tokenize_row(row, path, number);
      check_ids(sequence.input_ids, "input_ids (as tokenized)", where, vocab_size, false);
      check_ids(sequence.labels, "labels (as tokenized)", where, vocab_size, true);
      SUROGATE_CHECK(sequence.labels.size() == sequence.input_ids.size(), "{}: tokenized labels misaligned", where);
    } else {
      sequence.input_ids = read_ints(row["input_ids"], "input_ids", where, vocab_size, false);
      if (row.contains("labels")) {
        sequence.labels = read_ints(row["labels"], "labels", where, vocab_size, true);
        if (sequence.labels.size() != sequence.input_ids.size()) {
          fail_user("{}: \"labels\" has {} entries but \"input_ids\" has {}; they must match.", where,
                    sequence.labels.size(), sequence.input_ids.size());
        }
      } else {
        sequence.labels = sequence.input_ids;
      }
    }
    if (sequence.input_ids.empty()) fail_user("{}: the row has no tokens.", where);
    sequence.line = number;
    sequences.push_back(std::move(sequence));
  }
  if (sequences.empty()) fail_user("{}: the data file holds no rows.", path.string());
  return sequences;
}

std::vector<TokenBatch> pack_token_batches(const std::vector<TokenSequence>& sequences, int64_t batch,
                                           int64_t sequence, const std::string& source) {
  SUROGATE_CHECK(batch > 0 && sequence > 0, "batch {} and sequence {} must be positive", batch, sequence);
  // Rows as lists of sequence indices, first-fit in file order.
  std::vector<std::vector<size_t>> rows;
  std::vector<int64_t> used;
  for (size_t index = 0; index < sequences.size(); ++index) {
    const int64_t length = static_cast<int64_t>(sequences[index].input_ids.size());
    if (length > sequence) {
      fail_user("{}: row {} has {} tokens, more than the sequence length {}; raise --seq-len.", source,
                index + 1, length, sequence);
    }
    size_t row = 0;
    while (row < rows.size() && used[row] + length > sequence) ++row;
    if (row == rows.size()) {
      rows.emplace_back();
      used.push_back(0);
    }
    rows[row].push_back(index);
    used[row] += length;
  }
  std::vector<TokenBatch> batches;
  const size_t cells = static_cast<size_t>(batch * sequence);
  for (size_t first = 0; first < rows.size(); first += static_cast<size_t>(batch)) {
    TokenBatch out;
    out.batch = batch;
    out.sequence = sequence;
    out.input_ids.assign(cells, 0);
    out.position_ids.assign(cells, 0);
    out.document_ids.assign(cells, 0);
    out.targets.assign(cells, kIgnore);
    for (int64_t r = 0; r < batch && first + r < rows.size(); ++r) {
      int64_t column = 0;
      int32_t document = 0;
      for (size_t index : rows[first + r]) {
        const TokenSequence& source_sequence = sequences[index];
        const int64_t length = static_cast<int64_t>(source_sequence.input_ids.size());
        for (int64_t t = 0; t < length; ++t) {
          const size_t cell = static_cast<size_t>(r * sequence + column + t);
          out.input_ids[cell] = source_sequence.input_ids[t];
          out.position_ids[cell] = static_cast<int32_t>(t);
          out.document_ids[cell] = document;
          out.targets[cell] = t + 1 < length ? source_sequence.labels[t + 1] : kIgnore;
        }
        column += length;
        ++document;
      }
      for (; column < sequence; ++column) out.document_ids[r * sequence + column] = document;
    }
    batches.push_back(std::move(out));
  }
  return batches;
}

}  // namespace surogate::models
