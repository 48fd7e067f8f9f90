// Checks the option tables against the product reference itself: every option documented in
// tests/fixtures/reference/configuration.md (a copy of the product reference, see the README
// there) exists with the documented default, and every option Surogate accepts is documented
// there (or listed as an addition in docs/configuration.md).
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include "config_test_util.h"

namespace surogate {
namespace {

struct ReferenceRow {
  std::string scope;  // "" for top-level options, "datasets" or "distributed"
  std::string name;
  std::string type;
  std::string default_text;
};

std::string trim(const std::string& text) {
  size_t begin = text.find_first_not_of(" \t");
  if (begin == std::string::npos) return "";
  size_t end = text.find_last_not_of(" \t");
  return text.substr(begin, end - begin + 1);
}

std::vector<std::string> split_cells(const std::string& line) {
  std::vector<std::string> cells;
  std::stringstream stream(line);
  std::string cell;
  while (std::getline(stream, cell, '|')) cells.push_back(trim(cell));
  if (!cells.empty() && cells.front().empty()) cells.erase(cells.begin());
  return cells;
}

bool is_option_name(const std::string& text) {
  return !text.empty() && text.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789_.") == std::string::npos;
}

// The option rows of the reference tables, with the section they belong to.
std::vector<ReferenceRow> read_reference() {
  const std::string path = std::string(SUROGATE_FIXTURES_DIR) + "/reference/configuration.md";
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << "reference not found: " << path;
  const std::set<std::string> types = {"string", "bool", "int", "float", "list", "dict"};
  std::vector<ReferenceRow> rows;
  std::string scope;
  std::string line;
  while (std::getline(in, line)) {
    if (line.starts_with("Dataset Configuration Options")) scope = "datasets";
    if (line.starts_with("Memory Optimization Settings")) scope = "";
    auto cells = split_cells(line);
    if (cells.size() < 3 || !is_option_name(cells[0]) || !types.contains(cells[1])) continue;
    ReferenceRow row{scope, cells[0], cells[1], cells[2]};
    if (row.name.starts_with("distributed.")) {
      row.scope = "distributed";
      row.name = row.name.substr(std::string("distributed.").size());
    }
    rows.push_back(row);
  }
  return rows;
}

// The resolved default configuration (plus the one dataset the minimal config needs) as YAML.
YAML::Node default_dump() {
  return YAML::Load(dump_config_yaml(load_config_from_string(testing_util::kMinimalConfig, "config.yaml")));
}

const YAML::Node& scope_node(const YAML::Node& dump, const std::string& scope, YAML::Node& holder) {
  if (scope == "datasets") holder = dump["datasets"][0];
  else if (scope == "distributed") holder = dump["distributed"];
  else holder = dump;
  return holder;
}

// Defaults that depend on the model or on other options: unset (null) until the model is known.
bool is_derived_default(const std::string& text) {
  return text == "auto-generated" || text == "auto-detect" || text == "model's max" || text == "auto" ||
         text == "run_name";
}

void expect_default(const ReferenceRow& row, const YAML::Node& value) {
  std::string context = (row.scope.empty() ? "" : row.scope + ".") + row.name + " (documented default " +
                        row.default_text + ")";
  const std::string& text = row.default_text;
  if (text == "required") return;  // checked by the required-option tests
  if (row.scope.empty() && row.name == "datasets") return;  // documented null, but a run needs one (checked elsewhere)
  if (is_derived_default(text) || text == "null") {
    if (row.type == "list") {
      EXPECT_TRUE(value.IsSequence() && value.size() == 0) << context;
    } else {
      EXPECT_TRUE(value.IsNull()) << context;
    }
    return;
  }
  if (row.type == "list" || row.type == "dict") {
    // `{"role": "role", "content": "content", ...}`: the listed entries must be there.
    std::string listed = text;
    if (auto ellipsis = listed.find(", ..."); ellipsis != std::string::npos) listed.erase(ellipsis, 5);
    YAML::Node expected = YAML::Load(listed);
    if (row.type == "list") {
      ASSERT_TRUE(value.IsSequence()) << context;
      ASSERT_EQ(value.size(), expected.size()) << context;
      for (size_t i = 0; i < expected.size(); ++i) EXPECT_EQ(value[i].Scalar(), expected[i].Scalar()) << context;
    } else {
      ASSERT_TRUE(value.IsMap()) << context;
      for (const auto& entry : expected) {
        EXPECT_EQ(value[entry.first.Scalar()].Scalar(), entry.second.Scalar()) << context;
      }
    }
    return;
  }
  ASSERT_TRUE(value.IsScalar()) << context;
  if (row.type == "float" || row.type == "int") {
    EXPECT_DOUBLE_EQ(std::strtod(value.Scalar().c_str(), nullptr), std::strtod(text.c_str(), nullptr)) << context;
    return;
  }
  std::string expected = text;
  if (expected.size() >= 2 && expected.front() == '"' && expected.back() == '"') {
    expected = expected.substr(1, expected.size() - 2);
  }
  EXPECT_EQ(value.Scalar(), expected) << context;
}

TEST(ConfigReference, EveryDocumentedOptionExistsWithItsDefault) {
  auto rows = read_reference();
  ASSERT_GT(rows.size(), 120u) << "the reference tables were not found; has the format changed?";
  YAML::Node dump = default_dump();
  for (const auto& row : rows) {
    YAML::Node holder;
    const YAML::Node& scope = scope_node(dump, row.scope, holder);
    YAML::Node value = scope[row.name];
    ASSERT_TRUE(value.IsDefined()) << "documented option '" << row.name << "' is missing from the option table";
    expect_default(row, value);
  }
}

// The options docs/configuration.md lists under "Additions to the reference": each bullet there
// that opens with an option name in backticks ("- `pipeline_parallel_size` (int, default 1): ...").
std::set<std::string> documented_additions() {
  std::ifstream in(std::string(SUROGATE_SOURCE_DIR) + "/docs/configuration.md");
  EXPECT_TRUE(in.good()) << "docs/configuration.md not found";
  std::set<std::string> names;
  bool additions = false;
  for (std::string line; std::getline(in, line);) {
    if (line.starts_with("## ")) additions = line == "## Additions to the reference";
    if (!additions || !line.starts_with("- `")) continue;
    const size_t end = line.find('`', 3);
    if (end != std::string::npos) names.insert(line.substr(3, end - 3));
  }
  return names;
}

TEST(ConfigReference, EveryAcceptedOptionIsDocumented) {
  std::set<std::string> documented = documented_additions();
  for (const auto& row : read_reference()) documented.insert((row.scope.empty() ? "" : row.scope + ".") + row.name);
  YAML::Node dump = default_dump();
  for (const auto& [scope, node] : {std::pair<std::string, YAML::Node>{"", dump},
                                    {"datasets", dump["datasets"][0]},
                                    {"distributed", dump["distributed"]}}) {
    for (const auto& entry : node) {
      std::string key = (scope.empty() ? "" : scope + ".") + entry.first.Scalar();
      if (key == "distributed") continue;  // documented through its distributed.* rows
      EXPECT_TRUE(documented.contains(key)) << "option '" << key << "' is accepted but not in the reference (nor among docs/configuration.md's additions)";
    }
  }
}

}  // namespace
}  // namespace surogate
