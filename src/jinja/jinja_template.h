// A Jinja template as Hugging Face transformers renders chat templates (apply_chat_template): the subset of Jinja2
// that real templates use (parser.h lists the tags, filters.h the filters and tests), with trim_blocks and
// lstrip_blocks on, Python's semantics for values (value.h, operations.h) and HF's globals: raise_exception(msg),
// strftime_now(format), plus Jinja's range, namespace and dict. Parsed once, rendered many times; a template that
// uses something outside the subset is refused when parsed, naming it and its line.
//
//   auto t = jinja::Template::parse(source);
//   auto text = t->render({{"messages", messages}, {"add_generation_prompt", true}, {"bos_token", "<s>"}});
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <string_view>

#include "core/status.h"
#include "jinja/ast.h"
#include "jinja/value.h"

namespace kvs::jinja {

struct RenderOptions {
  // What strftime_now reads (UTC); tests fix it.
  std::chrono::system_clock::time_point now = std::chrono::system_clock::now();
};

class Template {
 public:
  static Expected<Template> parse(std::string_view source);
  // The text, or the error: a raise_exception() message as the template wrote it, or what failed and where.
  Expected<std::string> render(const Object& variables, const RenderOptions& options = {}) const;

 private:
  explicit Template(std::shared_ptr<const Body> body) : body_(std::move(body)) {}
  std::shared_ptr<const Body> body_;
};

}  // namespace kvs::jinja
