// See grounding.h.
#include "data/grounding.h"

#include <cmath>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "core/error.h"

namespace surogate::data {
namespace {

constexpr std::string_view kRef = "<ref-object>";
constexpr std::string_view kBox = "<bbox>";

struct Objects {
  std::vector<std::string> refs;
  std::vector<std::vector<double>> boxes;
  bool norm1 = false;               // bbox_type "norm1": coordinates in 0..1
  std::vector<size_t> image_ids;    // one per box
};

Objects read_objects(const RowValue& row, const std::string& field, size_t image_count, const std::string& where) {
  RowValue value = row.at(field);
  if (value.is_string()) {  // ms-swift accepts the column as a JSON string too
    value = RowValue::parse(value.get<std::string>(), nullptr, false);
    if (value.is_discarded()) fail_user("{}: '{}' is a string that is not JSON", where, field);
  }
  if (!value.is_object()) {
    fail_user("{}: '{}' must be an object {{\"ref\": [...], \"bbox\": [[x1, y1, x2, y2], ...]}}, not a {}", where,
              field, value.type_name());
  }
  Objects objects;
  if (auto refs = value.find("ref"); refs != value.end() && !refs->is_null()) {
    if (!refs->is_array()) fail_user("{}: '{}.ref' must be a list of strings", where, field);
    for (size_t i = 0; i < refs->size(); ++i) {
      if (!(*refs)[i].is_string()) {
        fail_user("{}: '{}.ref[{}]' must be a string, not a {}", where, field, i, (*refs)[i].type_name());
      }
      objects.refs.push_back((*refs)[i].get<std::string>());
    }
  }
  if (auto boxes = value.find("bbox"); boxes != value.end() && !boxes->is_null()) {
    if (!boxes->is_array()) fail_user("{}: '{}.bbox' must be a list of boxes", where, field);
    for (size_t i = 0; i < boxes->size(); ++i) {
      const RowValue& box = (*boxes)[i];
      if (!box.is_array() || (box.size() != 2 && box.size() != 4)) {
        fail_user("{}: '{}.bbox[{}]' must be a list of 2 numbers (a point x, y) or 4 (x1, y1, x2, y2), not {}", where,
                  field, i, box.dump());
      }
      std::vector<double> numbers;
      for (size_t j = 0; j < box.size(); ++j) {
        if (!box[j].is_number()) {
          fail_user("{}: '{}.bbox[{}][{}]' must be a number, not {}", where, field, i, j, box[j].dump());
        }
        numbers.push_back(box[j].get<double>());
      }
      if (numbers.size() == 4) {  // corners in order, as ms-swift's preprocessor puts them
        if (numbers[0] > numbers[2]) std::swap(numbers[0], numbers[2]);
        if (numbers[1] > numbers[3]) std::swap(numbers[1], numbers[3]);
      }
      objects.boxes.push_back(std::move(numbers));
    }
  }
  if (auto type = value.find("bbox_type"); type != value.end() && !type->is_null()) {
    if (!type->is_string() || (*type != "real" && *type != "norm1")) {
      fail_user("{}: '{}.bbox_type' must be \"real\" (pixels of the image, the default) or \"norm1\" (0..1), not {}",
                where, field, type->dump());
    }
    objects.norm1 = *type == "norm1";
  }
  objects.image_ids.assign(objects.boxes.size(), 0);
  if (auto ids = value.find("image_id"); ids != value.end() && !ids->is_null()) {
    if (!ids->is_array() || ids->size() > objects.boxes.size()) {
      fail_user("{}: '{}.image_id' must be a list of at most one image index per box ({}), not {}", where, field,
                objects.boxes.size(), ids->dump());
    }
    for (size_t i = 0; i < ids->size(); ++i) {
      const RowValue& id = (*ids)[i];
      if (!id.is_number_unsigned() || id.get<uint64_t>() >= image_count) {
        fail_user("{}: '{}.image_id[{}]' must be the index of one of the row's {} image{}, not {}", where, field, i,
                  image_count, image_count == 1 ? "" : "s", id.dump());
      }
      objects.image_ids[i] = id.get<size_t>();
    }
  }
  if (!objects.boxes.empty() && image_count == 0) {
    fail_user("{}: '{}.bbox' has boxes but the row has no image to scale them to", where, field);
  }
  return objects;
}

// int(round(value / size * target)) in Python's double arithmetic, round half to even.
int64_t normalise(double value, double size, double target, const std::string& where, const std::string& field) {
  const double scaled = std::nearbyint(value / size * target);
  if (!(std::fabs(scaled) < 9.0e18)) fail_user("{}: '{}': a coordinate is out of range ({})", where, field, value);
  return static_cast<int64_t>(scaled);
}

// ms-swift's Template._get_bbox_str: "(x1,y1),(x2,y2)".
std::string box_text(const std::vector<double>& box, const GroundingImage& image, bool norm1, NormBbox norm,
                     const std::string& where, const std::string& field) {
  const double width = norm1 ? 1.0 : static_cast<double>(image.width);
  const double height = norm1 ? 1.0 : static_cast<double>(image.height);
  const double target_width = norm == NormBbox::Norm1000 ? 1000.0 : static_cast<double>(image.resized_width);
  const double target_height = norm == NormBbox::Norm1000 ? 1000.0 : static_cast<double>(image.resized_height);
  std::string text;
  for (size_t i = 0; i + 1 < box.size(); i += 2) {
    text += fmt::format("{}({},{})", i == 0 ? "" : ",", normalise(box[i], width, target_width, where, field),
                        normalise(box[i + 1], height, target_height, where, field));
  }
  return "<|box_start|>" + text + "<|box_end|>";
}

// Hands out the rendered refs and boxes to the placeholders of the messages' text, in order.
struct Renderer {
  const std::vector<std::string>& refs;
  const std::vector<std::string>& boxes;
  size_t ref_placeholders = 0, box_placeholders = 0;

