#!/usr/bin/env python3
"""Writes a plain-text JSONL dataset of real English prose for loss-curve runs (the GPU machine
reaches no dataset hub, so the text comes from what every Python installation carries): the
Python reference's help topics (pydoc_data.topics, the language reference's prose) and the
docstrings of every module, class and function of the standard library (read with `ast`, not
imported), one document per topic or module, in sorted order. Deterministic for one Python
version; the records name it. About 2 M characters (0.5 M Qwen3 tokens): 460 documents with Python 3.11.7, 396 with 3.12.3.

  python3 bench/cli/make_real_text.py OUTPUT.jsonl [MIN_CHARACTERS]

Documents shorter than MIN_CHARACTERS (200) are left out. Prints the document and character
counts and the Python version.
"""
import ast
import json
import pathlib
import sys
import sysconfig


def stdlib_documents(min_characters: int):
    root = pathlib.Path(sysconfig.get_paths()["stdlib"])
    for path in sorted(root.rglob("*.py")):
        relative = path.relative_to(root)
        if any(part in ("test", "tests", "idlelib", "site-packages", "lib2to3") for part in relative.parts):
            continue
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except (SyntaxError, UnicodeDecodeError, ValueError):
            continue
        pieces = []
        for node in [tree, *ast.walk(tree)]:
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                text = ast.get_docstring(node)
                if text and text not in pieces:
                    pieces.append(text)
        document = "\n\n".join(pieces)
        if len(document) >= min_characters:
            yield document


def main() -> None:
    out = sys.argv[1]
    min_characters = int(sys.argv[2]) if len(sys.argv) > 2 else 200
    from pydoc_data.topics import topics

    documents = [topics[name] for name in sorted(topics) if len(topics[name]) >= min_characters]
    documents += list(stdlib_documents(min_characters))
    with open(out, "w") as file:
        for document in documents:
            file.write(json.dumps({"text": document}) + "\n")
    characters = sum(len(d) for d in documents)
    print(f"{out}: {len(documents)} documents, {characters} characters (Python {sys.version.split()[0]})")


if __name__ == "__main__":
    main()
