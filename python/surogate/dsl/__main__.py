"""``python -m surogate.dsl MODEL.py --model DIR --batch B --seq T [-o FILE]``: writes the JSON IR of
a model written in the DSL (``MODEL.py`` defining one model, or ``MODEL.py:NAME``; ``decoder`` for
the built-in Llama family) for a model folder and micro-batch shape, for ``model_definition:`` in a
YAML configuration (B = per_device_train_batch_size, T = sequence_len) or ``surogate eval --ir``.
A definition that does not fit (a weight the checkpoint lacks, a shape mismatch, an op the engine
does not have) exits 2 with the line of the file. Works with ``PYTHONPATH=python`` and a built
``surogate`` command alone (surogate/dsl/_link.py)."""
import argparse
import json
import sys

from surogate import UserError
from surogate.dsl import decoder, load_definition


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m surogate.dsl", description=__doc__)
    parser.add_argument("definition", help="MODEL.py, MODEL.py:NAME, or 'decoder' (the built-in Llama family)")
    parser.add_argument("--model", required=True, help="HF model folder (its config.json is read)")
    parser.add_argument("--batch", type=int, default=1, help="micro-batch rows B")
    parser.add_argument("--seq", type=int, default=128, help="tokens per row T")
    parser.add_argument("--lmhead-chunks", type=int, default=1)
    parser.add_argument("--output", "-o", help="write here instead of stdout")
    args = parser.parse_args(argv)
    try:
        definition = decoder if args.definition == "decoder" else load_definition(args.definition)
        ir = definition.emit(args.model, args.batch, args.seq, args.lmhead_chunks)
    except (UserError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    text = json.dumps(ir, indent=1) + "\n"
    if args.output:
        with open(args.output, "w") as out:
            out.write(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
