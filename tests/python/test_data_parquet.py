"""Surogate's own Parquet reader versus pyarrow: every codec, data page v1 and v2, dictionary and
plain encodings, nullable and nested columns (list<struct<role, content>>, list<string>), and
clear errors for unsupported features and damaged files."""
import json
import os
import pathlib
import subprocess

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from conftest import REPO_ROOT


@pytest.fixture(scope="session")
def dump_bin() -> pathlib.Path:
    build = pathlib.Path(os.environ.get("SUROGATE_BUILD_DIR", REPO_ROOT / "build"))
    path = build / "tests" / "data" / "data_parquet_dump"
    if not path.exists():
        pytest.fail(f"{path} not built: build the data_parquet_dump target first")
    return path


def read_with_surogate(dump_bin, path):
    result = subprocess.run([str(dump_bin), str(path)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    return [json.loads(line) for line in result.stdout.splitlines()]


def normalise(value):
    """pyarrow gives map columns as lists of (key, value) tuples; Surogate gives JSON objects."""
    if isinstance(value, dict):
        return {k: normalise(v) for k, v in value.items()}
    if isinstance(value, list):
        if value and all(isinstance(item, tuple) and len(item) == 2 for item in value):
            return {k: normalise(v) for k, v in value}
        return [normalise(v) for v in value]
    if isinstance(value, float):
        return round(value, 5)
    return value


def sample_table(rows=300):
    messages, tags, texts, ints, longs, floats, doubles, flags, maps = [], [], [], [], [], [], [], [], []
    for i in range(rows):
        turns = [{"role": "user", "content": f"question {i} é 漢字"}, {"role": "assistant", "content": f"answer {i}"}]
        if i % 7 == 0:
            turns = []
        if i % 11 == 0:
            turns = None
        if i % 5 == 0 and turns:
            turns.append({"role": "user", "content": None})
        messages.append(turns)
        tags.append(None if i % 13 == 0 else [f"t{j}" for j in range(i % 4)] + ([None] if i % 9 == 0 else []))
        texts.append(None if i % 3 == 0 else ("repeated" if i % 2 else f"text {i}\nline two"))
        ints.append(None if i % 4 == 0 else i - 150)
        longs.append(i * 10_000_000_000)
        floats.append(i * 0.5)
        doubles.append(None if i % 6 == 0 else i / 3.0)
        flags.append(i % 3 == 1)
        maps.append({"k": f"v{i}"} if i % 2 else None)
    return pa.table({
        "messages": pa.array(messages, pa.list_(pa.struct([("role", pa.string()), ("content", pa.string())]))),
        "tags": pa.array(tags, pa.list_(pa.string())),
        "text": pa.array(texts, pa.string()),
        "int32": pa.array(ints, pa.int32()),
        "int64": pa.array(longs, pa.int64()),
        "float": pa.array(floats, pa.float32()),
        "double": pa.array(doubles, pa.float64()),
        "flag": pa.array(flags, pa.bool_()),
        "meta": pa.array(maps, pa.map_(pa.string(), pa.string())),
    })


@pytest.mark.parametrize("compression", ["NONE", "SNAPPY", "GZIP", "ZSTD"])
@pytest.mark.parametrize("page_version", ["1.0", "2.0"])
@pytest.mark.parametrize("dictionary", [True, False])
def test_matches_pyarrow(tmp_path, dump_bin, compression, page_version, dictionary):
    table = sample_table()
    path = tmp_path / "t.parquet"
    pq.write_table(table, path, compression=compression, data_page_version=page_version, use_dictionary=dictionary,
                   row_group_size=64, data_page_size=512)
    expected = [normalise(row) for row in pq.read_table(path).to_pylist()]
    actual = [normalise(row) for row in read_with_surogate(dump_bin, path)]
    assert len(actual) == len(expected) == 300
    assert actual == expected


def test_conversation_column_reads_as_list_of_objects(tmp_path, dump_bin):
    table = pa.table({"conversations": [[{"from": "human", "value": "hi"}, {"from": "gpt", "value": "hello"}]]})
    path = tmp_path / "c.parquet"
    pq.write_table(table, path)
    assert read_with_surogate(dump_bin, path) == [
        {"conversations": [{"from": "human", "value": "hi"}, {"from": "gpt", "value": "hello"}]}]


def test_unsupported_codec_names_file_column_and_codec(tmp_path, dump_bin):
    path = tmp_path / "lz4.parquet"
    pq.write_table(pa.table({"text": ["a", "b"]}), path, compression="LZ4")
    result = subprocess.run([str(dump_bin), str(path)], capture_output=True, text=True)
    assert result.returncode == 2
    assert "lz4.parquet" in result.stderr and "'text'" in result.stderr and "LZ4" in result.stderr


def test_unsupported_encoding_is_named(tmp_path, dump_bin):
    path = tmp_path / "delta.parquet"
    pq.write_table(pa.table({"n": pa.array([1, 2, 3], pa.int64())}), path, use_dictionary=False,
                   column_encoding={"n": "DELTA_BINARY_PACKED"})
    result = subprocess.run([str(dump_bin), str(path)], capture_output=True, text=True)
    assert result.returncode == 2
    assert "'n'" in result.stderr and "DELTA_BINARY_PACKED" in result.stderr


@pytest.mark.parametrize("cut", [10, 100, 1000])
def test_truncated_file_is_a_clear_error(tmp_path, dump_bin, cut):
    path = tmp_path / "t.parquet"
    pq.write_table(sample_table(), path, compression="SNAPPY")
    data = path.read_bytes()
    path.write_bytes(data[: len(data) - cut])
    result = subprocess.run([str(dump_bin), str(path)], capture_output=True, text=True)
    assert result.returncode == 2, result.stderr
    assert "t.parquet" in result.stderr


def test_corrupted_pages_never_crash(tmp_path, dump_bin):
    path = tmp_path / "t.parquet"
    pq.write_table(sample_table(60), path, compression="NONE")
    data = bytearray(path.read_bytes())
    for offset in range(4, len(data) - 8, max(1, len(data) // 97)):
        damaged = bytearray(data)
        damaged[offset] ^= 0xFF
        path.write_bytes(bytes(damaged))
        result = subprocess.run([str(dump_bin), str(path)], capture_output=True, text=True)
        assert result.returncode in (0, 2), (offset, result.returncode, result.stderr)
