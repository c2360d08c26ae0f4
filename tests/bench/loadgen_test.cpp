// Load generator pieces that need no server: URL checks and percentiles.
#include "bench/loadgen.h"

#include <gtest/gtest.h>

namespace kvs::bench {
namespace {

TEST(Loadgen, AcceptsOnlyLoopbackHttpUrls) {
  auto url = parse_loopback_url("http://127.0.0.1:8080");
  ASSERT_TRUE(url.has_value());
  EXPECT_EQ(url->host, "127.0.0.1");
  EXPECT_EQ(url->port, 8080);
  EXPECT_TRUE(parse_loopback_url("http://localhost:9000/v1").has_value());
  EXPECT_TRUE(parse_loopback_url("http://127.1.2.3:1").has_value());
  auto v6 = parse_loopback_url("http://[::1]:8081");
  ASSERT_TRUE(v6.has_value());
  EXPECT_EQ(v6->host, "::1");
  EXPECT_EQ(v6->port, 8081);
  for (const char* bad : {"http://10.0.0.1:8080", "http://example.com:80", "https://127.0.0.1:8080",
                          "http://128.0.0.1:1", "http://127.0.0.1:99999", "127.0.0.1:8080", "http://127.0.0:80"}) {
    EXPECT_FALSE(parse_loopback_url(bad).has_value()) << bad;
  }
  EXPECT_NE(parse_loopback_url("http://10.0.0.1:8080").status().message().find("only targets this machine"),
            std::string::npos);
}

TEST(Loadgen, NearestRankPercentiles) {
  std::vector<double> values = {5, 1, 4, 2, 3};
  EXPECT_EQ(percentile(values, 0.5), 3);
  EXPECT_EQ(percentile(values, 0.99), 5);
  EXPECT_EQ(percentile(values, 0.0), 1);
  std::vector<double> none;
  EXPECT_EQ(percentile(none, 0.5), 0);
}

TEST(Loadgen, ConfigValidation) {
  LoadgenConfig config;
  EXPECT_TRUE(config.validate());
  config.concurrency = {1, 0};
  EXPECT_FALSE(config.validate());
  config.concurrency = {1};
  config.duration_limit_s = 0;
  EXPECT_FALSE(config.validate());
  config.duration_limit_s = 10;
  config.rounds = 0;
  EXPECT_FALSE(config.validate());
  config.rounds = config.requests + 1;  // a round without a request
  EXPECT_FALSE(config.validate());
  config.rounds = 2;
  EXPECT_TRUE(config.validate());
}

}  // namespace
}  // namespace kvs::bench
