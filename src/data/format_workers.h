// dataloader_num_workers: formatting and tokenizing rows on several threads, with a result that
// does not depend on how many.
//
// Rows are read in order by one reader; a batch of them is formatted (rendered, tokenized, loss
// masked) by `workers` threads, each with its own copy of the dataset's Formatter; the results come
// back in row order, and everything that depends on order (length fitting, counts, the
// validation split, packing) stays on the calling thread. So the token cache is byte-identical for
// every number of workers. A row that fails (a UserError naming the file and line) is reported as
// the first failing row in order, as with one thread. The Formatter given must have resolved its
// type (auto datasets: after its first row), so every copy formats alike.
#pragma once

#include <cstddef>
#include <vector>

#include "data/formatter.h"
#include "data/row_reader.h"

namespace surogate::data {

// The workers for `dataloader_num_workers`: unset ⇒ the machine's hardware threads (at most 16);
// 0 ⇒ none besides the calling thread (1).
size_t format_worker_count(const std::optional<int64_t>& dataloader_num_workers);

// Formats `rows` with copies of `formatter` on `workers` threads; result i belongs to rows[i].
std::vector<FormattedRow> format_rows(const Formatter& formatter, const std::vector<Row>& rows, size_t workers);

}  // namespace surogate::data
