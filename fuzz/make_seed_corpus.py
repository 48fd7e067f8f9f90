#!/usr/bin/env python3
"""Writes the seed corpus of fuzz_safetensors_header (fuzz/corpus/safetensors_header/).

Each file is a whole safetensors file image. valid-* files must parse; bad-* files must be
rejected with a UserError (tests/io/test_safetensors_corpus.cpp checks both in CI). Re-run
after editing: python3 fuzz/make_seed_corpus.py
"""
import json
import pathlib
import struct

OUT = pathlib.Path(__file__).resolve().parent / "corpus" / "safetensors_header"


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

if __name__ == "__main__":
    OUT.mkdir(parents=True, exist_ok=True)
    for name, content in CASES.items():
        (OUT / name).write_bytes(content)
    print(f"wrote {len(CASES)} files to {OUT}")
