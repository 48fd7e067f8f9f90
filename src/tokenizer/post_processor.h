// Post-processors of tokenizer.json: what `add_special_tokens` adds around the encoded ids.
// Supported: TemplateProcessing (the `single` template), BertProcessing / RobertaProcessing
// (cls + ids + sep), ByteLevel (offsets only: no change to ids) and Sequence of those.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

namespace surogate::tokenizer {

class JsonPath;

class PostProcessor {
 public:
  static PostProcessor from_json(const nlohmann::json& component, const JsonPath& where);
  // Wraps `ids` (the encoded text) in place.
  void apply(std::vector<int32_t>& ids) const;
  // How many ids the processor adds (prefix + suffix).
  size_t added_count() const { return prefix_.size() + suffix_.size(); }
  // Fails naming the file and key when an id the processor adds is not below `vocab_size` (the
  // ids of the model vocabulary and added tokens): it would reach the model as an id with no
  // embedding row.
  void check_ids_below(size_t vocab_size) const;

 private:
  void append(const nlohmann::json& component, const JsonPath& where);
  std::vector<int32_t> prefix_;
  std::vector<int32_t> suffix_;
  // Where each added id was read, for check_ids_below: (id, file, key).
  struct IdSource {
    int32_t id;
    std::string file;
    std::string key;
  };
  std::vector<IdSource> id_sources_;
  bool has_template_ = false;
};

}  // namespace surogate::tokenizer
