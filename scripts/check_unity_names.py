#!/usr/bin/env python3
"""Names a module's anonymous namespaces define twice (SUROGATE_UNITY_BUILD).

With the unity build a module's sources are compiled in batches of 8 concatenated files, and which
files share a batch shifts whenever a file is added: two files that each define `trim` in an
anonymous namespace compile today and fail with "redefinition" after an unrelated file is added.
So the rule (docs/contributing.md) is module-wide: a name defined at the top level of an anonymous
namespace — a function, variable, type or alias — is defined there by one file of its module only.
Overloads count too (they can make calls ambiguous once the files share a batch). Allowed: the
same namespace alias or using-declaration, and the same `using X = Y;` alias, in several files.
Prints `module name file file...` per duplicate and exits 1 when there is one.
Sources that do not take part in the unity build (src/ops/defs/) are skipped."""
import collections
import pathlib
import re
import sys

SOURCE_ROOT = pathlib.Path(__file__).resolve().parents[1] / "src"
SKIPPED = ("ops/defs/",)  # SKIP_UNITY_BUILD_INCLUSION in src/ops/CMakeLists.txt

TYPE = re.compile(r"^(?:template\s*<[^>]*>\s*)?(?:struct|class|enum(?:\s+class)?|union)\s+(\w+)")
ALIAS = re.compile(r"^using\s+(\w+)\s*=\s*(.+?);")
VARIABLE = re.compile(r"^(?:constexpr|const|static|inline|thread_local)\b[^=(;{]*?\b(\w+)\s*(?:=|\[|\{|;)")
FUNCTION = re.compile(r"^(?!return\b|else\b|case\b|default\b|using\b|namespace\b|template\b)"
                      r"[A-Za-z_][\w:<>,\s\*&]*?[\s\*&](\w+)\s*\(")
BARE_VARIABLE = re.compile(r"^[A-Za-z_][\w:<>,\s\*&]*?\s(\w+)(?:\[[^\]]*\])*\s*(?:=|;|\{)")


def top_level_names(path):
    """(name, key) per top-level definition inside `namespace {` ... `}  // namespace` blocks;
    `key` tells identical aliases apart from real duplicates."""
    inside = False
    for line in path.read_text().splitlines():
        if re.match(r"^namespace\s*\{", line):
            inside = True
            continue
        if inside and re.match(r"^\}\s*//\s*namespace\s*$", line):
            inside = False
            continue
        if not inside or not line or line[0] in " \t}#/" or line.startswith(("namespace ", "using namespace")):
            continue
        if re.match(r"^using\s+[\w:]+::\w+\s*;", line):
            continue
        if line.startswith("template"):
            line = re.sub(r"^template\s*<[^>]*>\s*", "", line)
            if not line:
                continue
        alias = ALIAS.match(line)
        if alias:
            yield alias.group(1), alias.group(2).strip()
            continue
        for pattern in (TYPE, VARIABLE, FUNCTION, BARE_VARIABLE):
            match = pattern.match(line)
            if match:
                yield match.group(1), None
                break


def duplicates(root=SOURCE_ROOT):
    found = []
    for module in sorted(p for p in root.iterdir() if p.is_dir()):
        definitions = collections.defaultdict(lambda: collections.defaultdict(set))  # name -> key -> files
        for path in sorted(module.rglob("*.cpp")):  # CMake batches C++ only; .cu files compile alone
            relative = path.relative_to(root).as_posix()
            if any(relative.startswith(skip) for skip in SKIPPED):
                continue
            for name, key in top_level_names(path):
                definitions[name][key].add(relative)
        for name, by_key in sorted(definitions.items()):
            files = sorted(set().union(*by_key.values()))
            identical_aliases = len(by_key) == 1 and next(iter(by_key)) is not None
            if len(files) > 1 and not identical_aliases:
                found.append((module.name, name, files))
    return found


def main():
    problems = duplicates()
    for module, name, files in problems:
        print(f"{module}: '{name}' is defined in the anonymous namespaces of {', '.join(files)}; rename all but one "
              f"(a unity batch holding both would fail with a redefinition)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
