// Reads a byte-level BPE Vocab from Hugging Face tokenizer files: vocab.json ({"token": id}),
// merges.txt (one "left right" per line, after an optional "#version" line) and, optionally,
// tokenizer_config.json (added tokens and the bos/eos/pad/unk token names).
#pragma once

#include <string>

#include "core/status.h"
#include "tokenizer/vocab.h"

namespace kvs {

struct HfTokenizerFiles {
  std::string vocab_json;
  std::string merges_txt;
  std::string tokenizer_config_json;  // empty: none
};

// Added tokens with "special": true become control tokens, the others user-defined. Ids missing
// from all files become unused "[PAD<id>]" tokens, as llama.cpp's converter writes them.
Expected<Vocab> vocab_from_hf_files(const HfTokenizerFiles& files, PreTokenizerKind pre);

}  // namespace kvs
