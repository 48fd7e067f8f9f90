// A model written in the Python DSL (`model_definition: model.py` or `model.py:NAME`), turned into
// the JSON IR the engine reads by running `python -m surogate.dsl` for the model folder and the
// [B, T] a graph needs. The interpreter is $SUROGATE_PYTHON, the python3 beside this executable (a
// virtual environment's), or python3 on the PATH; the `surogate` package is
// the installed one, or python/ of the source tree this binary was built in (found from the
// executable's path, as build/surogate sits beside python/); the DSL asks this very executable
// for its ops (SUROGATE_BIN). Each (file, folder, shape) is compiled once per process, into a
// private temporary folder removed at exit.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace surogate::models {

// What every Python helper surogate runs uses (the DSL, GRPO's reward worker): the interpreter
// chosen as above, and this process's environment with the `surogate` package on PYTHONPATH.
std::string python_interpreter();
std::vector<std::string> python_child_environment();

// True for "model.py" and "model.py:NAME".
bool is_python_definition(const std::filesystem::path& file);

// The JSON IR of `file` for `model_dir` and [batch, sequence] (lm_head chunks `lmhead_chunks`).
// UserError naming `source` with the DSL's own message (which names the line of the user's file)
// when the definition does not compile, or saying how to get Python / the package when they are
// missing.
std::filesystem::path compile_python_definition(const std::filesystem::path& file, const std::filesystem::path& model_dir,
                                                int64_t batch, int64_t sequence, int64_t lmhead_chunks,
                                                const std::string& source);

}  // namespace surogate::models
