#include "data/image_rows.h"

#include "core/error.h"
#include "data/grounding.h"
#include "vision/decode_image.h"
#include "vision/image_source.h"
#include "vision/image_tokens.h"
#include "vision/mrope_positions.h"

namespace surogate::data {
namespace {

constexpr std::string_view kPlaceholder = "<image>";

RowImage column_image(const RowValue& entry, const std::filesystem::path& base_dir, const std::string& field) {
  if (entry.is_string()) {
    return {vision::load_image_reference(entry.get_ref<const std::string&>(), base_dir, field),
            vision::AlphaHandling::drop};
  }
  if (entry.is_object() && (entry.contains("bytes") || entry.contains("path"))) {
    std::optional<std::vector<uint8_t>> bytes;
    std::optional<std::string> path;
    if (auto found = entry.find("bytes"); found != entry.end() && found->is_string()) {
      const auto& raw = found->get_ref<const std::string&>();
      bytes.emplace(raw.begin(), raw.end());
    }
    if (auto found = entry.find("path"); found != entry.end() && found->is_string()) path = found->get<std::string>();
    return {vision::load_image_struct(bytes, path, base_dir, field), vision::AlphaHandling::composite_on_white};
  }
  fail_user("{}: an image must be a path, a data: URI or an image struct {{\"bytes\", \"path\"}}, not a {}", field,
            entry.type_name());
}

std::vector<RowImage> column_images(const Row& row, const ImageRowOptions& options) {
  std::vector<RowImage> images;
  auto found = row.value.find(options.images_field);
  if (found == row.value.end() || found->is_null()) return images;
  const std::string where = row.origin.describe() + ": " + options.images_field;
  if (!found->is_array()) {
    images.push_back(column_image(*found, options.base_dir, where));
    return images;
  }
  for (size_t i = 0; i < found->size(); ++i) {
    images.push_back(column_image((*found)[i], options.base_dir, fmt::format("{}[{}]", where, i)));
  }
  return images;
}

// Hands out the images column in order to the placeholders that take one.
struct ColumnCursor {
  const std::vector<RowImage>& column;
  const std::string& field;
  const RowOrigin& origin;
  size_t next = 0;

