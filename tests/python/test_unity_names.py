"""The unity build's rule (scripts/check_unity_names.py): a name defined at the top level of an
anonymous namespace is defined by one source of its module only, so that adding a file (which
reshuffles the batches of 8) never turns two harmless definitions into a redefinition. Two such
pairs broke the build this way (hf_hub.cpp / object_store.cpp's kDownloadAttempts)."""

from conftest import load_script

check_unity_names = load_script("check_unity_names")


def test_the_sources_follow_the_rule():
    assert check_unity_names.duplicates() == []


def test_duplicates_are_found_and_identical_aliases_allowed(tmp_path):
    module = tmp_path / "io"
    module.mkdir()
    (module / "a.cpp").write_text("namespace surogate {\nnamespace {\n\nconstexpr int kDownloadAttempts = 3;\n"
                                  "using Clock = std::chrono::steady_clock;\nstd::string trim(std::string text) {\n"
                                  "  return text;\n}\nstruct Layout {\n};\n}  // namespace\n}\n")
    (module / "b.cpp").write_text("namespace surogate {\nnamespace {\nnamespace fs = std::filesystem;\n"
                                  "constexpr int kDownloadAttempts = 3;\nusing Clock = std::chrono::steady_clock;\n"
                                  "static std::string trim(std::string text) { return text; }\n"
                                  "template <typename T>\nstruct Layout {};\n}  // namespace\n"
                                  "int outside(int x) { return x; }\n}\n")
    (module / "c.cpp").write_text("namespace {\nnamespace fs = std::filesystem;\nint outside(int x) { return x; }\n"
                                  "}  // namespace\n")
    found = {name: files for _, name, files in check_unity_names.duplicates(tmp_path)}
    assert found == {"kDownloadAttempts": ["io/a.cpp", "io/b.cpp"], "trim": ["io/a.cpp", "io/b.cpp"],
                     "Layout": ["io/a.cpp", "io/b.cpp"]}
