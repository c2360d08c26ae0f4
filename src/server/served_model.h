// The one model a server serves: its public id (GGUF general.name, else the file stem), the other
// names a request may use for it, its context length and chat template.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "chat/chat_template.h"
#include "model/decoder_model.h"
#include "tokenizer/tokenizer.h"

namespace kvs::server {

struct ServedModel {
  std::string id;
  std::vector<std::string> aliases;  // the file stem and file name
  size_t context_length = 0;
  int64_t created = 0;  // unix seconds when the server loaded it
  chat::ChatTemplate chat_template = chat::ChatTemplate::of(chat::ChatTemplateFamily::kPlain);
  bool chat_template_unrecognized = false;  // the model has a template of no known family (plain is used)

  // A request may name the model by id or alias, or leave the field out (the default model).
  bool accepts(std::string_view requested) const;
  nlohmann::json to_json() const;  // an entry of GET /v1/models
};

// `chat_template`: a Jinja chat template that replaces the model file's tokenizer.chat_template ("": the file's).
ServedModel describe_model(const DecoderModel& model, const Tokenizer& tokenizer, const std::string& path,
                           int64_t created, const std::string& chat_template = {});

}  // namespace kvs::server
