// Memory sizes in messages: MiB below 1 GiB, GiB with two decimals from there (powers of 1024).
#include <gtest/gtest.h>

#include "core/strings.h"

namespace surogate {
namespace {

TEST(Strings, MemorySizesReadInMiBBelowAGiBAndInGiBFromThere) {
  EXPECT_EQ(format_memory_size(0), "0.0 MiB");
  EXPECT_EQ(format_memory_size(size_t{34} << 20), "34.0 MiB");
  EXPECT_EQ(format_memory_size((size_t{1} << 30) - 1), "1024.0 MiB");
  EXPECT_EQ(format_memory_size(size_t{1} << 30), "1.00 GiB");
  EXPECT_EQ(format_memory_size(size_t{80} << 30), "80.00 GiB");
}

}  // namespace
}  // namespace surogate
