// KTO rows with their KL completions; see kto_rows.h.
#include "data/kto_rows.h"

#include <algorithm>

#include "core/error.h"
#include "data/prompt_completion.h"

namespace surogate::data {
namespace {

// Where a formatted KTO document's completion starts: its first labelled token.
size_t kto_prompt_length(const TokenizedSample& document) {
  const auto first = std::find_if(document.labels.begin(), document.labels.end(),
                                  [](int32_t label) { return label != kIgnoreLabel; });
  SUROGATE_CHECK(first != document.labels.end(), "a kto document has a completion");
  return static_cast<size_t>(first - document.labels.begin());
}

}  // namespace

void add_kl_completions(std::vector<TokenizedSample>& documents, size_t batch, size_t max_length) {
  SUROGATE_CHECK(batch > 0, "a positive batch size");
  for (const TokenizedSample& document : documents) {
    if (document.kto_label < 0) {
      fail_user("{}: this document is not a type: kto row, and kto rows cannot be mixed with other dataset types",
                document.origin.describe());
    }
  }
  std::vector<TokenizedSample> rows;
  rows.reserve(documents.size());
  for (size_t start = 0; start < documents.size(); start += batch) {
    const size_t end = std::min(start + batch, documents.size());
    for (size_t i = start; i < end; ++i) {
      const TokenizedSample& document = documents[i];
      const TokenizedSample& other = documents[i == start ? end - 1 : i - 1];
      const size_t prompt_length = kto_prompt_length(document), other_prompt = kto_prompt_length(other);
      std::vector<int32_t> kl(document.input_ids.begin(), document.input_ids.begin() + static_cast<long>(prompt_length));
      kl.insert(kl.end(), other.input_ids.begin() + static_cast<long>(other_prompt), other.input_ids.end());
      TokenizedSample row;
      row.origin = document.origin;
      row.kto_label = document.kto_label;
      append_prompt_completion(row, document.input_ids, prompt_length, max_length);
      row.first_part = static_cast<int32_t>(row.input_ids.size());
      append_prompt_completion(row, kl, prompt_length, max_length);
      rows.push_back(std::move(row));
    }
  }
  documents = std::move(rows);
}

std::string kto_label_string(const std::vector<TokenizedSample>& documents) {
  std::string labels;
  labels.reserve(documents.size());
  for (const TokenizedSample& document : documents) labels.push_back(document.kto_label > 0 ? '1' : '0');
  return labels;
}

}  // namespace surogate::data
