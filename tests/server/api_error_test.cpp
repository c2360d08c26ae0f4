// How engine statuses become OpenAI-style HTTP errors.
#include "server/api_error.h"

#include <gtest/gtest.h>

namespace kvs::server {
namespace {

TEST(ApiError, StatusesMapToHttpErrors) {
  const ApiError too_long = api_error_from_status(Status::out_of_range("prompt of 600 tokens"), "prompt");
  EXPECT_EQ(too_long.http_status, 400);
  EXPECT_EQ(too_long.code, "context_length_exceeded");
  EXPECT_EQ(too_long.param, "prompt");

  const ApiError closing = api_error_from_status(Status::unavailable("the engine is shutting down"), "prompt");
  EXPECT_EQ(closing.http_status, 503);
  EXPECT_EQ(closing.type, "server_error");
  EXPECT_EQ(closing.code, "shutting_down");
  EXPECT_EQ(closing.message, "the engine is shutting down");

  const ApiError broken = api_error_from_status(Status::io_error("disk"), "prompt");
  EXPECT_EQ(broken.http_status, 500);
}

}  // namespace
}  // namespace kvs::server
