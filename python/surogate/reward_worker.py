"""GRPO's reward worker: runs the user's reward functions for the engine, which does not link Python.

Started once per run as ``python -m surogate.reward_worker`` (src/rl/reward_worker.cpp) and kept
alive; it reads one JSON request per line on stdin and writes one JSON answer per line to the
stdout it was started with (the user's own prints go to stderr, so they cannot break the protocol).

Requests and answers:
  {"load": "rewards.py:correct_answer"}
      -> {"ok": true}   (the file is imported once, relative paths from the worker's folder)
  {"call": "rewards.py:correct_answer", "prompts": [...], "completions": [...],
   "completion_ids": [[...], ...], "columns": {"answer": [...], ...}}
      -> {"rewards": [1.0, 0.0, null, ...]}
Functions are called as TRL calls them: ``f(prompts=..., completions=..., completion_ids=...,
**columns)``, one value per completion: a number, or None (TRL's "not applicable", NaN for the
engine). Anything the user's code gets wrong is answered {"error": "<message>"}, which the engine
stops with (exit 2); the message names the function and, where it can, the row (0-based, also as "row"): when
the call raises, each row is called alone to find the first one that raises.
"""
import importlib.util
import json
import math
import os
import sys
import traceback

_modules = {}


class RewardError(Exception):
    """A mistake in the user's reward file or function, reported to the engine as is (with the row
    it happened on, when known, so the engine can name where that row's prompt came from)."""

    def __init__(self, message, row=None):
        super().__init__(message)
        self.row = row


def _load(spec):
    path, separator, name = spec.rpartition(":")
    if not separator or not path or not name:
        raise RewardError(f"reward function '{spec}': write it as FILE.py:FUNCTION")
    if not os.path.isfile(path):
        raise RewardError(f"reward function '{spec}': the file '{path}' does not exist")
    module = _modules.get(path)
    if module is None:
        module_spec = importlib.util.spec_from_file_location(f"surogate_rewards_{len(_modules)}", path)
        module = importlib.util.module_from_spec(module_spec)
        try:
            module_spec.loader.exec_module(module)
        except Exception as error:  # the user's file: any error is theirs
            raise RewardError(f"reward function '{spec}': importing '{path}' failed: {_describe(error)}") from error
        _modules[path] = module
    function = getattr(module, name, None)
    if not callable(function):
        raise RewardError(f"reward function '{spec}': '{path}' defines no function '{name}'")
    return function


def _describe(error):
    frames = traceback.extract_tb(error.__traceback__)
    where = f" ({frames[-1].filename}:{frames[-1].lineno})" if frames else ""
    return f"{type(error).__name__}: {error}{where}"


def _row(request, index):
    return {
        "prompts": [request["prompts"][index]],
        "completions": [request["completions"][index]],
        "completion_ids": [request["completion_ids"][index]],
        "columns": {key: [values[index]] for key, values in request["columns"].items()},
    }


def _invoke(function, request):
    return function(prompts=request["prompts"], completions=request["completions"],
                    completion_ids=request["completion_ids"], **request["columns"])


def _call(spec, request):
    function = _load(spec)
    try:
        values = _invoke(function, request)
    except Exception as error:
        for index in range(len(request["completions"])):
            try:
                _invoke(function, _row(request, index))
            except Exception as row_error:
                raise RewardError(f"reward function '{spec}' raised on row {index}: {_describe(row_error)}",
                                  index) from error
        raise RewardError(f"reward function '{spec}' raised: {_describe(error)}") from error
    try:
        values = list(values)
    except TypeError as error:
        raise RewardError(f"reward function '{spec}' returned {type(values).__name__}, not a list of numbers") from error
    expected = len(request["completions"])
    if len(values) != expected:
        raise RewardError(f"reward function '{spec}' returned {len(values)} rewards for {expected} completions "
                          "(one per completion)")
    rewards = []
    for index, value in enumerate(values):
        if value is None:
            rewards.append(None)
            continue
        try:
            number = float(value)
        except (TypeError, ValueError):
            number = None
        if number is None or isinstance(value, (str, bytes)) or math.isinf(number):
            raise RewardError(f"reward function '{spec}' returned {value!r} ({type(value).__name__}) on row {index}, "
                              "not a finite number or None", index)
        rewards.append(None if math.isnan(number) else number)
    return rewards


def _answer(request):
    if "load" in request:
        _load(request["load"])
        return {"ok": True}
    return {"rewards": _call(request["call"], request)}


def main():
    protocol = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)  # the user's print() lands on stderr
    sys.stdout = sys.stderr
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            answer = _answer(json.loads(line))
        except RewardError as error:
            answer = {"error": str(error), "row": error.row}
        except Exception as error:  # a request the engine got wrong: still answered, never a hang
            answer = {"error": f"reward worker: {_describe(error)}"}
        protocol.write(json.dumps(answer, allow_nan=False) + "\n")
        protocol.flush()


if __name__ == "__main__":
    main()
