#!/usr/bin/env python3
"""transformers' two ways of answering many requests on one GPU, on the same folder and prompts as
bench/serve_throughput.sh: `generate_batch` (continuous batching over a paged cache, where this
transformers has it) and plain `generate` on the whole padded batch; greedy, bf16, every request
made to produce NEW tokens (min_new_tokens). Prints one JSON line per engine: output tokens/s over
the wall time of the batch (after one warm-up run).

  python3 bench/peers/hf_generate_batch.py MODEL_DIR REQUESTS PROMPT_TOKENS NEW_TOKENS [MODEL_NAME GPU]
"""
import json
import sys
import time

import torch
import transformers


def prompts(count, length):
    generator = torch.Generator().manual_seed(0)
    return [torch.randint(1000, 100000, (length,), generator=generator).tolist() for _ in range(count)]


def timed(run):
    torch.cuda.synchronize()
    start = time.perf_counter()
    produced = run()
    torch.cuda.synchronize()
    return time.perf_counter() - start, produced


def continuous(model, inputs, new_tokens):
    config = transformers.GenerationConfig(max_new_tokens=new_tokens, min_new_tokens=new_tokens, do_sample=False,
                                           eos_token_id=None, pad_token_id=0)
    outputs = model.generate_batch(inputs=inputs, generation_config=config)
    return sum(len(output.generated_tokens) for output in outputs.values())


def padded(model, inputs, new_tokens):
    ids = torch.tensor(inputs, device="cuda")
    with torch.no_grad():
        out = model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False, max_new_tokens=new_tokens,
                             min_new_tokens=new_tokens, pad_token_id=0)
    return (out.shape[1] - ids.shape[1]) * ids.shape[0]


def main() -> None:
    folder, requests, prompt_tokens, new_tokens = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    model_name, gpu = (sys.argv[5], sys.argv[6]) if len(sys.argv) > 6 else ("", "")
    inputs = prompts(requests, prompt_tokens)
    engines = [("transformers generate (batched)", padded)]
    if hasattr(transformers.GenerationMixin, "generate_batch"):
        engines.insert(0, ("transformers generate_batch (continuous batching)", continuous))
    for engine, run in engines:
        model = transformers.AutoModelForCausalLM.from_pretrained(folder, dtype=torch.bfloat16).cuda().eval()
        try:
            run(model, inputs[:2], 4)  # warm-up
            seconds, produced = timed(lambda: run(model, inputs, new_tokens))
            row = {"output_tok_s": round(produced / seconds, 1), "seconds": round(seconds, 2), "output_tokens": produced}
        except Exception as error:  # a peer that fails is reported, not fatal to the record
            row = {"error": f"{type(error).__name__}: {error}"[:300]}
        print(json.dumps({"engine": engine, "model": model_name, "gpu": gpu, "transformers": transformers.__version__,
                          "requests": requests, "prompt": prompt_tokens, "new": new_tokens, **row}), flush=True)
        del model
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
