"""The house is layered (scripts/check_layering.py, docs/contributing.md's layout table): a module
of src/ includes only modules above it, so a kernel never reaches into the runtime, the runtime
never into the trainer, and so on."""

from conftest import REPO_ROOT, load_script

check_layering = load_script("check_layering")


def test_the_sources_include_only_modules_above_them():
    assert list(check_layering.upward_includes(REPO_ROOT / "src")) == []


def test_an_upward_include_is_reported_with_its_line(tmp_path):
    (tmp_path / "cuda" / "kernels").mkdir(parents=True)
    (tmp_path / "runtime").mkdir()
    (tmp_path / "cuda" / "kernels" / "k.cu").write_text('#include "core/error.h"\n#include "runtime/backend.h"\n')
    (tmp_path / "runtime" / "backend.h").write_text('#include "cuda/kernels/k.h"\n#include "graph/graph.h"\n')
    found = list(check_layering.upward_includes(tmp_path))
    assert found == [f"{tmp_path.name}/cuda/kernels/k.cu:2: cuda includes runtime/ (not above it)"]
