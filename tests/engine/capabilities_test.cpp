// The capability table (engine/capabilities.h): every rule refuses its pair, naming both features as described and
// what to do instead, and each feature of a pair alone is accepted; the engine, calc and the CLI refuse through it.
#include "engine/capabilities.h"

#include <gtest/gtest.h>

#include <set>

namespace kvs {
namespace {

TEST(Capabilities, EveryRuleRefusesItsPairNamingBothAndWhatToDoInstead) {
  ASSERT_FALSE(feature_rules().empty());
  std::set<std::pair<Feature, Feature>> pairs;
  for (const FeatureRule& rule : feature_rules()) {
    SCOPED_TRACE(::testing::Message() << feature_name(rule.a) << " + " << feature_name(rule.b));
    EXPECT_TRUE(pairs.insert({std::min(rule.a, rule.b), std::max(rule.a, rule.b)}).second) << "a pair appears once";
    FeatureSet both;
    both.add(rule.a, true, "feature A (7 units)").add(rule.b, true, "feature B (9 units)");
    const Status refused = check_features(both);
    ASSERT_FALSE(refused.is_ok());
    EXPECT_EQ(refused.code(), rule.unimplemented ? ErrorCode::kUnimplemented : ErrorCode::kInvalidArgument);
    EXPECT_NE(refused.message().find("feature A (7 units) and feature B (9 units) do not combine"), std::string::npos)
        << refused.message();
    EXPECT_NE(refused.message().find(rule.instead), std::string::npos) << refused.message();
    EXPECT_FALSE(rule.why.empty());
    EXPECT_TRUE(check_features(FeatureSet().add(rule.a)).is_ok());
    EXPECT_TRUE(check_features(FeatureSet().add(rule.b)).is_ok());
  }
}

TEST(Capabilities, AFeatureOffOrUndescribedIsNamedByItsDefaultName) {
  FeatureSet f;
  f.add(Feature::kKvWindow, false, "a KV window (8 tokens)").add(Feature::kNoCacheBaseline);
  EXPECT_FALSE(f.has(Feature::kKvWindow)) << "added as off: not on";
  EXPECT_TRUE(check_features(f).is_ok());
  f.add(Feature::kKvWindow, true);
  const Status refused = check_features(f);
  EXPECT_NE(refused.message().find("a KV window and the no-cache baseline do not combine"), std::string::npos)
      << refused.message();
  std::set<std::string_view> names;
  for (size_t i = 0; i < static_cast<size_t>(Feature::kCount); ++i)
    EXPECT_TRUE(names.insert(feature_name(static_cast<Feature>(i))).second) << "names are distinct";
}

}  // namespace
}  // namespace kvs
