// See dataset_formatter.h.
#include "data/dataset_formatter.h"

#include <memory>
#include <utility>

#include "data/format_workers.h"

namespace surogate::data {
namespace {

bool image_rows(const DatasetConfig& dataset, const DataSettings& settings) {
  return settings.vision && (dataset.type == DatasetType::Conversation || dataset.type == DatasetType::Auto);
}

}  // namespace

DatasetFormatter::DatasetFormatter(const DatasetConfig& dataset, const DataSettings& settings, const TextTools& tools)
    : text_(dataset, settings.format, tools.codec, tools.renderer) {
  if (!image_rows(dataset, settings)) return;
  ImageRowOptions options;
  options.image_pad_id = tools.image_pad_id.value_or(-1);
  options.norm_bbox = settings.vision->norm_bbox;
  images_.emplace(dataset, settings.format, tools.codec, tools.renderer, vision::ImageProcessor(settings.vision->processor),
                  options);
}

FormattedRow DatasetFormatter::format(const Row& row) {
  if (!images_) return text_.format(row);
  FormattedRow formatted;
  std::optional<ImageSample> sample = images_->format(row, &formatted.drop_reason);
  if (!sample) return formatted;
  formatted.text = std::move(sample->text);
  formatted.tokenization_differs = sample->tokenization_differs;
  formatted.sample = std::move(sample->sample);
  if (!sample->resized.empty()) {
    formatted.sample->images =
        std::make_shared<const SampleImages>(SampleImages{std::move(sample->resized), std::move(sample->position_ids)});
  }
  return formatted;
}

std::vector<FormattedRow> DatasetFormatter::format_rows(const std::vector<Row>& rows, size_t workers) {
  if (!images_) return data::format_rows(text_, rows, workers);
  std::vector<FormattedRow> out;
  out.reserve(rows.size());
  for (const Row& row : rows) out.push_back(format(row));
  return out;
}

const std::string& DatasetFormatter::resolved_type() const {
  return images_ ? images_->resolved_type() : text_.resolved_type();
}

}  // namespace surogate::data
