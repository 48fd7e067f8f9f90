#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz targets (fuzz/corpus/<target without fuzz_>/).

safetensors_header: each file is a whole safetensors file image. valid-* files must parse; bad-*
files must be rejected with a UserError (tests/io/test_safetensors_corpus.cpp checks both in CI).
training_config, chat_template, dataset_row: seed-* files taken from the repository's own inputs
(example configs and datasets, the built-in chat templates, the YAML and template literals of the
unit tests). Files named bad-* in those folders are minimised fuzzer findings, written by hand and
replayed by tests/*/test_*_corpus.cpp; this script never deletes them.
tokenizer_json: small real and hand-written tokenizer.json files and the bad-* files, written by
fuzz/tokenizer_seeds.py (which says how the real tokenizers are trimmed). Re-run after editing:
python3 fuzz/make_seed_corpus.py
"""
import hashlib
import json
import pathlib
import re
import struct

from tokenizer_seeds import BAD as TOKENIZER_BAD, tokenizer_json_seeds

FUZZ = pathlib.Path(__file__).resolve().parent
REPO = FUZZ.parent
OUT = FUZZ / "corpus" / "safetensors_header"
MAX_SEED_BYTES = 4096  # scripts/fuzz.sh runs with -max_len=4096


def image(header, data=b"", length=None):
    text = header if isinstance(header, (bytes, str)) else json.dumps(header)
    raw = text.encode() if isinstance(text, str) else text
    return struct.pack("<Q", len(raw) if length is None else length) + raw + data


def entry(dtype, shape, begin, end):
    return {"dtype": dtype, "shape": shape, "data_offsets": [begin, end]}


CASES = {
    "valid-empty": image({}),
    "valid-one-f32": image({"w": entry("F32", [2], 0, 8)}, b"\0" * 8),
    "valid-metadata-and-padding": image('{"__metadata__":{"format":"pt"},"a":{"dtype":"U8","shape":[1],'
                                        '"data_offsets":[0,1]}}   ', b"\x07"),
    "valid-mixed": image({"a": entry("BF16", [2, 2], 0, 8), "b": entry("I64", [1], 8, 16),
                          "c": entry("BOOL", [0], 16, 16), "d": entry("F8_E4M3", [3], 16, 19)}, b"\1" * 19),
    "bad-short": b"\x01\x02\x03",
    "bad-length-beyond-file": image("{}", length=1000),
    "bad-length-huge": image("{}", length=1 << 62),
    "bad-not-json": image("{\"a\":"),
    "bad-not-object": image("[]"),
    "bad-entry-number": image({"a": 1}),
    "bad-unknown-dtype": image({"a": entry("F4", [1], 0, 1)}, b"\0"),
    "bad-negative-shape": image({"a": entry("U8", [-1], 0, 1)}, b"\0"),
    "bad-shape-overflow": image({"a": entry("F32", [1 << 40, 1 << 40], 0, 4)}, b"\0" * 4),
    "bad-offsets-one": image({"a": {"dtype": "U8", "shape": [1], "data_offsets": [0]}}, b"\0"),
    "bad-offsets-reversed": image({"a": entry("U8", [0], 1, 0)}, b"\0"),
    "bad-offsets-beyond": image({"a": entry("U8", [4], 0, 4)}, b"\0"),
    "bad-size-mismatch": image({"a": entry("F32", [1], 0, 2)}, b"\0\0"),
    "bad-overlap": image({"a": entry("U8", [2], 0, 2), "b": entry("U8", [2], 1, 3)}, b"\0" * 3),
    "bad-gap": image({"a": entry("U8", [1], 0, 1), "b": entry("U8", [1], 2, 3)}, b"\0" * 3),
    "bad-trailing-bytes": image({"a": entry("U8", [1], 0, 1)}, b"\0" * 4),
    "bad-duplicate": image('{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},'
                           '"a":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}}', b"\0\0"),
    "bad-metadata-number": image({"__metadata__": {"k": 3}}),
    "bad-shape-string": image({"a": {"dtype": "U8", "shape": "1", "data_offsets": [0, 1]}}, b"\0"),
    "bad-dtype-number": image({"a": {"dtype": 4, "shape": [1], "data_offsets": [0, 1]}}, b"\0"),
    "bad-invalid-utf8": image(b'{"\xff\xfe":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}', b"\0"),
    "bad-missing-offsets": image({"a": {"dtype": "U8", "shape": [1]}}, b"\0"),
}


def string_literals(path):
    """The C++ string literals of a source file (raw strings and ordinary ones), decoded."""
    text = path.read_text()
    literals = [m.group(2) for m in re.finditer(r'R"(\w*)\((.*?)\)\1"', text, re.S)]
    for m in re.finditer(r'(?<![R\w])"((?:[^"\\\n]|\\.)*)"', text):
        literals.append(m.group(1).encode().decode("unicode_escape"))
    return literals


def named_seeds(contents):
    """seed-<short hash> names, so re-running keeps names stable."""
    return {"seed-" + hashlib.sha1(c.encode()).hexdigest()[:10]: c for c in contents if 0 < len(c.encode()) <= MAX_SEED_BYTES}


def training_config_seeds():
    contents = [p.read_text() for p in sorted(REPO.glob("examples/*/*.yaml"))]
    for source in sorted(REPO.glob("tests/config/*.cpp")) + [REPO / "tests/config/config_test_util.h"]:
        contents += [s for s in string_literals(source) if s.startswith("model:")]
    return named_seeds(contents)


