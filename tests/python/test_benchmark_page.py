"""docs/benchmarks.md's headline tables and charts against the committed records (bench/results/):
the page's tables are what bench/headline_tables.py renders from the records, a row whose record
is gone or ambiguous is an error rather than a stale number, the links into the page name rows
that exist, and bench/plot_benchmarks.py draws its charts from the same rows."""
import json
import pathlib
import re
import shutil
import subprocess
import sys

import pytest

REPO_ROOT = pathlib.Path(__file__).resolve().parents[2]
BENCH = REPO_ROOT / "bench"
PAGE = REPO_ROOT / "docs" / "benchmarks.md"
sys.path.insert(0, str(BENCH))
import benchmark_records  # noqa: E402
import headline_rows  # noqa: E402


def run(*args):
    return subprocess.run([sys.executable, *map(str, args)], capture_output=True, text=True)


def test_the_page_tables_are_the_records():
    result = run(BENCH / "headline_tables.py", "--check", PAGE)
    assert result.returncode == 0, result.stderr


def test_a_changed_figure_is_caught(tmp_path):
    page = tmp_path / "benchmarks.md"
    text = PAGE.read_text()
    figure = re.search(r"\*\*(\d[\d,]*)\*\*", text)  # the first table's first figure
    assert figure, "no bold figure on the page"
    page.write_text(text.replace(figure.group(0), f"**{figure.group(1)}1**", 1))
    assert page.read_text() != PAGE.read_text()
    result = run(BENCH / "headline_tables.py", "--check", page)
    assert result.returncode == 1
    assert "differ from the records" in result.stderr


def copy_results(tmp_path):
    results = tmp_path / "results"
    shutil.copytree(benchmark_records.RESULTS, results)
    return results


def test_a_missing_record_file_fails_naming_it(tmp_path):
    results = copy_results(tmp_path)
    (results / headline_rows.MOE_FILE).unlink()
    result = run(BENCH / "headline_tables.py", "--results", results)
    assert result.returncode == 1
    assert headline_rows.MOE_FILE in result.stderr and "no such record file" in result.stderr


def test_a_duplicated_record_is_ambiguous(tmp_path):
    results = copy_results(tmp_path)
    path = results / headline_rows.MOE_FILE
    first = path.read_text().splitlines()[0]
    path.write_text(path.read_text() + first + "\n")
    result = run(BENCH / "headline_tables.py", "--results", results)
    assert result.returncode == 1
    assert "matches 2 records" in result.stderr


def test_a_record_from_another_gpu_is_refused(tmp_path):
    results = copy_results(tmp_path)
    path = results / headline_rows.MOE_FILE
    records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    for record in records:
        if record.get("engine") == "hf+peft":
            record["gpu"] = "NVIDIA H200"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    result = run(BENCH / "headline_tables.py", "--results", results)
    assert result.returncode == 1
    assert "ran on 'NVIDIA H200'" in result.stderr


def anchors_of(page):
    """The ids a link can name: the rows' <a id>, and the headings as GitHub spells them."""
    text = page.read_text()
    anchors = set(re.findall(r'<a id="([^"]+)"></a>', text))
    return anchors | {re.sub(r"[^a-z0-9 _-]", "", heading.lower()).replace(" ", "-")
                      for heading in re.findall(r"^#+ (.+)$", text, flags=re.M)}


@pytest.mark.parametrize("page", [PAGE, REPO_ROOT / "bench" / "results" / "HISTORY.md"], ids=lambda p: p.name)
def test_every_link_into_the_page_names_an_anchor(page):
    anchors = anchors_of(page)
    sources = [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").glob("*.md"))]
    links = [(source.name, anchor) for source in sources
             for anchor in re.findall(re.escape(page.name) + r"#([A-Za-z0-9._-]+)", source.read_text())]
    assert links, f"the README or docs/ link into {page.name}"
    missing = [(name, anchor) for name, anchor in links if anchor not in anchors]
    assert not missing, missing


def test_the_charts_are_drawn_from_the_records(tmp_path):
    pytest.importorskip("matplotlib")
    result = run(BENCH / "plot_benchmarks.py", tmp_path)
    assert result.returncode == 0, result.stderr
    for name in ("benchmarks-tokens-by-size.png", "benchmarks-gpus.png", "benchmarks-memory.png"):
        data = (tmp_path / name).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000, name
        assert f"images/{name}" in PAGE.read_text(), f"the page shows {name}"
