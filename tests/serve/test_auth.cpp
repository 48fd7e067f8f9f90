// The API key check.
#include <gtest/gtest.h>

#include "serve/auth.h"

namespace surogate::serve {
namespace {

TEST(Auth, ConstantTimeEqualIsEquality) {
  EXPECT_TRUE(constant_time_equal("", ""));
  EXPECT_TRUE(constant_time_equal("key", "key"));
  EXPECT_FALSE(constant_time_equal("key", "kez"));
  EXPECT_FALSE(constant_time_equal("key", "key2"));
  EXPECT_FALSE(constant_time_equal("key", ""));
  EXPECT_FALSE(constant_time_equal(std::string_view("a\0", 2), "a"));
}

TEST(Auth, BearerMatchesOnlyTheExactKey) {
  EXPECT_TRUE(bearer_matches("Bearer sk-1", "sk-1"));
  EXPECT_FALSE(bearer_matches("sk-1", "sk-1"));
  EXPECT_FALSE(bearer_matches("Bearer sk-2", "sk-1"));
  EXPECT_FALSE(bearer_matches("Bearer sk-1 ", "sk-1"));
  EXPECT_FALSE(bearer_matches("", "sk-1"));
  EXPECT_FALSE(bearer_matches("Basic sk-1", "sk-1"));
}

}  // namespace
}  // namespace surogate::serve
