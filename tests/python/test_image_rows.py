"""data/image_rows.h against the live oracle: transformers' Qwen2VLProcessor (chat template,
<|image_pad|> expansion) and Qwen2VLModel.get_rope_index on random conversation rows with images
of random sizes, modes and formats, in the three row layouts (HF content parts with paths,
ms-swift <image> placeholders with an images column, parts taking the images column), one to
three turns, images in user and assistant turns. The rendered text and grids must be equal, the
input ids too unless the engine reports that its span-wise tokenization differs, the M-RoPE
position ids equal get_rope_index's on the engine's ids; image tokens carry no loss. tests/data/image_rows_tool runs the
engine's side; tests/data/test_image_rows.cpp checks the committed fixtures without Python."""
import json
import subprocess

import numpy as np
import pytest

from conftest import REPO_ROOT, build_binary, load_script

PIL = pytest.importorskip("PIL")
torch = pytest.importorskip("torch")
pytest.importorskip("transformers.models.qwen2_vl.image_processing_pil_qwen2_vl")
import PIL.Image  # noqa: E402

fixtures = load_script("make_vision_row_fixtures")

PREPROCESSOR = REPO_ROOT / "tests" / "fixtures" / "vision" / "qwen2_5_vl"
IMAGE_PAD = 151655
WORDS = ["what", "is", "in", "this", "picture", "the", "grey", "cat", "sits", "here", "é", "数据", "\n", "  ", "!"]


def random_image(rng, folder, index):
    height, width = (int(v) for v in rng.integers(8, 300, size=2))
    mode = ["RGB", "RGBA", "L"][index % 3]
    channels = {"RGB": 3, "RGBA": 4, "L": 1}[mode]
    data = rng.integers(0, 256, size=(height, width, channels), dtype=np.uint8)
    image = PIL.Image.fromarray(data.squeeze(-1) if channels == 1 else data, mode)
    suffix = ".jpg" if mode != "RGBA" and index % 2 else ".png"
    path = folder / f"image_{index}{suffix}"
    image.save(path)
    return path.name


def random_text(rng):
    return " ".join(str(rng.choice(WORDS)) for _ in range(int(rng.integers(1, 8))))


def random_row(rng, folder, index):
    layout = index % 3
    turns = int(rng.integers(1, 4))
    messages, column = [], []
    counter = [0]

    def image():
        counter[0] += 1
        return random_image(rng, folder, index * 10 + counter[0])

    for turn in range(turns):
        for role in ("user", "assistant"):
            count = int(rng.integers(0, 3)) if role == "user" else int(rng.integers(0, 5) == 0)
            if layout == 1:  # ms-swift
                pieces = [random_text(rng) for _ in range(count + 1)]
                content = "<image>".join(pieces)
                column += [image() for _ in range(count)]
            else:
                content = [{"type": "text", "text": random_text(rng)}]
                for _ in range(count):
                    position = int(rng.integers(0, len(content) + 1))
                    if layout == 0:
                        part = {"type": "image", "image": image()}
                    else:
                        part = {"type": "image"}
                    content.insert(position, part)
                if layout == 2:  # the column in the order the parts appear
                    column += [image() for part in content if part["type"] == "image"]
            messages.append({"role": role, "content": content})
    row = {"messages": messages}
    if column:
        row["images"] = column
    return row


def run_tool(rows, folder, tokenizers_dir):
    """The engine's output for `rows` (written to folder/rows.jsonl, images relative to it)."""
    tool = build_binary("tests/data/image_rows_tool")
    rows_file = folder / "rows.jsonl"
    rows_file.write_text("".join(json.dumps(row) + "\n" for row in rows))
    template = folder / "qwen2_vl.jinja"
    template.write_text(fixtures.TEMPLATE)
    result = subprocess.run([str(tool), str(tokenizers_dir / "qwen3"), str(template), str(PREPROCESSOR),
                             str(rows_file)], capture_output=True, text=True, check=True)
    return [json.loads(line) for line in result.stdout.splitlines()]


def test_random_rows_equal_transformers(tmp_path, tokenizers_dir):
    rng = np.random.default_rng(41)
    rows = [random_row(rng, tmp_path, index) for index in range(24)]
    engine = run_tool(rows, tmp_path, tokenizers_dir)
    assert len(engine) == len(rows)
    processor = fixtures.make_processor(PREPROCESSOR)
    model = fixtures.make_model()
    images_seen, exact = 0, 0
    for index, (row, ours) in enumerate(zip(rows, engine)):
        assert "error" not in ours, (index, ours)
        expected = fixtures.transformers_row(processor, model, row, tmp_path)
        assert ours["text"] == expected["text"], index
        assert ours["grid_thw"] == expected["image_grid_thw"], index
        # The loss mask needs the text tokenized span by span; where a turn boundary splits what
        # one token would cover ("\n" + "\n" for "\n\n"), the engine says so
        # (tokenization_differs, as for text conversations) and its ids differ from the
        # processor's, which tokenizes the whole text.
        if ours["tokenization_differs"]:
            assert ours["input_ids"] != expected["input_ids"], index
        else:
            assert ours["input_ids"] == expected["input_ids"], index
            exact += 1
        # Positions: get_rope_index on the engine's own ids.
        ids = torch.tensor([ours["input_ids"]])
        if ours["grid_thw"]:
            positions, _ = model.get_rope_index(ids, (ids == IMAGE_PAD).int(),
                                                image_grid_thw=torch.tensor(ours["grid_thw"]))
            assert ours["position_ids"] == positions[:, 0].tolist(), index
        else:
            assert ours["position_ids"] == [list(range(ids.shape[1]))] * 3, index
        assert all(label == -100 for token, label in zip(ours["input_ids"], ours["labels"]) if token == IMAGE_PAD)
        images_seen += len(ours["grid_thw"])
    assert images_seen > 20
    assert exact >= len(rows) // 2


def test_a_bad_row_is_one_error_naming_row_and_file(tmp_path, tokenizers_dir):
    (tmp_path / "cut.png").write_bytes(b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0")
    rows = [{"messages": [{"role": "user", "content": "<image>hi"}, {"role": "assistant", "content": "x"}],
             "images": ["cut.png"]},
            {"messages": [{"role": "user", "content": "<image><image>"}, {"role": "assistant", "content": "x"}],
             "images": ["cut.png"]}]
    first, second = (result["error"] for result in run_tool(rows, tmp_path, tokenizers_dir))
    rows_file = tmp_path / "rows.jsonl"
    assert f"{rows_file}:1" in first and "cut.png" in first
    assert f"{rows_file}:2" in second and "more image placeholders than the 1 image of 'images'" in second
