#!/usr/bin/env python3
"""transformers' generate() on the same folder and prompt as bench/generate_decode.sh: greedy, bf16, one
request, the default (dynamic) KV cache. Prints one JSON line: prefill seconds (max_new_tokens=1)
and decode tokens/s over the rest.

  python3 bench/peers/hf_generate.py MODEL_DIR PROMPT_TOKENS NEW_TOKENS [MODEL_NAME GPU]
"""
import json
import sys
import time

import torch
import transformers


def timed(model, ids, new_tokens):
    torch.cuda.synchronize()
    start = time.perf_counter()
    with torch.no_grad():
        out = model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False, max_new_tokens=new_tokens,
                             min_new_tokens=new_tokens)
    torch.cuda.synchronize()
    return time.perf_counter() - start, out.shape[1] - ids.shape[1]


def main() -> None:
    folder, prompt_tokens, new_tokens = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    model_name, gpu = (sys.argv[4], sys.argv[5]) if len(sys.argv) > 5 else ("", "")
    model = transformers.AutoModelForCausalLM.from_pretrained(folder, dtype=torch.bfloat16).cuda().eval()
    ids = torch.randint(1000, 100000, (1, prompt_tokens), generator=torch.Generator().manual_seed(0)).cuda()
    timed(model, ids, 4)  # warm-up
    prefill, _ = timed(model, ids, 1)
    total, generated = timed(model, ids, new_tokens)
    print(json.dumps({"engine": "transformers generate", "model": model_name, "gpu": gpu,
                      "transformers": transformers.__version__, "prompt": prompt_tokens,
                      "prefill_s": round(prefill, 4), "new_tokens": generated,
                      "decode_tok_s": round((generated - 1) / (total - prefill), 1)}))


if __name__ == "__main__":
    main()
