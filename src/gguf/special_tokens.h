// The special-token keys of a GGUF file as gguf-py's SpecialVocab writes them (convert_hf_to_gguf.py
// uses it for every tokenizer): bos / eos / unknown / seperator / padding / mask token ids from
// tokenizer_config.json's *_token looked up in tokenizer.json's added_tokens, then config.json's
// *_token_id; eot (eom) when the post-processor's template ends in another token than eos_token;
// add_bos / add_eos / add_sep from the post-processor (TemplateProcessing's leading / trailing /
// separating special tokens; RobertaProcessing: all three; ByteLevel: none unless set), overridden by
// tokenizer_config.json's add_*_token; the normalizer's lowercase / strip_accents flags; the chat
// template (tokenizer_config.json's, else chat_template.jinja / chat_template.json; a list of named
// templates becomes tokenizer.chat_template.<name> + tokenizer.chat_templates).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>

#include <nlohmann/json.hpp>

#include "gguf/gguf_writer.h"

namespace surogate::gguf {

void add_special_tokens(Metadata& metadata, const nlohmann::json& tokenizer,
                        std::optional<nlohmann::json> tokenizer_config, const nlohmann::json& model_config,
                        const std::filesystem::path& model_dir, int64_t vocab_size);

}  // namespace surogate::gguf
