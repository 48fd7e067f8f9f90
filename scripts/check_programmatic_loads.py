#!/usr/bin/env python3
"""A kernel launched programmatically (cuda/kernels/programmatic_launch.cuh) may start while the kernel
before it still runs, and reads that kernel's output only after wait_for_previous_grid(). A
non-coherent load (__ldg, or a const __restrict__ pointer the compiler may turn into one) promises
memory nothing writes while the kernel lives, so the compiler may schedule it above the wait: it did
in decode_gemv.cu at 8 rows a block (2026-11-30), and the captured decode step read the previous x.
So in every source that waits, each __ldg( and __restrict__ must be on a line saying why it is safe
with a `// read-only:` comment (a model parameter no kernel of the step writes). Prints each
unmarked one and exits 1 when there is one. tests/python/test_programmatic_loads.py runs it in CI."""
import pathlib
import re
import sys

NON_COHERENT = re.compile(r"__ldg\s*\(|__restrict__")
MARK = "// read-only:"


def unmarked_loads(root: pathlib.Path):
    """'path:line: text' of every non-coherent load in a source that waits for the previous grid."""
    for path in sorted(root.rglob("*")):
        if path.suffix not in {".cu", ".cuh", ".h", ".cpp"} or not path.is_file():
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        if "wait_for_previous_grid()" not in text or path.name == "programmatic_launch.cuh":
            continue
        for number, line in enumerate(text.splitlines(), start=1):
            code = line.split("//", 1)[0]
            if NON_COHERENT.search(code) and MARK not in line:
                yield f"{path.relative_to(root.parent)}:{number}: {line.strip()}"


def main() -> int:
    root = pathlib.Path(__file__).resolve().parent.parent / "src"
    found = list(unmarked_loads(root))
    for entry in found:
        print(f"{entry}: a non-coherent load in a programmatically launched kernel (mark a parameter's with {MARK!r})")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