def chat_template_seeds():
    contents = string_literals(REPO / "src/chat_template/builtin_templates.cpp")
    for source in sorted(REPO.glob("tests/chat_template/*.cpp")):
        contents += [s for s in string_literals(source) if "{{" in s or "{%" in s]
    return named_seeds(c for c in contents if "{{" in c or "{%" in c)


def dataset_row_seeds():
    # The first byte picks dataset type and options (fuzz/fuzz_dataset_row.cpp): 3 = auto,
    # 1 = instruction, 2 = conversation, 0 = text, +4 extra fields, +8 ShareGPT, +64 hermes agent.
    rows = [line for line in (REPO / "examples/tool_calling/train.jsonl").read_text().splitlines() if line.strip()]
    rows += [
        json.dumps({"text": "The quick brown fox."}),
        json.dumps({"instruction": "Add", "input": "2 and 2", "output": "4", "system": "Be brief."}),
        json.dumps({"messages": [{"role": "system", "content": "Hi"}, {"role": "user", "content": "2+2?"},
                                 {"role": "assistant", "content": "4"}]}),
        json.dumps({"conversations": [{"from": "human", "value": "2+2?"}, {"from": "gpt", "value": "4"}]}),
    ]
    contents = []
    for row in rows:
        for choice in (3, 2 + 4, 2 + 64, 1 + 4, 0, 3 + 8):
            contents.append(chr(choice) + row)
    return named_seeds(contents)


def write_seeds(folder, seeds):
    folder.mkdir(parents=True, exist_ok=True)
    for stale in folder.glob("seed-*"):
        stale.unlink()
    for name, content in seeds.items():
        (folder / name).write_bytes(content if isinstance(content, bytes) else content.encode())
    print(f"wrote {len(seeds)} files to {folder}")


if __name__ == "__main__":
    OUT.mkdir(parents=True, exist_ok=True)
    for name, content in CASES.items():
        (OUT / name).write_bytes(content)
    print(f"wrote {len(CASES)} files to {OUT}")
    write_seeds(FUZZ / "corpus" / "training_config", training_config_seeds())
    write_seeds(FUZZ / "corpus" / "chat_template", chat_template_seeds())
    write_seeds(FUZZ / "corpus" / "dataset_row", dataset_row_seeds())
    write_seeds(FUZZ / "corpus" / "tokenizer_json", tokenizer_json_seeds(REPO))
    for name, content in TOKENIZER_BAD.items():
        (FUZZ / "corpus" / "tokenizer_json" / name).write_bytes(content if isinstance(content, bytes) else content.encode())
