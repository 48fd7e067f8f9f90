// Row readers (JSONL, JSON, txt, folders) with their origins, bad-data errors with line
// numbers, and dataset file selection by split / subset.
#include <gtest/gtest.h>

#include "core/error.h"
#include "data/dataset_files.h"
#include "data/row_reader.h"
#include "test_helpers.h"

namespace surogate::data {
namespace {

std::vector<Row> read_all(std::vector<std::filesystem::path> files) {
  auto reader = open_row_reader(std::move(files));
  std::vector<Row> rows;
  Row row;
  while (reader->next(row)) rows.push_back(row);
  return rows;
}

std::string error_of(std::vector<std::filesystem::path> files) {
  try {
    read_all(std::move(files));
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}

TEST(Readers, JsonLinesSkipsBlankLinesAndKeepsLineNumbers) {
  auto dir = testing::fresh_dir("jsonl");
  auto path = testing::write_file(dir / "a.jsonl", "{\"text\": \"x\"}\n\n{\"text\": \"y\"}\r\n");
  auto rows = read_all({path});
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[1].value["text"], "y");
  EXPECT_EQ(rows[1].origin.describe(), path.string() + ":3");
}

TEST(Readers, MalformedJsonLineNamesFileAndLine) {
  auto dir = testing::fresh_dir("bad_jsonl");
  auto path = testing::write_file(dir / "a.jsonl", "{\"text\": \"x\"}\n{\"text\": \"y\"\n");
  std::string message = error_of({path});
  EXPECT_NE(message.find(path.string() + ":2: malformed JSON"), std::string::npos) << message;
  auto scalar = testing::write_file(dir / "b.jsonl", "[1, 2]\n");
  EXPECT_NE(error_of({scalar}).find("b.jsonl:1: expected a JSON object"), std::string::npos);
  auto bad_utf8 = testing::write_file(dir / "c.jsonl", "{\"text\": \"\xff\"}\n");
  EXPECT_NE(error_of({bad_utf8}).find("c.jsonl:1"), std::string::npos);
}

TEST(Readers, JsonArrayAndColumnsAndLinesNamedJson) {
  auto dir = testing::fresh_dir("json");
  auto array = testing::write_file(dir / "a.json", "[\n {\"text\": \"x\"},\n {\"text\": \"y\"}\n]");
  auto rows = read_all({array});
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[1].origin.number, 3u);
  auto columns = testing::write_file(dir / "b.json", "{\"text\": [\"x\", \"y\"], \"id\": [1, 2]}");
  rows = read_all({columns});
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[1].value, (RowValue{{"text", "y"}, {"id", 2}}));  // keys in file order
  auto lines = testing::write_file(dir / "c.json", "{\"text\": \"x\"}\n{\"text\": \"y\"}\n");
  EXPECT_EQ(read_all({lines}).size(), 2u);
  auto mixed = testing::write_file(dir / "d.json", "[{\"text\": \"x\"},\n 3]");
  EXPECT_NE(error_of({mixed}).find("d.json:2"), std::string::npos) << error_of({mixed});
  auto ragged = testing::write_file(dir / "e.json", "{\"a\": [1], \"b\": [1, 2]}");
  EXPECT_NE(error_of({ragged}).find("same length"), std::string::npos);
}

TEST(Readers, TextFileIsOneDocument) {
  auto dir = testing::fresh_dir("txt");
  auto path = testing::write_file(dir / "doc.txt", "line one\nline two\n");
  auto rows = read_all({path});
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].value["text"], "line one\nline two\n");
}

TEST(DatasetFiles, SplitSubsetAndErrors) {
  auto dir = testing::fresh_dir("files");
  testing::write_file(dir / "data" / "train-00001-of-00002.jsonl", "{}\n");
  testing::write_file(dir / "data" / "train-00000-of-00002.jsonl", "{}\n");
  testing::write_file(dir / "data" / "train_sft-00000.jsonl", "{}\n");
  testing::write_file(dir / "data" / "test-00000.jsonl", "{}\n");
  testing::write_file(dir / "README.md", "x");
  testing::write_file(dir / ".cache" / "train.jsonl", "{}\n");
  DatasetConfig dataset;
  dataset.path = dir.string();
  auto files = select_dataset_files(dataset);
  ASSERT_EQ(files.size(), 2u);
  EXPECT_EQ(files[0].filename(), "train-00000-of-00002.jsonl");  // sorted
  dataset.split = "train_sft";
  EXPECT_EQ(select_dataset_files(dataset).size(), 1u);
  dataset.split = "validation";
  EXPECT_THROW(select_dataset_files(dataset), UserError);
  dataset.split = "train";
  dataset.subset = "missing";
  EXPECT_THROW(select_dataset_files(dataset), UserError);

  auto unsplit = testing::fresh_dir("unsplit");
  testing::write_file(unsplit / "en" / "a.jsonl", "{}\n");
  testing::write_file(unsplit / "en" / "b.parquet", "");
  testing::write_file(unsplit / "fr" / "c.jsonl", "{}\n");
  DatasetConfig subset;
  subset.path = unsplit.string();
  subset.subset = "en";
  EXPECT_EQ(select_dataset_files(subset).size(), 2u);

  DatasetConfig missing;
  missing.path = "./no/such/file.jsonl";
  EXPECT_THROW(select_dataset_files(missing), UserError);
}

}  // namespace
}  // namespace surogate::data
