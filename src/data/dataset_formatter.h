// The formatter of one dataset entry as the pipeline runs it: a vision-language model's
// conversation rows (type conversation, or auto) go through ImageRowFormatter (data/image_rows.h:
// images decoded and resized, <|image_pad|> expanded, M-RoPE positions) on the calling thread;
// every other row through the Formatter on the workers (data/format_workers.h).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "data/formatter.h"
#include "data/image_rows.h"
#include "data/pipeline.h"

namespace surogate::data {

class DatasetFormatter {
 public:
  DatasetFormatter(const DatasetConfig& dataset, const DataSettings& settings, const TextTools& tools);
  // One row. A row with images returns its sample with `images` set (sample.h); a text-only row of
  // a vision-language dataset returns none (its M-RoPE positions are its 1-D ones).
  FormattedRow format(const Row& row);
  // Rows in order, result i for rows[i] (format() of each; text rows on `workers` threads).
  std::vector<FormattedRow> format_rows(const std::vector<Row>& rows, size_t workers);
  const std::string& resolved_type() const;

 private:
  Formatter text_;
  std::optional<ImageRowFormatter> images_;
};

}  // namespace surogate::data
