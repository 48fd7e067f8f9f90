"""`surogate export` files in llama.cpp itself (llama-cpp-python): run against the engine's own forward
(surogate.load(...).logits on the CPU, fp32): next-token logits of the f16 export within 1e-2 and
16 greedy tokens equal, for each architecture; and `--type q4_k_m` byte for byte against
llama-quantize's Q4_K_M (libllama's llama_model_quantize) of the f16 export. Skipped when llama_cpp
is not importable: building it from source takes 10+ minutes on 2 cores, so CI does not;
scripts/check_gguf_llama_cpp.sh installs it and runs this file."""
import gguf
import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

from conftest import run_surogate
from gguf_models import make_config, write_model

llama_cpp = pytest.importorskip("llama_cpp")

PROMPT = [17, 200, 33, 256, 71, 5, 190, 42, 99, 140, 3, 250]
CONTINUATION = 16
# (kind, config overrides): the seven architectures with their distinguishing features.
MODELS = {
    "llama": ("llama", dict(rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                          "high_freq_factor": 4.0, "original_max_position_embeddings": 32})),
    "mistral": ("mistral", dict(tie_word_embeddings=True)),
    "qwen2": ("qwen2", dict(tie_word_embeddings=True)),
    "qwen3": ("qwen3", dict()),
    "qwen2_moe": ("qwen2_moe", dict()),
    "qwen3_moe": ("qwen3_moe", dict()),
    "mixtral": ("mixtral", dict()),
}


def fp16_representable(folder):
    """Rounds the checkpoint's weights to fp16 values (kept as F32), so the f16 export holds exactly the
    weights the engine runs and the comparison measures the two forwards, not the rounding."""
    path = folder / "model.safetensors"
    weights = {name: values.astype(np.float16).astype(np.float32) for name, values in load_file(str(path)).items()}
    save_file(weights, str(path))


@pytest.mark.parametrize("name", sorted(MODELS))
def test_llama_cpp_runs_the_export_like_the_engine(surogate_bin, surogate_package, tmp_path, name):
    kind, overrides = MODELS[name]
    config = make_config(kind, layers=2, **overrides)
    model, _ = write_model(tmp_path / "model", config, seed=5)
    fp16_representable(model)
    result = run_surogate(surogate_bin, "export", "--model", model, "--output", tmp_path / "m.gguf", "--type", "f16")
    assert result.returncode == 0, result.stderr

    engine = surogate_package.module.load(model, seq_len=len(PROMPT) + CONTINUATION)
    llm = llama_cpp.Llama(model_path=str(tmp_path / "m.gguf"), n_ctx=64, n_batch=64, logits_all=True,
                          n_threads=2, verbose=False)
    llm.eval(PROMPT)
    ours = engine.logits([PROMPT])[0, :len(PROMPT)]
    theirs = np.asarray(llm.scores[:len(PROMPT)], dtype=np.float32)
    assert theirs.shape == ours.shape
    assert np.abs(theirs - ours).max() < 1e-2, np.abs(theirs - ours).max()

    sequence = list(PROMPT)
    for _ in range(CONTINUATION):
        sequence.append(int(np.argmax(engine.logits([sequence])[0, len(sequence) - 1])))
    llm.reset()
    generated = []
    for token in llm.generate(PROMPT, top_k=1, temp=0.0, reset=True):
        generated.append(int(token))
        if len(generated) == CONTINUATION:
            break
    assert generated == sequence[len(PROMPT):]


@pytest.mark.parametrize("name, overrides", [
    ("llama", dict(layers=8)), ("qwen2", dict(hidden=96, intermediate=192, layers=4)),
    ("qwen2_moe", dict(layers=8, moe_intermediate_size=96, shared_expert_intermediate_size=256)),
    ("mixtral", dict(layers=4))])
def test_q4_k_m_is_llama_quantizes(surogate_bin, tmp_path, name, overrides):
    kind, model_overrides = MODELS[name]
    settings = dict(hidden=256, intermediate=512)
    settings.update(overrides)
    model, _ = write_model(tmp_path / "model", make_config(kind, **settings, **model_overrides))
    for outtype in ("f16", "q4_k_m"):
        result = run_surogate(surogate_bin, "export", "--model", model, "--output", tmp_path / f"{outtype}.gguf",
                              "--type", outtype)
        assert result.returncode == 0, result.stderr
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = 15  # LLAMA_FTYPE_MOSTLY_Q4_K_M
    assert llama_cpp.llama_model_quantize(str(tmp_path / "f16.gguf").encode(), str(tmp_path / "reference.gguf").encode(),
                                          params) == 0
    reference = {t.name: t for t in gguf.GGUFReader(str(tmp_path / "reference.gguf")).tensors}
    ours = {t.name: t for t in gguf.GGUFReader(str(tmp_path / "q4_k_m.gguf")).tensors}
    assert sorted(reference) == sorted(ours)
    for tensor_name, tensor in reference.items():
        assert ours[tensor_name].tensor_type == tensor.tensor_type, tensor_name
        assert np.asarray(ours[tensor_name].data).tobytes() == np.asarray(tensor.data).tobytes(), tensor_name
