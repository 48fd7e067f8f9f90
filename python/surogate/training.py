"""surogate.train: a ``surogate sft`` / ``surogate pt`` job from Python.

The configuration goes through the engine's own loader, rules and pre-training checks (the same
C++ code as the CLI), so a bad option raises :class:`surogate.UserError` with the message the CLI
prints, naming the key. The engine runs with the GIL released; the callback is called on the
calling thread between steps. Ctrl-C (KeyboardInterrupt) is taken at the next step boundary: the
run writes a checkpoint of that step and the KeyboardInterrupt is raised again, so
``resume_from_checkpoint: true`` continues exactly there.
"""
from __future__ import annotations

import json
import os
import pathlib
from typing import Any, Callable, Dict, List, Mapping, Optional, Union

from surogate import _engine

ConfigLike = Union[str, "os.PathLike[str]", Mapping[str, Any]]
StepCallback = Callable[[Dict[str, Any]], None]

# Where a model defined in Python (surogate.dsl) is written as JSON IR for the engine.
DEFINITION_FILE = "model_definition.json"


def _json_default(value: Any) -> Any:
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    raise TypeError(f"configuration value {value!r} ({type(value).__name__}) is not a string, number, bool, "
                    "list or dict")


def _config_text(config: Mapping[str, Any]) -> str:
    """A dict as JSON text (JSON is YAML), one top-level option per line so that messages naming
    a line name the option's line."""
    lines = [f"{json.dumps(str(key))}: {json.dumps(value, default=_json_default)}" for key, value in config.items()]
    return "{\n" + ",\n".join(lines) + "\n}\n"


def _source(config: ConfigLike, overrides: Optional[Mapping[str, Any]]) -> "_engine.ConfigSource":
    source = _engine.ConfigSource()
    if isinstance(config, Mapping):
        source.text = _config_text(config)
        source.is_file = False
        source.label = "train(config)"
    elif isinstance(config, (str, os.PathLike)):
        source.text = os.fspath(config)
        source.is_file = True
    else:
        raise TypeError(f"config must be a YAML file path or a dict of options, not {type(config).__name__}")
    source.overrides = [
        f"{key}={value if isinstance(value, str) else json.dumps(value, default=_json_default)}"
        for key, value in (overrides or {}).items()
    ]
    return source


def _is_python_definition(value: Any) -> bool:
    from surogate import dsl

    return isinstance(value, dsl.ModelDefinition) or (
        isinstance(value, (str, os.PathLike)) and os.fspath(value).endswith(".py"))


def _write_definition(definition: Any, source: "_engine.ConfigSource", pretraining: bool) -> str:
    """Emits a DSL model for the run's micro-batch shape into output_dir; returns the file."""
    from surogate import dsl

    model = dsl.load_definition(definition)
    facts = _engine.run_facts(source, pretraining)
    ir = model.emit(facts["model"], batch=facts["batch"], seq=facts["sequence"])
    path = pathlib.Path(facts["output_dir"]) / DEFINITION_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(ir, indent=1) + "\n")
    return str(path)


def train(config: ConfigLike, callback: Optional[StepCallback] = None, *, pretraining: bool = False,
          overrides: Optional[Mapping[str, Any]] = None, model_definition: Any = None,
          run_name: Optional[str] = None) -> Dict[str, Any]:
    """Trains as ``surogate sft CONFIG`` (or ``surogate pt CONFIG`` with ``pretraining=True``).

    Args:
        config: a YAML file, or a dict with the same options (values: str, numbers, bools, lists,
            dicts, paths). Validated by the engine's rules: a bad option raises
            :class:`surogate.UserError` (a ``ValueError``) whose message names the key.
        callback: called with each step's metrics as they come, a dict with ``type`` "step"
            (``step``, ``epoch``, ``loss``, ``lr``, ``grad_norm``, ``tokens``, ``loss_tokens``,
            ``tokens_per_second``, ``step_seconds``) or "eval" (``step``, ``eval_loss``,
            ``eval_accuracy``, ``eval_tokens``, ``final``). An exception it raises stops the run
            (no checkpoint is written for that step) and is raised from ``train``.
        pretraining: run ``surogate pt`` (raw text datasets) instead of ``surogate sft``.
        overrides: options that replace the configuration's, as ``--key=value`` does on the CLI
            (``{"max_steps": 10, "lora.rank": 8}`` style keys: ``nested.key``).
        model_definition: the model's graph written with :mod:`surogate.dsl` (a model, or a ``.py``
            file defining one), emitted as JSON IR for this run's shape into
            ``output_dir/model_definition.json`` and trained from there. The option of the same
            name in ``config`` may also hold a JSON IR file, a DSL model or a ``.py`` file.
        run_name: names the log and report when the configuration sets no run_name (default: the
            YAML file's stem, or "run").

    Returns:
        The run's summary: ``steps``, ``first_step``, ``step_losses`` (this process's steps),
        ``eval_loss``, ``eval_accuracy``, ``initial_eval_loss``, ``seconds``, ``output_dir``,
        ``log_file``, ``report_file``, ``checkpoint`` (the last one written), ``stopped``.

    Raises:
        surogate.UserError: a problem with the configuration, the model folder or the data.
        KeyboardInterrupt: Ctrl-C; the run stopped at a step boundary with a checkpoint.
    """
    options = dict(config) if isinstance(config, Mapping) else config
    extra = dict(overrides or {})
    if isinstance(options, dict) and _is_python_definition(options.get("model_definition")):
        model_definition = options.pop("model_definition")
    if model_definition is not None:
        if not _is_python_definition(model_definition):
            extra["model_definition"] = os.fspath(model_definition)
        else:
            extra.pop("model_definition", None)
            extra["model_definition"] = _write_definition(model_definition, _source(options, extra), pretraining)
    source = _source(options, extra)
    if run_name is None:
        run_name = pathlib.Path(source.text).stem if source.is_file else "run"
    return _engine.train(source, pretraining, run_name, callback)


def resolved_config(config: ConfigLike, overrides: Optional[Mapping[str, Any]] = None) -> str:
    """The configuration with every default and implication applied, as YAML (what
    ``surogate sft --dry-run`` prints at its end); raises UserError like :func:`train`."""
    return _engine.resolve_config(_source(config, overrides))


def _options_help() -> str:
    required = ("model", "datasets")
    rows: List[str] = [f"    {name}: {'(required)' if name in required else default}"
                       for name, default in _engine.option_defaults()]
    return ("\nOptions (name: default; docs/configuration.md has types, meanings and constraints;\n"
            "``model`` and ``datasets`` are required):\n" + "\n".join(rows) + "\n")


train.__doc__ = (train.__doc__ or "") + _options_help()
