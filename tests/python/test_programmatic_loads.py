"""Programmatically launched kernels read what another kernel writes only with coherent loads
(scripts/check_programmatic_loads.py): a non-coherent one may be scheduled above the wait."""

from conftest import REPO_ROOT, load_script

check = load_script("check_programmatic_loads")


def test_the_programmatic_kernels_mark_every_non_coherent_load():
    assert list(check.unmarked_loads(REPO_ROOT / "src")) == []


def test_an_unmarked_load_in_a_kernel_that_waits_is_reported_with_its_line(tmp_path):
    (tmp_path / "kernels").mkdir()
    (tmp_path / "kernels" / "waits.cu").write_text(
        "__global__ void k(const float* x, const float* w) {\n"
        "  wait_for_previous_grid();\n"
        "  float a = __ldg(x);\n"
        "  float b = __ldg(w);  // read-only: a model parameter\n"
        "}\n")
    (tmp_path / "kernels" / "plain.cu").write_text("__global__ void k(const float* __restrict__ x) { __ldg(x); }\n")
    found = list(check.unmarked_loads(tmp_path))
    assert found == [f"{tmp_path.name}/kernels/waits.cu:3: float a = __ldg(x);"]
