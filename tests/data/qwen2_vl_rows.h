// An ImageRowFormatter of a Qwen2-VL setup for the image-row tests (test_image_rows.cpp) and
// image_rows_tool: a tokenizer folder, a chat template file and a preprocessor_config.json folder.
#pragma once

#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>

#include "chat_template/chat_template.h"
#include "data/image_rows.h"
#include "tokenizer/tokenizer.h"

namespace surogate::data::testing {

inline std::string read_text(const std::filesystem::path& path) {
  std::ifstream stream(path, std::ios::binary);
  std::stringstream text;
  text << stream.rdbuf();
  return text.str();
}

inline ImageRowFormatter qwen2_vl_formatter(const std::filesystem::path& tokenizer_dir,
                                            const std::filesystem::path& template_file,
                                            const std::filesystem::path& processor_dir,
                                            const std::filesystem::path& base_dir,
                                            NormBbox norm_bbox = NormBbox::Norm1000) {
  auto tokenizer = std::make_shared<tokenizer::Tokenizer>(tokenizer::Tokenizer::load(tokenizer_dir));
  TextCodec codec;
  codec.encode = [tokenizer](std::string_view text, bool special) { return tokenizer->encode(text, special); };
  codec.decode = [tokenizer](std::span<const int32_t> ids) { return tokenizer->decode(ids, false); };
  codec.eos_id = tokenizer->eos_token_id();
  auto chat = std::make_shared<chat_template::ChatTemplate>(
      chat_template::ChatTemplate::from_source(read_text(template_file), template_file.filename().string()));
  ChatRenderer renderer = [chat](const RowValue& messages, const RowValue& tools, bool generation_prompt) {
    return chat->render({.messages = messages, .tools = tools, .add_generation_prompt = generation_prompt});
  };
  ImageRowOptions options;
  options.base_dir = base_dir;
  options.image_pad_id = tokenizer->token_to_id("<|image_pad|>").value_or(-1);
  options.norm_bbox = norm_bbox;
  auto processor = vision::ImageProcessorConfig::from_folder(processor_dir);
  return ImageRowFormatter(DatasetConfig{}, FormatOptions{}, codec, renderer, vision::ImageProcessor(processor), options);
}

}  // namespace surogate::data::testing
