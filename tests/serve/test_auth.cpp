// The API key check.
#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <vector>

#include "serve/auth.h"

namespace surogate::serve {
namespace {

TEST(Auth, ConstantTimeEqualIsEquality) {
  const std::vector<std::tuple<std::string, std::string, bool>> cases = {
      {"", "", true}, {"key", "key", true}, {"key", "kez", false}, {"key", "key2", false}, {"key", "", false},
      {std::string("a\0", 2), "a", false}};
  for (const auto& [a, b, equal] : cases) EXPECT_EQ(constant_time_equal(a, b), equal) << a << " vs " << b;
}

TEST(Auth, BearerMatchesOnlyTheExactKey) {
  EXPECT_TRUE(bearer_matches("Bearer sk-1", "sk-1"));
  for (const char* header : {"sk-1", "Bearer sk-2", "Bearer sk-1 ", "", "Basic sk-1", "bearer sk-1"}) {
    EXPECT_FALSE(bearer_matches(header, "sk-1")) << header;
  }
}

}  // namespace
}  // namespace surogate::serve
