#!/usr/bin/env python3
"""The house is layered: a module of src/ includes only modules above it in LAYERS (the order of
docs/contributing.md's layout table), never one below. Prints each upward include and exits 1 when
there is one. tests/python/test_layering.py runs it in CI."""
import pathlib
import re
import sys

# Top to bottom. Modules on one line share a layer (neither includes the other).
LAYERS = [
    ["core"],
    ["quant", "config", "io", "tokenizer", "chat_template"],
    ["vision"],
    ["cuda"],
    ["graph"],
    ["ops"],
    ["compiler"],
    ["runtime"],
    ["models"],
    ["data", "generate"],
    ["serve", "rl"],
    ["distributed"],
    ["train"],
    ["gguf"],
    ["cli"],
]
RANK = {module: index for index, layer in enumerate(LAYERS) for module in layer}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([a-z_]+)/')


def upward_includes(src: pathlib.Path):
    for path in sorted(src.rglob("*")):
        if path.suffix not in {".h", ".cpp", ".cu", ".cuh", ".in"} or not path.is_file():
            continue
        module = path.relative_to(src).parts[0]
        if module not in RANK:
            continue
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            match = INCLUDE.match(line)
            if match and match.group(1) in RANK and match.group(1) != module:
                if RANK[match.group(1)] >= RANK[module]:
                    yield f"{path.relative_to(src.parent)}:{number}: {module} includes {match.group(1)}/ (not above it)"


def main() -> int:
    src = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).resolve().parent.parent / "src")
    unknown = sorted(p.name for p in src.iterdir() if p.is_dir() and p.name not in RANK)
    problems = list(upward_includes(src))
    for module in unknown:
        problems.append(f"src/{module}/: not in scripts/check_layering.py's LAYERS (add it where it belongs)")
    for problem in problems:
        print(problem)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
