"""The engine the DSL asks for its ops, shape rules and model facts (models/dsl_queries.h): the
extension module ``surogate._engine`` when it is installed (``pip install .``), else the
``surogate`` command (``surogate ir --dsl-queries``, one process kept open for the session), found
as ``$SUROGATE_BIN``, ``surogate`` on the PATH, or ``build/surogate`` of this source tree. So
``PYTHONPATH=python python -m surogate.dsl ...`` works with a built CLI alone (docs/python.md).
"""
from __future__ import annotations

import atexit
import json
import os
import pathlib
import shutil
import subprocess
from typing import Any, List, Optional

from surogate import UserError

try:
    from surogate import _engine as _extension
except ImportError:  # the source tree without the extension module
    _extension = None


def _executable(path: Optional[str]) -> bool:
    return bool(path) and os.path.isfile(path) and os.access(path, os.X_OK)


def cli_binary() -> Optional[str]:
    """The surogate command the DSL would ask: $SUROGATE_BIN (when set, that one or none), surogate
    on the PATH, or build/surogate of this source tree."""
    chosen = os.environ.get("SUROGATE_BIN")
    if chosen:
        return chosen if _executable(chosen) else None
    candidates = [shutil.which("surogate"), str(pathlib.Path(__file__).resolve().parents[3] / "build" / "surogate")]
    return next((c for c in candidates if _executable(c)), None)


class CliEngine:
    """The extension's DSL functions, answered by ``surogate ir --dsl-queries`` over a pipe."""

    def __init__(self) -> None:
        self._process: Optional[subprocess.Popen] = None

    def _ask(self, query: str, *args: Any) -> Any:
        if self._process is None or self._process.poll() is not None:
            binary = cli_binary()
            if binary is None:
                chosen = os.environ.get("SUROGATE_BIN")
                problem = f"SUROGATE_BIN={chosen} is not an executable" if chosen else "no surogate command found"
                raise UserError(f"surogate.dsl needs the engine and {problem}: install the package (pip install .), "
                                f"or build the surogate command and set SUROGATE_BIN to it (docs/python.md)")
            self._process = subprocess.Popen([binary, "ir", "--dsl-queries"], stdin=subprocess.PIPE,
                                             stdout=subprocess.PIPE, text=True)
            atexit.register(self.close)
        self._process.stdin.write(json.dumps({"query": query, "args": list(args)}) + "\n")
        self._process.stdin.flush()
        line = self._process.stdout.readline()
        if not line:
            raise UserError(f"surogate ir --dsl-queries ({cli_binary()}) stopped without answering '{query}'")
        answer = json.loads(line)
        if "error" in answer:
            raise UserError(answer["error"])
        return answer["result"]

    def close(self) -> None:
        if self._process is not None and self._process.poll() is None:
            self._process.stdin.close()
            self._process.wait()

    def ops(self) -> List[dict]:
        return self._ask("ops")

    def infer(self, op: str, where: str, inputs: list, attrs: dict) -> list:
        return self._ask("infer", op, where, inputs, attrs)

    def model_facts(self, model_dir: str) -> dict:
        return self._ask("model_facts", model_dir)

    def rope_attributes(self, model_dir: str, seq: int) -> dict:
        return self._ask("rope_attributes", model_dir, seq)

    def parameter_table(self, model_dir: str) -> list:
        return self._ask("parameter_table", model_dir)

    def verify_ir(self, text: str) -> str:
        return self._ask("verify_ir", text)


engine = _extension if _extension is not None else CliEngine()
