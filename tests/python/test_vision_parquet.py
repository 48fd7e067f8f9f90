"""Vision-language rows read from a real Parquet file (docs/vision.md, "Image sources"): an
`images` column of HF datasets' image structs {bytes, path} (written here by pyarrow) gives the
same token ids and resized image in `surogate preview` as the same row in JSONL with the image by
path; a struct with only a path reads the file relative to the Parquet file; a struct whose bytes
do not decode stops the command with exit 2 and one error naming the row."""
import json
import shutil

import pytest

from conftest import run_surogate
from test_vision_data_cli import VISION, vision_folder

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

MESSAGES = [{"role": "user", "content": "<image>What is it?"}, {"role": "assistant", "content": "A photo."}]
IMAGE_STRUCT = pa.struct([("bytes", pa.binary()), ("path", pa.string())])


def preview(folder, model, data):
    config = folder / f"{data.name}.yaml"
    config.write_text(f"model: {model}\noutput_dir: {folder / 'out' / data.name}\nsequence_len: 256\n"
                      f"validation_split_ratio: 0\ndatasets:\n  - path: {data}\n    type: conversation\n")
    return config


def shown(stdout):
    return [line for line in stdout.splitlines() if line.startswith("ids: ") or "image(s)" in line]


def write_parquet(path, images):
    table = pa.table({"messages": [MESSAGES] * len(images),
                      "images": pa.array([[image] for image in images], type=pa.list_(IMAGE_STRUCT))})
    pq.write_table(table, path)


def test_parquet_image_structs_equal_the_rows_by_path(tmp_path, surogate_bin, tokenizers_dir):
    model = vision_folder(tmp_path, tokenizers_dir)
    shutil.copy(VISION / "photo.jpg", tmp_path / "photo.jpg")
    photo = (VISION / "photo.jpg").read_bytes()
    # The bytes win over the path (a path that does not exist here); a struct without bytes reads
    # its path, relative to the Parquet file.
    write_parquet(tmp_path / "rows.parquet", [{"bytes": photo, "path": "elsewhere/photo.jpg"},
                                              {"bytes": None, "path": "photo.jpg"}])
    jsonl = tmp_path / "rows.jsonl"
    jsonl.write_text(json.dumps({"messages": MESSAGES, "images": [str(VISION / "photo.jpg")]}) + "\n")
    by_path = run_surogate(surogate_bin, "preview", preview(tmp_path, model, jsonl), "-n", "1")
    by_struct = run_surogate(surogate_bin, "preview", preview(tmp_path, model, tmp_path / "rows.parquet"), "-n", "2")
    assert by_path.returncode == 0, by_path.stderr
    assert by_struct.returncode == 0, by_struct.stderr
    expected = shown(by_path.stdout)
    assert len(expected) == 2 and "151652 151655×12 151653" in expected[1], expected
    assert shown(by_struct.stdout) == expected * 2


def test_an_undecodable_struct_is_one_error_naming_the_row(tmp_path, surogate_bin, tokenizers_dir):
    model = vision_folder(tmp_path, tokenizers_dir)
    photo = (VISION / "photo.jpg").read_bytes()
    data = tmp_path / "rows.parquet"
    write_parquet(data, [{"bytes": photo, "path": "a.jpg"}, {"bytes": b"not an image", "path": "b.jpg"}])
    result = run_surogate(surogate_bin, "preview", preview(tmp_path, model, data), "-n", "2")
    assert result.returncode == 2, (result.returncode, result.stdout, result.stderr)
    errors = [line for line in result.stderr.splitlines() if "not a PNG, JPEG or WebP file" in line]
    assert len(errors) == 1, result.stderr
    assert str(data) in errors[0] and ("row 2" in errors[0] or ":2" in errors[0]), errors[0]
