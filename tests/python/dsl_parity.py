"""Shared by the tests of the DSL examples written against transformers (test_dsl_gpt_neox.py,
test_dsl_phi3.py): a tiny random model saved with the quick start's tokenizer, the engine's loss
through a definition file, and both losses side by side."""
import shutil

ROWS, SEQ = 4, 64


def save_with_tokenizer(model, ex, folder):
    """model.save_pretrained(folder) with the quick start's tokenizer beside it; returns the folder."""
    model.save_pretrained(folder)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(ex / "model" / name, folder / name)
    return folder


def engine_loss(surogate, definition_file, folder, tmp_path, rows, labels):
    """The engine's fp32 CPU loss on the rows through the definition's IR for [ROWS, SEQ]."""
    import surogate.dsl as dsl
    ir = dsl.load_definition(definition_file).save(tmp_path / f"{definition_file.stem}_{folder.name}.json", folder,
                                                   batch=ROWS, seq=SEQ)
    return surogate.load(folder, batch_size=ROWS, seq_len=SEQ, model_definition=ir).loss(rows, labels)


def both_losses(surogate, definition_file, model_class, folder, tmp_path, rows, labels):
    """(engine loss, transformers' fp32 loss, transformers' model) on the same rows, printed."""
    import torch
    from test_dsl_olmo2 import transformers_loss

    reference_model = model_class.from_pretrained(folder, dtype=torch.float32).eval()
    reference = transformers_loss(reference_model, rows, labels)
    loss = engine_loss(surogate, definition_file, folder, tmp_path, rows, labels)
    print(f"{definition_file.stem} ({folder.name}): engine {loss!r}, transformers {reference!r}, "
          f"relative {abs(loss - reference) / reference:.3g}")
    return loss, reference, reference_model


def train_from_python(surogate, ex, folder, out, definition_file, steps, **options):
    """surogate.train on the quick start's data from `folder` through the definition file (which it
    emits for the run's shape); the loss falls by a tenth at least. Returns the run's summary."""
    from test_python_api import quickstart_options

    summary = surogate.train(quickstart_options(ex, out, model=str(folder), max_steps=steps, eval_steps=steps,
                                                save_steps=100, **options), model_definition=definition_file)
    assert summary["step_losses"][-1] < 0.9 * summary["step_losses"][0], summary["step_losses"]
    return summary