  std::string render(const std::string& text) {
    std::string out;
    size_t begin = 0;
    while (true) {
      const size_t ref = text.find(kRef, begin), box = text.find(kBox, begin);
      const size_t at = std::min(ref, box);
      out.append(text, begin, at == std::string::npos ? std::string::npos : at - begin);
      if (at == std::string::npos) return out;
      if (at == ref) {
        if (ref_placeholders < refs.size()) out += "<|object_ref_start|>" + refs[ref_placeholders] + "<|object_ref_end|>";
        ++ref_placeholders;
        begin = at + kRef.size();
      } else {
        if (box_placeholders < boxes.size()) out += boxes[box_placeholders];
        ++box_placeholders;
        begin = at + kBox.size();
      }
    }
  }
};

}  // namespace

NormBbox default_norm_bbox(std::string_view architecture) {
  return architecture == "Qwen2_5_VLForConditionalGeneration" ? NormBbox::None : NormBbox::Norm1000;
}

bool has_grounding_objects(const RowValue& row, const std::string& field) {
  auto found = row.find(field);
  return found != row.end() && !found->is_null();
}

void render_grounding(RowValue& row, const std::string& field, const std::string& messages_field,
                      const std::string& content_key, std::span<const GroundingImage> images, NormBbox norm,
                      const std::string& where) {
  const Objects objects = read_objects(row, field, images.size(), where);
  std::vector<std::string> boxes;
  for (size_t i = 0; i < objects.boxes.size(); ++i) {
    boxes.push_back(box_text(objects.boxes[i], images[objects.image_ids[i]], objects.norm1, norm, where,
                             fmt::format("{}.bbox[{}]", field, i)));
  }
  Renderer renderer{objects.refs, boxes};
  auto messages = row.find(messages_field);
  if (messages != row.end() && messages->is_array()) {
    for (RowValue& message : *messages) {
      if (!message.is_object()) continue;  // Formatter names the bad message
      auto content = message.find(content_key);
      if (content == message.end()) continue;
      if (content->is_string()) {
        *content = renderer.render(content->get<std::string>());
      } else if (content->is_array()) {
        for (RowValue& part : *content) {
          auto text = part.is_object() && part.value("type", "") == "text" ? part.find("text") : part.end();
          if (text != part.end() && text->is_string()) *text = renderer.render(text->get<std::string>());
        }
      }
    }
  }
  const auto check = [&](size_t given, size_t placeholders, const char* key, std::string_view placeholder) {
    if (given == placeholders) return;
    fail_user("{}: '{}.{}' has {} entr{} but the messages have {} {} placeholder{} (one each)", where, field, key,
              given, given == 1 ? "y" : "ies", placeholders, placeholder, placeholders == 1 ? "" : "s");
  };
  check(objects.refs.size(), renderer.ref_placeholders, "ref", kRef);
  check(boxes.size(), renderer.box_placeholders, "bbox", kBox);
}

}  // namespace surogate::data
