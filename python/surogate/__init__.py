"""Surogate from Python: the same engine as the ``surogate`` command, as a library.

- :func:`train` runs a ``surogate sft`` / ``surogate pt`` job from a YAML file or a dict of the
  same options and returns its summary; a callback sees each step's metrics as they come.
- :func:`load` holds a model (and a PEFT adapter) in memory: loss and logits of a batch, and the
  weights as NumPy arrays or PyTorch tensors that share the engine's memory (DLPack, no copy).
- :mod:`surogate.dsl` writes a model's forward graph in Python and emits the JSON IR the engine
  trains from (the ``model_definition`` option).

PyTorch is optional: nothing here imports it unless asked for torch tensors. See docs/python.md.
"""
from surogate._nccl import load_the_wheels_nccl

load_the_wheels_nccl()  # before the engine loads the toolkit's NCCL: see _nccl.py

try:
    from surogate._engine import UserError, __version__, has_cuda  # noqa: E402
except ImportError as _missing:  # the source tree on PYTHONPATH without the extension module
    # surogate.dsl still works through the surogate command (surogate/dsl/_link.py); train and
    # load need the extension (pip install .; docs/python.md).
    class UserError(ValueError):
        """A problem the user can fix (the extension's UserError is a ValueError too)."""

    __version__ = "source"

    def _needs_the_extension(*_args, **_kwargs):
        raise ImportError(f"this needs surogate's extension module (pip install .): {_missing}")

    train = load = has_cuda = _needs_the_extension
    Model = None
else:
    from surogate.model import Model, load  # noqa: E402
    from surogate.training import train  # noqa: E402

__all__ = ["train", "load", "Model", "UserError", "has_cuda", "__version__"]
