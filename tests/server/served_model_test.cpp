// The served model's id, aliases and chat template, from the default model's GGUF metadata.
#include "server/served_model.h"

#include <gtest/gtest.h>

#include "test_support.h"

namespace kvs::server {
namespace {

TEST(ServedModel, IdFromGeneralNameAndFileAliases) {
  auto model = DecoderModel::load(test::default_model_path());
  ASSERT_TRUE(model.has_value()) << model.status().message();
  auto tokenizer = Tokenizer::from_gguf((*model)->file());
  ASSERT_TRUE(tokenizer.has_value()) << tokenizer.status().message();
  const ServedModel served = describe_model(**model, *tokenizer, test::default_model_path(), 1700000000);
  EXPECT_EQ(served.id, "stories260K");  // general.name
  EXPECT_EQ(served.context_length, 512u);
  EXPECT_EQ(served.chat_template.family(), chat::ChatTemplateFamily::kPlain);  // no tokenizer.chat_template
  EXPECT_FALSE(served.chat_template_unrecognized);
  EXPECT_TRUE(served.accepts(""));
  EXPECT_TRUE(served.accepts("stories260K"));
  EXPECT_TRUE(served.accepts("stories260K.gguf"));
  EXPECT_FALSE(served.accepts("gpt-4o"));
  const auto json = served.to_json();
  EXPECT_EQ(json["object"], "model");
  EXPECT_EQ(json["created"], 1700000000);
  EXPECT_EQ(json["max_model_len"], 512);
}

}  // namespace
}  // namespace kvs::server
