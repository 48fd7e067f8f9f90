// The tokenizer keys of a GGUF file (tokenizer.ggml.*, tokenizer.chat_template) from a model
// folder's tokenizer.json + tokenizer_config.json (+ chat_template.jinja / .json), as
// convert_hf_to_gguf.py and gguf-py's SpecialVocab write them:
//  - byte-level BPE (Llama 3, Qwen2/3): model "gpt2", `pre` named after the pre-tokenizer's split
//    regex (llama-bpe, qwen2; gpt-2 for ByteLevel's own), every id below vocab_size with its text
//    ("[PAD<id>]", type UNUSED, where the tokenizer has none), types NORMAL / CONTROL (special added
//    tokens, or ones that look special: <|...|>) / USER_DEFINED, merges as "a b".
//  - SentencePiece-style BPE with byte fallback (Llama 2, Mistral): model "llama", pre "default",
//    types BYTE (<0xNN>) / CONTROL / NORMAL / USER_DEFINED, and scores. The converter reads scores
//    from tokenizer.model (which Surogate does not parse) or writes -1000 for every token, which makes
//    llama.cpp's SentencePiece tokenizer merge left to right instead of by rank; here a token made by
//    merge r scores -r and other tokens 0, so llama.cpp merges in the order tokenizer.json's BPE does.
//    The list is padded to vocab_size like the gpt2 one.
//  - the special tokens, add_* flags, normalizer flags and chat template: gguf/special_tokens.h.
#pragma once

#include <filesystem>

#include "gguf/gguf_writer.h"
#include "io/model_config.h"

namespace surogate::gguf {

void add_vocab_metadata(Metadata& metadata, const std::filesystem::path& model_dir, const io::ModelConfig& config);

}  // namespace surogate::gguf
