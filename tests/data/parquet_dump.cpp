// Test helper for tests/python/test_data_parquet.py: prints every row of a Parquet file, read by
// Surogate's own reader, as one JSON object per line, so pytest can compare with pyarrow.
// Exit code 2 and the UserError message on stderr for files the reader rejects.
#include <cstdio>

#include "core/error.h"
#include "data/row_reader.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: data_parquet_dump FILE\n");
    return 1;
  }
  try {
    auto reader = surogate::data::open_row_reader({argv[1]});
    surogate::data::Row row;
    while (reader->next(row)) std::printf("%s\n", row.value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  } catch (const surogate::UserError& error) {
    std::fprintf(stderr, "error: %s\n", error.what());
    return 2;
  }
  return 0;
}
