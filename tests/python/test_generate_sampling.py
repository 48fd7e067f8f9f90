"""Surogate's logits processors (src/generate/sampling.h) against transformers' own: random logits
and contexts through RepetitionPenaltyLogitsProcessor, TemperatureLogitsWarper, TopKLogitsWarper,
TopPLogitsWarper and MinPLogitsWarper in the order of transformers' _get_logits_processor, then
softmax; the C++ probe (tests/generate/sampling_probe.cpp) prints the same probabilities. Agreement
to 1e-6 (absolute, on probabilities; both compute the logits in float32)."""
import json
import pathlib
import subprocess

import pytest
import torch
from transformers.generation.logits_process import (
    LogitsProcessorList,
    MinPLogitsWarper,
    RepetitionPenaltyLogitsProcessor,
    TemperatureLogitsWarper,
    TopKLogitsWarper,
    TopPLogitsWarper,
)

from conftest import build_binary

TOLERANCE = 1e-6


@pytest.fixture(scope="session")
def probe_bin() -> pathlib.Path:
    return build_binary("tests/generate/generate_sampling_probe")


def transformers_probabilities(logits, context, options):
    """What transformers' generate() samples from (utils.py, _get_logits_processor and _sample)."""
    processors = LogitsProcessorList()
    if options["repetition_penalty"] != 1.0:
        processors.append(RepetitionPenaltyLogitsProcessor(options["repetition_penalty"]))
    if options["do_sample"]:
        if options["temperature"] != 1.0:
            processors.append(TemperatureLogitsWarper(options["temperature"]))
        if options["top_k"] != 0:
            processors.append(TopKLogitsWarper(top_k=options["top_k"]))
        if options["top_p"] < 1.0:
            processors.append(TopPLogitsWarper(top_p=options["top_p"]))
        if options["min_p"] > 0.0:
            processors.append(MinPLogitsWarper(min_p=options["min_p"]))
    input_ids = torch.tensor([context], dtype=torch.long)
    scores = processors(input_ids, torch.tensor([logits], dtype=torch.float32))
    return torch.softmax(scores.double(), dim=-1)[0].tolist()


def surogate_probabilities(probe_bin, logits, context, options):
    request = json.dumps({"logits": logits, "context": context, "options": options})
    result = subprocess.run([str(probe_bin)], input=request, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)["probabilities"]


CASES = [
    dict(do_sample=False, temperature=1.0, top_k=50, top_p=1.0, min_p=0.0, repetition_penalty=1.3),
    dict(do_sample=True, temperature=0.7, top_k=0, top_p=1.0, min_p=0.0, repetition_penalty=1.0),
    dict(do_sample=True, temperature=1.0, top_k=5, top_p=1.0, min_p=0.0, repetition_penalty=1.0),
    dict(do_sample=True, temperature=1.0, top_k=0, top_p=0.9, min_p=0.0, repetition_penalty=1.0),
    dict(do_sample=True, temperature=1.0, top_k=0, top_p=1.0, min_p=0.1, repetition_penalty=1.0),
    dict(do_sample=True, temperature=0.6, top_k=20, top_p=0.95, min_p=0.0, repetition_penalty=1.0),
    dict(do_sample=True, temperature=1.3, top_k=40, top_p=0.8, min_p=0.05, repetition_penalty=1.2),
    dict(do_sample=True, temperature=1.5, top_k=0, top_p=0.9, min_p=0.05, repetition_penalty=0.8),
    dict(do_sample=True, temperature=2.0, top_k=50, top_p=1.0, min_p=0.0, repetition_penalty=1.5),
]


@pytest.mark.parametrize("case", range(len(CASES)))
def test_processed_distribution_matches_transformers(probe_bin, case):
    options = CASES[case]
    generator = torch.Generator().manual_seed(1000 + case)
    for trial in range(5):
        vocab = [7, 64, 300, 1000, 5000][trial]
        logits = (torch.randn(vocab, generator=generator) * 3).tolist()
        context = torch.randint(0, vocab, (12,), generator=generator).tolist()
        expected = transformers_probabilities(logits, context, options)
        actual = surogate_probabilities(probe_bin, logits, context, options)
        assert len(actual) == vocab
        worst = max(abs(a - e) for a, e in zip(actual, expected))
        assert worst <= TOLERANCE, f"case {case}, vocab {vocab}: differs by {worst}"
        # The same tokens are filtered: a probability is 0 in both or in neither.
        assert [a == 0.0 for a in actual] == [e == 0.0 for e in expected], f"case {case}, vocab {vocab}"


def test_probe_rejects_bad_options(probe_bin):
    request = json.dumps({"logits": [1.0, 2.0], "context": [], "options": {"top_p": 0}})
    result = subprocess.run([str(probe_bin)], input=request, capture_output=True, text=True)
    assert result.returncode == 2
    assert "top_p must be in (0, 1]" in result.stderr
