#include "server/served_model.h"

#include <algorithm>
#include <filesystem>

namespace kvs::server {

bool ServedModel::accepts(std::string_view requested) const {
  return requested.empty() || requested == id || std::find(aliases.begin(), aliases.end(), requested) != aliases.end();
}

nlohmann::json ServedModel::to_json() const {
  return {{"id", id},
          {"object", "model"},
          {"created", created},
          {"owned_by", "kvserve"},
          {"max_model_len", context_length},
          {"chat_template", chat_template.renders_model_template() ? "jinja" : std::string(chat_template.name())}};
}

ServedModel describe_model(const DecoderModel& model, const Tokenizer& tokenizer, const std::string& path,
                           int64_t created, const std::string& chat_template) {
  const std::filesystem::path file(path);
  ServedModel served;
  served.id = model.file().get_string("general.name").value_or("");
  if (served.id.empty()) served.id = file.stem().string();
  for (std::string alias : {file.stem().string(), file.filename().string()}) {
    if (alias != served.id && std::find(served.aliases.begin(), served.aliases.end(), alias) == served.aliases.end()) {
      served.aliases.push_back(std::move(alias));
    }
  }
  served.context_length = model.config().context_length;
  served.created = created;
  const std::string bos = tokenizer.bos() >= 0 ? std::string(tokenizer.token_text(tokenizer.bos())) : "";
  const std::string eos = tokenizer.eos() >= 0 ? std::string(tokenizer.token_text(tokenizer.eos())) : "";
  const std::string source =
      chat_template.empty() ? model.file().get_string("tokenizer.chat_template").value_or("") : chat_template;
  served.chat_template = chat::ChatTemplate::detect(source, bos, eos);
  served.chat_template_unrecognized = !source.empty() && !served.chat_template.renders_model_template() &&
                                      served.chat_template.family() == chat::ChatTemplateFamily::kPlain;
  return served;
}

}  // namespace kvs::server