  RowImage take() {
    if (next >= column.size()) {
      fail_user("{}: the messages have more image placeholders than the {} image{} of '{}'", origin.describe(),
                column.size(), column.size() == 1 ? "" : "s", field);
    }
    return column[next++];
  }
};

RowValue image_part() { return RowValue{{"type", "image"}}; }

// "a <image> b" → [text "a ", image, text " b"].
RowValue split_placeholders(const std::string& text, ColumnCursor& cursor, std::vector<RowImage>& images) {
  RowValue parts = RowValue::array();
  size_t begin = 0;
  while (true) {
    size_t at = text.find(kPlaceholder, begin);
    std::string piece = text.substr(begin, at == std::string::npos ? std::string::npos : at - begin);
    if (!piece.empty()) parts.push_back(RowValue{{"type", "text"}, {"text", piece}});
    if (at == std::string::npos) break;
    parts.push_back(image_part());
    images.push_back(cursor.take());
    begin = at + kPlaceholder.size();
  }
  return parts;
}

RowValue rewrite_parts(const RowValue& parts, const std::string& where, const ImageRowOptions& options,
                       ColumnCursor& cursor, std::vector<RowImage>& images) {
  RowValue out = RowValue::array();
  for (size_t j = 0; j < parts.size(); ++j) {
    const RowValue& part = parts[j];
    const std::string part_name = fmt::format("{}[{}]", where, j);
    auto type = part.is_object() ? part.find("type") : part.end();
    if (!part.is_object() || type == part.end() || !type->is_string()) {
      fail_user("{}: a content part must be an object with a \"type\" (\"text\" or \"image\")", part_name);
    }
    if (*type == "text") {
      auto text = part.find("text");
      if (text == part.end() || !text->is_string()) fail_user("{}: a text part needs a string \"text\"", part_name);
      out.push_back(RowValue{{"type", "text"}, {"text", *text}});
    } else if (*type == "image") {
      auto image = part.find("image");
      if (image == part.end() || image->is_null()) {
        images.push_back(cursor.take());
      } else if (image->is_string()) {
        images.push_back({vision::load_image_reference(image->get_ref<const std::string&>(), options.base_dir,
                                                       part_name + ".image"),
                          vision::AlphaHandling::drop});
      } else {
        images.push_back(column_image(*image, options.base_dir, part_name + ".image"));
      }
      out.push_back(image_part());
    } else {
      fail_user("{}: content part type '{}' is not supported (\"text\" or \"image\"; videos are not)", part_name,
                type->get<std::string>());
    }
  }
  return out;
}

}  // namespace

std::string message_content_key(const RowValue& first, const DatasetConfig& dataset) {
  auto mapped = dataset.message_property_mappings.find("content");
  std::string key = mapped != dataset.message_property_mappings.end() ? mapped->second : "content";
  if (key == "content" && first.is_object() && !first.contains("role") && first.contains("from") &&
      first.contains("value")) {
    key = "value";
  }
  return key;
}

GatheredImages gather_row_images(const Row& row, const DatasetConfig& dataset, const ImageRowOptions& options) {
  GatheredImages gathered{row, {}};
  const std::vector<RowImage> column = column_images(row, options);
  ColumnCursor cursor{column, options.images_field, row.origin};
  auto messages = gathered.row.value.find(dataset.messages_field);
  if (messages != gathered.row.value.end() && messages->is_array() && !messages->empty()) {
    const std::string key = message_content_key(messages->front(), dataset);
    for (size_t i = 0; i < messages->size(); ++i) {
      RowValue& message = (*messages)[i];
      if (!message.is_object()) continue;  // Formatter names the bad message
      auto content = message.find(key);
      if (content == message.end()) continue;
      const std::string where = fmt::format("{}: {}[{}].{}", row.origin.describe(), dataset.messages_field, i, key);
      if (content->is_string() && content->get_ref<const std::string&>().find(kPlaceholder) != std::string::npos) {
        *content = split_placeholders(content->get<std::string>(), cursor, gathered.images);
      } else if (content->is_array()) {
        *content = rewrite_parts(*content, where, options, cursor, gathered.images);
      }
    }
  }
  if (cursor.next != column.size()) {
    fail_user("{}: '{}' has {} image{} but the messages have {} placeholder{} for them (an <image> in the text or an "
              "{{\"type\": \"image\"}} part each)",
              row.origin.describe(), options.images_field, column.size(), column.size() == 1 ? "" : "s", cursor.next,
              cursor.next == 1 ? "" : "s");
  }
  return gathered;
}

namespace {

FormatOptions with_content_parts(FormatOptions format) {
  format.content_parts = true;
  return format;
}

}  // namespace

ImageRowFormatter::ImageRowFormatter(DatasetConfig dataset, FormatOptions format, TextCodec codec,
                                     ChatRenderer renderer, vision::ImageProcessor processor, ImageRowOptions options)
    : dataset_(dataset),
      formatter_(std::move(dataset), with_content_parts(std::move(format)), std::move(codec), std::move(renderer)),
      processor_(std::move(processor)),
      options_(std::move(options)) {}

namespace {

// The row's images decoded (their sizes kept for grounding) and resized by the processor.
struct RowPixels {
  std::vector<GroundingImage> sizes;
  std::vector<vision::RgbImage> resized;
};

RowPixels decode_and_resize(const std::vector<RowImage>& images, const vision::ImageProcessor& processor,
                            const std::string& where) {
  RowPixels out;
  for (const RowImage& image : images) {
    vision::DecodeOptions decode;
    decode.alpha = image.alpha;
    vision::RgbImage pixels;
    try {
      pixels = vision::decode_image(image.bytes, decode);
    } catch (const UserError& error) {
      fail_user("{}: {}", where, error.what());
    }
    try {
      out.resized.push_back(processor.resize(pixels, image.bytes.name));
    } catch (const UserError& error) {
      fail_user("{}: {}", where, error.what());
    }
    out.sizes.push_back({pixels.width, pixels.height, out.resized.back().width, out.resized.back().height});
  }
  return out;
}

}  // namespace

std::optional<ImageSample> ImageRowFormatter::format(const Row& row, std::string* drop_reason) {
  ImageRowOptions options = options_;
  if (options.base_dir.empty()) options.base_dir = std::filesystem::path(row.origin.file).parent_path();
  GatheredImages gathered = gather_row_images(row, dataset_, options);
  const std::string where = row.origin.describe();
  // A grounding row's text depends on its images' sizes: they are decoded before it is formatted
  // (any other row's after, so that a dropped row decodes nothing).
  std::optional<RowPixels> pixels;
  if (has_grounding_objects(gathered.row.value, options.objects_field)) {
    pixels = decode_and_resize(gathered.images, processor_, where);
    auto messages = gathered.row.value.find(dataset_.messages_field);
    const std::string key = messages != gathered.row.value.end() && messages->is_array() && !messages->empty()
                                ? message_content_key(messages->front(), dataset_)
                                : "content";
    render_grounding(gathered.row.value, options.objects_field, dataset_.messages_field, key, pixels->sizes,
                     options.norm_bbox, where);
  }
  FormattedRow formatted = formatter_.format(gathered.row);
  if (!formatted.sample) {
    if (drop_reason) *drop_reason = formatted.drop_reason;
    return std::nullopt;
  }
  if (!pixels) pixels = decode_and_resize(gathered.images, processor_, where);
  ImageSample result;
  result.resized = std::move(pixels->resized);
  try {
    result.images = processor_.patches(result.resized);
  } catch (const UserError& error) {
    fail_user("{}: {}", where, error.what());
  }

  const TokenizedSample& text_sample = *formatted.sample;
  const std::vector<size_t> source = vision::image_pad_expansion(text_sample.input_ids, options_.image_pad_id,
                                                                  result.images.tokens_per_image, where);
  TokenizedSample& sample = result.sample;
  sample.origin = text_sample.origin;
  for (size_t from : source) {
    const bool image_token = text_sample.input_ids[from] == options_.image_pad_id;
    sample.input_ids.push_back(text_sample.input_ids[from]);
    sample.labels.push_back(image_token ? kIgnoreLabel : text_sample.labels[from]);
    if (!text_sample.weights.empty()) sample.weights.push_back(image_token ? 0.0f : text_sample.weights[from]);
  }
  result.position_ids = vision::mrope_positions(sample.input_ids, options_.image_pad_id, result.images.grid_thw,
                                                processor_.config().merge_size, {}, where)
                            .ids;
  result.text = std::move(formatted.text);
  result.tokenization_differs = formatted.tokenization_differs;
  return result;
}

}  // namespace surogate::data
