"""The headline tables of docs/benchmarks.md: which committed record each row shows.

Each row names Surogate's record and the peers measured in the same call (the strongest of them is
the row's peer); bench/headline_tables.py renders the tables from the records, and
bench/plot_benchmarks.py draws the charts from the same rows. A peer measured in another call
(same GPU kind, same day) is marked `peer_same_call=False` and the table says so. To add a
figure, commit its record under bench/results/ and add a row here; then
`python3 bench/headline_tables.py --write docs/benchmarks.md`.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from benchmark_records import Pick


@dataclass(frozen=True)
class Row:
    anchor: str          # the row's id in the page (README links to it)
    label: str           # what ran
    ours: Pick
    gpu: str             # "H100 80GB", "2 × H200", ...: checked against the records that name one
    command: str         # what reproduces it (bench/, on the GPU machine)
    peers: tuple = ()    # Picks of the peers measured with it; the strongest is shown
    peer_same_call: bool = True
    baseline: Pick | None = None  # bf16 in the same call (the FP8 table)
    gpus: int = 1        # for the scaling chart
    size_b: float | None = None  # parameters in billions, for the by-size charts


@dataclass(frozen=True)
class Table:
    anchor: str
    title: str
    note: str
    rows: tuple = field(default_factory=tuple)
    baseline_label: str | None = None  # the baseline column's heading, when rows have one
    rate_heading: str = "Surogate tok/s"
    unit: str = "tok/s"   # the rates' unit, as the peer column names it
    rate_digits: int = 0  # decimals of the rates (pairs/s: 2)


CLI = "bash bench/run_cli_job.sh"
LIGER_CALL = "2026-11-25-h100-cli-defaults-with-liger-peers.jsonl"
LIGER_PEERS = "2026-11-25-h100-cli-peers-liger.jsonl"
H100_JOB = "2026-11-25-h100-cli-job.jsonl"
H100_PEERS = "2026-11-25-h100-cli-peers.jsonl"
H200_FP8 = "2026-11-28-h200-cli-fp8-line-transposes.jsonl"
DP = "2026-11-25-h100x2-data-parallel.jsonl"
LONG = "2026-11-28-h200x4-model-parallel-longest-context.jsonl"
CONTEXT_PEER = "2026-11-28-h200x4-context-peer.jsonl"
# One GPU on cuDNN's attention (the rows layout for whole-row documents), ours and the peer in the same call.
LONG_1GPU = "2026-12-01-h200-long-context-partial-keep.jsonl"
LONG_1GPU_COMMAND = ('SKIP_MP_BUBBLE=1 SKIP_MP_EQUIVALENCE=1 SKIP_MP_BEYOND=1 MP_GPUS=1 MP_SEQUENCES="131072 262144" '
                     'MP_PEERS=1 MP_STEPS=6 bash bench/model_parallel_rows.sh')
LONGEST = "2026-11-28-h200x4-longest-context-block-inputs.jsonl"


# Full fine-tuning on one H200, transformers (and with Liger) in the same call (2026-12-01).
FULL_H200 = "2026-12-01-h200-cli-full-with-peers.jsonl"
FULL_H200_COMMAND = ('CLI_MODELS="qwen3-0.6b qwen3-1.7b" CLI_VARIANTS=full-fast CLI_STEPS=8 BENCH_BINARY=0 '
                     f'{CLI}  (Liger-Kernel wheel carried)')


# LoRA by size on one H200, ours and both peers in the same call (2026-12-01, two calls: 8B + 0.6B, 1.7B + 4B).
LORA_H200 = "2026-12-01-h200-cli-lora-by-size.jsonl"


def _lora(size: str, billions: float, variant: str) -> Row:
    model = f"qwen3-{size.lower()}"
    call_models = "qwen3-8b qwen3-0.6b" if model in ("qwen3-8b", "qwen3-0.6b") else "qwen3-1.7b qwen3-4b"
    return Row(
        anchor=f"lora-{size.lower()}-{variant}", label=f"Qwen3-{size} LoRA, {variant}", size_b=billions,
        ours=Pick(LORA_H200, {"model": model, "variant": variant}),
        peers=(Pick(LORA_H200, {"model": model, "engine": "hf+peft"}),
               Pick(LORA_H200, {"model": model, "engine": "hf+peft+liger"})),
        gpu="H200",
        command=f'CLI_MODELS="{call_models}" CLI_VARIANTS="defaults fast" BENCH_BINARY=0 {CLI}  (Liger-Kernel wheel carried)')


LORA = Table(
    anchor="lora", title="LoRA by model size (one GPU)",
    note="Qwen3 shapes (random weights, the real tokenizer, packed text), seq 2048, micro-batch 2, "
         "grad-accum 4, LoRA r16 on every linear layer, through `surogate pt`. **defaults** are the "
         "reference's (dropout 0.05, recompute allowed, adamw_8bit); **fast** turns recompute off and "
         "dropout to 0. The peers: transformers + PEFT, and with Liger-Kernel (the stronger of the two is shown).",
    rows=(
        *(_lora(size, billions, variant) for size, billions in (("0.6B", 0.6), ("1.7B", 1.7), ("4B", 4), ("8B", 8))
          for variant in ("defaults", "fast")),
        Row(anchor="lora-14b-fast", label="Qwen3-14B LoRA, fast", size_b=14,
            ours=Pick(H200_FP8, {"model": "qwen3-14b", "variant": "fast"}), gpu="H200",
            command=f'CLI_MODELS=qwen3-14b CLI_VARIANTS="fast fp8-fast" CLI_STEPS=6 PEERS=0 BENCH_BINARY=0 {CLI}'),
    ))

FULL = Table(
    anchor="full", title="Full fine-tuning by model size (one GPU)",
    note="The same job with every weight trained (fp32 masters, adamw_8bit, through the CLI). The peer: "
         "transformers (a bf16 model, fused AdamW), and with Liger-Kernel (the stronger of the two is shown).",
    rows=(
        Row(anchor="full-0.6b", label="Qwen3-0.6B full, fast", size_b=0.6,
            ours=Pick(FULL_H200, {"model": "qwen3-0.6b", "variant": "full-fast"}),
            peers=(Pick(FULL_H200, {"model": "qwen3-0.6b", "engine": "hf"}),
                   Pick(FULL_H200, {"model": "qwen3-0.6b", "engine": "hf+liger"})), gpu="H200",
            command=FULL_H200_COMMAND),
        Row(anchor="full-1.7b-fast", label="Qwen3-1.7B full, fast", size_b=1.7,
            ours=Pick(FULL_H200, {"model": "qwen3-1.7b", "variant": "full-fast"}),
            peers=(Pick(FULL_H200, {"model": "qwen3-1.7b", "engine": "hf"}),
                   Pick(FULL_H200, {"model": "qwen3-1.7b", "engine": "hf+liger"})), gpu="H200",
            command=FULL_H200_COMMAND),
        Row(anchor="full-1.7b-defaults-h200", label="Qwen3-1.7B full, defaults", size_b=1.7,
            ours=Pick(H200_FP8, {"model": "qwen3-1.7b", "variant": "full"}), gpu="H200",
            command=f'CLI_MODELS=qwen3-1.7b CLI_VARIANTS="full full-fp8" CLI_STEPS=6 PEERS=0 BENCH_BINARY=0 {CLI}'),
        Row(anchor="full-4b-fast-h200", label="Qwen3-4B full, fast", size_b=4,
            ours=Pick("2026-11-28-h200-cli-fp8-transpose.jsonl", {"model": "qwen3-4b", "variant": "full-fast"}), gpu="H200",
            command=f'CLI_MODELS="qwen3-1.7b qwen3-4b" CLI_VARIANTS="full-fast full-fp8-fast fast fp8-fast" CLI_STEPS=6 PEERS=0 BENCH_BINARY=0 {CLI}'),
        Row(anchor="full-8b-offload", label="Qwen3-8B full, masters and optimizer offloaded", size_b=8,
            ours=Pick("2026-11-25-h100-cli-8b-offload-qlora-fp4.jsonl", {"model": "qwen3-8b", "variant": "full-offload"}),
            gpu="H100 80GB", command=f"CLI_MODELS=qwen3-8b CLI_VARIANTS=full-offload CLI_STEPS=8 PEERS=0 BENCH_BINARY=0 {CLI}"),
    ))


def _fp8(anchor: str, label: str, model: str, fp8: str, bf16: str, steps: int, nth: int | None = None,
         file: str = H200_FP8) -> Row:
    pick = {"model": model, "variant": fp8}
    base = {"model": model, "variant": bf16}
    return Row(anchor=anchor, label=label, ours=Pick(file, pick, nth=nth),
               baseline=Pick(file, base, nth=nth), gpu="H200",
               command=f'CLI_MODELS={model} CLI_VARIANTS="{bf16} {fp8}" CLI_STEPS={steps} PEERS=0 BENCH_BINARY=0 {CLI}')


FP8 = Table(
    anchor="fp8", title="FP8 (`recipe: fp8_hybrid`)",
    note="E4M3 forward / E5M2 backward products with delayed scaling; the ratio to bf16 is against the "
         "bf16 run of the same call. No peer ran FP8 training in these calls.",
    baseline_label="bf16 same call", rate_heading="fp8_hybrid tok/s",
    rows=(
        _fp8("fp8-1.7b-full-fast", "Qwen3-1.7B full, fast", "qwen3-1.7b", "full-fp8-fast", "full-fast", 8, nth=1),
        _fp8("fp8-1.7b-full-defaults", "Qwen3-1.7B full, defaults", "qwen3-1.7b", "full-fp8", "full", 6),
        _fp8("fp8-4b-lora-fast", "Qwen3-4B LoRA, fast", "qwen3-4b", "fp8-fast", "fast", 6),
        _fp8("fp8-4b-lora-defaults", "Qwen3-4B LoRA, defaults", "qwen3-4b", "fp8", "defaults", 6),
        _fp8("fp8-8b-lora-fast", "Qwen3-8B LoRA, fast", "qwen3-8b", "fp8-fast", "fast", 8,
             file="2026-12-01-h200-cli-fp8-8b.jsonl"),
        _fp8("fp8-14b-lora-fast", "Qwen3-14B LoRA, fast", "qwen3-14b", "fp8-fast", "fast", 6),
    ))

QLORA_PEERS = "2026-11-25-h100-qlora-peers.jsonl"
QLORA = Table(
    anchor="qlora", title="QLoRA (4-bit base)",
    note="`qlora_bnb: true` (NF4, blocks of 64, double quantization), the reference's defaults. The "
         "peer: transformers + PEFT with every projection a bitsandbytes NF4 `Linear4bit`.",
    rows=(
        Row(anchor="qlora-8b", label="Qwen3-8B QLoRA NF4", size_b=8,
            ours=Pick(QLORA_PEERS, {"model": "qwen3-8b", "engine": "surogate CLI"}),
            peers=(Pick(QLORA_PEERS, {"model": "qwen3-8b", "engine": "hf+peft+bnb-nf4"}),), gpu="H100 80GB",
            command=f"CLI_MODELS=qwen3-8b CLI_VARIANTS=qlora PEERS=0 BENCH_BINARY=0 {CLI}; "
                    "python3 bench/peers/hf_peft_bench.py --model qwen3-8b --mode lora --qlora --steps 5"),
        Row(anchor="qlora-14b", label="Qwen3-14B QLoRA NF4", size_b=14,
            ours=Pick("2026-11-25-h100-cli-qlora-14b.jsonl", {"model": "qwen3-14b", "variant": "qlora"}),
            peers=(Pick(QLORA_PEERS, {"model": "qwen3-14b", "engine": "hf+peft+bnb-nf4"}),), peer_same_call=False,
            gpu="H100 80GB",
            command=f'CLI_MODELS=qwen3-14b CLI_VARIANTS="qlora defaults" CLI_STEPS=6 PEERS=0 BENCH_BINARY=0 {CLI}; '
                    "python3 bench/peers/hf_peft_bench.py --model qwen3-14b --mode lora --qlora --checkpointing --steps 4"),
        Row(anchor="qlora-14b-peer-memory", label="Qwen3-14B QLoRA NF4 in 18 GiB (the peer's memory)", size_b=14,
            ours=Pick(QLORA_PEERS, {"model": "qwen3-14b", "engine": "surogate CLI"}),
            peers=(Pick(QLORA_PEERS, {"model": "qwen3-14b", "engine": "hf+peft+bnb-nf4"}),), peer_same_call=False,
            gpu="H100 80GB", command="HOLD_GIB=60 bash bench/run_with_memory_held.sh qwen3-14b"),
        Row(anchor="qlora-32b-80gb", label="Qwen3-32B QLoRA NF4 in an H100's 80 GB", size_b=32,
            ours=Pick("2026-11-27-h200-qlora-32b-in-h100-memory.jsonl", {}, metric="tokens_per_s_median_steps_3_4"),
            gpu="H200",
            command="HOLD_TO_MIB=81559 MAX_STEPS=4 EXTRA_YAML='qlora_bnb: true' bash bench/run_with_memory_held.sh qwen3-32b"),
    ))

MOE_FILE = "2026-11-25-h100-cli-moe-2b.jsonl"
MOE = Table(
    anchor="moe", title="Mixture of experts",
    note="A Qwen3-MoE shape of 2.0B parameters (0.6B active: 64 experts of 512, top-8), LoRA r16 on "
         "attention and every expert. The peer adapts the fused expert stacks through PEFT's "
         "`target_parameters`.",
    rows=tuple(
        Row(anchor=f"moe-2b-{variant}", label=f"Qwen3-MoE 2B-A0.6B LoRA, {variant}",
            ours=Pick(MOE_FILE, {"model": "qwen3-moe-2b", "variant": variant}),
            peers=(Pick(MOE_FILE, {"model": "qwen3-moe-2b", "engine": "hf+peft"}),), gpu="H100 80GB",
            command=f'CLI_MODELS=qwen3-moe-2b CLI_VARIANTS="defaults fast" CLI_STEPS=10 PEER_STEPS=5 BENCH_BINARY=0 {CLI}')
        for variant in ("defaults", "fast")))

MP_LONG = ('SKIP_MP_BUBBLE=1 SKIP_MP_EQUIVALENCE=1 SKIP_MP_BEYOND=1 MP_GPUS="1 2 4" '
           'MP_CONTEXT_LONG_SEQUENCE=131072 bash bench/model_parallel_rows.sh')
MP_PEER = 'MP_PEERS=1 SKIP_MP_CONTEXT=1 SKIP_MP_BUBBLE=1 SKIP_MP_EQUIVALENCE=1 SKIP_MP_BEYOND=1 bash bench/model_parallel_rows.sh'


def _long_documents(gpus: int, sequence_len: int) -> Row:
    layout = "1 GPU" if gpus == 1 else f"{gpus} GPUs, sequence parallel"
    if gpus == 1:  # re-measured on cuDNN with the peer in the same call
        return Row(anchor=f"gpus-1-long-{sequence_len // 1024}k",
                   label=f"Qwen3-8B LoRA, {sequence_len // 1024}k-token documents, {layout}", gpus=1,
                   ours=Pick(LONG_1GPU, {"row": "context-run", "gpus": 1, "sequence_len": sequence_len,
                                         "data": "long documents"}),
                   peers=(Pick(LONG_1GPU, {"row": "context-peer", "gpus": 1, "sequence_len": sequence_len}),),
                   gpu="H200", command=LONG_1GPU_COMMAND)
    return Row(anchor=f"gpus-{gpus}-long-{sequence_len // 1024}k",
               label=f"Qwen3-8B LoRA, {sequence_len // 1024}k-token documents, {layout}", gpus=gpus,
               ours=Pick(LONG, {"row": "context-run", "gpus": gpus, "sequence_len": sequence_len, "data": "long documents"}),
               peers=(Pick(CONTEXT_PEER, {"gpus": gpus, "sequence_len": sequence_len}),), peer_same_call=False,
               gpu="H200" if gpus == 1 else f"{gpus} × H200", command=f"{MP_LONG}; {MP_PEER}")


def _data_parallel(model: str, mode: str, gpus: int, size_b: float, label: str, peer_engine: str) -> Row:
    spec = f"{model}:{mode}"
    zero = '"1 3"' if mode == "lora" else '"1 2 3"'
    return Row(anchor=f"gpus-{gpus}-{model.split('-')[1]}-{mode}", label=label, gpus=gpus, size_b=size_b,
               ours=Pick(DP, {"model": model, "gpus": gpus, "engine": "surogate CLI", "zero_level": "1"}),
               peers=(Pick(DP, {"model": model, "gpus": gpus, "engine": peer_engine}),),
               gpu="H100 80GB" if gpus == 1 else f"{gpus} × H100 80GB",
               command=f'DP_GPUS="1 2" DP_MODELS={spec} DP_ZERO={zero} bash bench/run_multi_gpu.sh')


GPUS = Table(
    anchor="gpus", title="Several GPUs",
    note="Data parallelism (`gpus: N`, ZeRO-1; the peer under torchrun DDP) with the fast settings; "
         "sequence parallelism (`sequence_parallel_size` = GPUs; the peer: torch context parallelism, "
         "ring attention) over whole-row documents; pipeline (`pipeline_parallel_size`) for models one "
         "GPU cannot hold. Tokens/s are over all the GPUs.",
    rows=(
        _data_parallel("qwen3-8b", "lora", 1, 8, "Qwen3-8B LoRA, 1 GPU", "hf+peft"),
        _data_parallel("qwen3-8b", "lora", 2, 8, "Qwen3-8B LoRA, 2 GPUs data parallel", "hf+peft"),
        _data_parallel("qwen3-1.7b", "full", 1, 1.7, "Qwen3-1.7B full, 1 GPU", "hf"),
        _data_parallel("qwen3-1.7b", "full", 2, 1.7, "Qwen3-1.7B full, 2 GPUs data parallel", "hf"),
        _long_documents(1, 32768),
        _long_documents(2, 32768),
        _long_documents(4, 32768),
        _long_documents(4, 131072),
        Row(anchor="gpus-2-8b-full-pipeline", label="Qwen3-8B full, 2 pipeline stages", gpus=2,
            ours=Pick("2026-11-27-h200x2-model-parallel.jsonl", {"row": "beyond", "model": "qwen3-8b"}), gpu="2 × H200",
            command="SKIP_MP_CONTEXT=1 SKIP_MP_BUBBLE=1 SKIP_MP_EQUIVALENCE=1 MP_BEYOND_MODEL=qwen3-8b bash bench/model_parallel_rows.sh"),
        Row(anchor="gpus-4-14b-full-pipeline", label="Qwen3-14B full, 4 pipeline stages", gpus=4,
            ours=Pick("2026-11-28-h200x4-model-parallel-beyond.jsonl", {"row": "beyond", "layout": "pipeline_parallel_size: 4"}),
            gpu="4 × H200",
            command="SKIP_MP_CONTEXT=1 SKIP_MP_BUBBLE=1 SKIP_MP_EQUIVALENCE=1 bash bench/model_parallel_rows.sh"),
    ))

CONTEXT = Table(
    anchor="context", title="Longest context (Qwen3-8B LoRA)",
    note="The longest `sequence_len` that trains (the dry run bisected to 4,096 tokens, then 3 steps; "
         "6 on one GPU), packed documents, micro-batch 1, `sequence_parallel_size` = GPUs, the reference's "
         "defaults otherwise. Tok/s is the median of the steps (the last row of the epoch is mostly padding). "
         "The peer's longest context was not measured.",
    rate_heading="Surogate tok/s (median step)",
    rows=tuple(
        Row(anchor=f"context-{gpus}-gpu", label=f"{gpus} GPU{'s' if gpus > 1 else ''}: **{length:,} tokens**",
            gpus=gpus, gpu="H200" if gpus == 1 else f"{gpus} × H200",
            ours=Pick(LONG_1GPU if gpus == 1 else LONGEST,
                      {"row": "context-run", "gpus": gpus, "sequence_len": length}, metric="median_step"),
            command=LONG_1GPU_COMMAND if gpus == 1 else
            f'SKIP_MP_BUBBLE=1 SKIP_MP_EQUIVALENCE=1 SKIP_MP_BEYOND=1 MP_GPUS="{gpus}" '
            'MP_SEQUENCES="131072 262144 524288 786432" bash bench/model_parallel_rows.sh')
        for gpus, length in ((1, 163840), (2, 315392), (4, 630784))))

GENERATE = "2026-11-29-h200-generate-decode.jsonl"
GENERATE_DEVICE_GREEDY = "2026-11-29-h200-generate-decode-device-greedy.jsonl"
GENERATE_FUSED = "2026-11-29-h200-generate-decode-fused.jsonl"
TENSOR_ATTENTION = "2026-11-29-h200-tensor-cached-attention.jsonl"  # decode, serve and GRPO after it
PROGRAMMATIC_CHAIN = "2026-11-30-h200-decode-programmatic-chain.jsonl"  # one request's decode after it
SPLITS_CUDNN_GRPO = "2026-11-30-h200-splits-cudnn-grpo.jsonl"  # decode and GRPO after 128-key splits, cuDNN training
GRPO_SHARED_PROMPTS = "2026-11-30-h200-grpo-shared-prompts.jsonl"  # GRPO after a group's prompt is computed once
GRPO_LONGEST_PROMPT = "2026-11-30-h200-grpo-rows-of-the-longest-prompt.jsonl"  # and rows of the longest prompt
DECODE_LATENCY = "2026-11-30-h200-decode-latency-chains.jsonl"  # one request's decode, short kernels' loads together
DECODE_QK_FOLDED = "2026-11-30-h200-decode-qk-norm-folded.jsonl"  # and the q/k norm done by the attention
DECODE_8_ROWS = "2026-11-30-h200-decode-8-rows.jsonl"  # and 8 rows a block for the one-row GEMVs; the peer in the same call
GENERATION = Table(
    anchor="generation", title="Generation: one request's decode speed",
    note="`surogate generate --device cuda` on a Qwen3 shape with random bf16 weights, one request, greedy, "
         "the KV cache (docs/generation.md); the rate is decode tokens/s after the prompt's prefill. The peer: "
         "transformers' `generate()` in bf16 on the same folder and prompt (its default dynamic cache).",
    rate_heading="Surogate decode tok/s",
    rows=(
        Row(anchor="generate-8b-decode", label="Qwen3-8B, prompt 512, 256 new tokens",
            ours=Pick(DECODE_8_ROWS, {"engine": "surogate", "commit": "b61bc0e"}, metric="decode_tok_s"),
            peers=(Pick(DECODE_8_ROWS, {"engine": "transformers generate"}, metric="decode_tok_s"),),
            gpu="H200", command="CARRIED=carry/cli MODEL=qwen3-8b bash bench/generate_decode.sh"),
        Row(anchor="generate-8b-decode-long", label="Qwen3-8B, prompt 128, 512 new tokens",
            ours=Pick(GENERATE, {"engine": "surogate", "prompt": 128}, metric="decode_tok_s"), gpu="H200",
            command="CARRIED=carry/gen MODEL=qwen3-8b PEERS=0 PROMPT=128 NEW=512 bash bench/generate_decode.sh"),
    ))

SERVE = "2026-11-29-h200-serve-throughput-device-greedy.jsonl"
SERVING = Table(
    anchor="serving", title="Serving: 64 requests at once",
    note="`surogate serve --device cuda --batch_size 64` on Qwen3-8B's shape with random bf16 weights: 64 "
         "concurrent streaming completions of 512 random token ids and 256 greedy new tokens "
         "(bench/serve_concurrent.py); the rate is output tokens/s over the wall time, with time to first "
         "token (p50 / p99) in the record. The peers, on the same folder and prompts: transformers' "
         "continuous batching (`generate_batch`) and batched `generate`, each made to produce 256 tokens.",
    rate_heading="Surogate output tok/s",
    rows=(
        Row(anchor="serve-8b-64", label="Qwen3-8B, 64 × (512 prompt + 256 new)",
            ours=Pick(TENSOR_ATTENTION, {"engine": "surogate serve"}, metric="output_tok_s"),
            peers=(Pick(SERVE, {"engine": "transformers generate (batched)"}, metric="output_tok_s"),
                   Pick(SERVE, {"engine": "transformers generate_batch (continuous batching)"},
                        metric="output_tok_s")), peer_same_call=False, gpu="H200",
            command="CARRIED=carry/cli MODEL=qwen3-8b bash bench/serve_throughput.sh"),
    ))

GRPO_FILE = "2026-11-29-h200-grpo-vs-trl.jsonl"
GRPO_FP8_ROWS = "2026-12-01-h200-grpo-rows-kernel.jsonl"  # the same, the rollouts' attention on the many-rows kernel
GRPO = Table(
    anchor="grpo", title="Reinforcement learning: `surogate grpo` against TRL",
    note="`surogate grpo` with LoRA r16 (every linear layer) on a Qwen3 shape with random bf16 weights: 64 "
         "arithmetic prompts a step, 8 generations each of 512 tokens (every completion runs to the limit), "
         "two Python reward functions, temperature 1, loss_type dapo, beta 0, AdamW, all 512 completions "
         "generated at once (`grpo.generation_batch_size: 512`); completions/s over the steps after the first "
         "(bench/run_grpo_job.sh). The peer: TRL 1.16's GRPOTrainer + PEFT generating with transformers (no vLLM "
         "wheel can be carried), the same folder, prompts, rewards and shapes, in bf16 (rows marked † measured in "
         "another call the same day). Peak memory: ours nvidia-smi's, TRL's torch's max_memory_allocated (its nvidia-smi peak, the "
         "caching allocator's, is 139 GiB on both sizes). The records carry the generation / training split.",
    rate_heading="Surogate completions/s", unit="completions/s", rate_digits=2,
    rows=tuple(
        Row(anchor=f"grpo-{size}-lora", label=f"Qwen3-{size.upper()} LoRA GRPO, 512 completions a step",
            size_b=billions,
            ours=Pick(GRPO_FP8_ROWS, {"engine": "surogate grpo", "model": f"qwen3-{size}", "call": 3},
                      metric="completions_per_s"),
            peers=(Pick(GRPO_FP8_ROWS, {"engine": "trl-grpo+peft", "model": f"qwen3-{size}"},
                        metric="completions_per_s"),),
            peer_same_call=False, gpu="H200",
            command=f"GRPO_RUNS=qwen3-{size}:lora GRPO_GENERATION_BATCH=512 bash bench/run_grpo_job.sh")
        for size, billions in (("1.7b", 1.7), ("8b", 8.2))) + tuple(
        # The fast setting: `recipe: fp8_hybrid` (the rollouts read the FP8 weights the step trains
        # through); the peer in bf16 in the same call.
        Row(anchor=f"grpo-{size}-lora-fp8", label=f"Qwen3-{size.upper()} LoRA GRPO, `recipe: fp8_hybrid`",
            ours=Pick(file, {"engine": "surogate grpo", "model": f"qwen3-{size}", "call": call},
                      metric="completions_per_s"),
            peers=(Pick(file, {"engine": "trl-grpo+peft", "model": f"qwen3-{size}", "call": call},
                        metric="completions_per_s"),),
            gpu="H200",
            command=f"GRPO_RUNS=qwen3-{size}:lora:fp8_hybrid GRPO_STEPS=3 GRPO_GENERATION_BATCH=512 bash bench/run_grpo_job.sh")
        for size, file, call in (("1.7b", GRPO_FP8_ROWS, 1), ("8b", GRPO_FP8_ROWS, 2))))

DSL_NEOX = "2026-11-29-h200-dsl-gpt-neox.jsonl"
DSL = Table(
    anchor="dsl", title="An architecture written in Python alone (the DSL)",
    note="GPT-NeoX (Pythia-1.4B's shape over the Qwen3 vocabulary, random weights), which the engine has no C++ "
         "for: `model_definition: examples/dsl/gpt_neox.py` (docs/models.md), through `surogate pt` on packed "
         "text, seq 2048, micro-batch 2, grad-accum 4, the fast settings. The peer: transformers + PEFT's "
         "GPTNeoXForCausalLM (SDPA) with the same LoRA (r16, every linear layer).",
    rows=(
        Row(anchor="dsl-gpt-neox-lora", label="GPT-NeoX-1.4B LoRA, fast", size_b=1.4,
            ours=Pick(DSL_NEOX, {"model": "gpt-neox-1.4b", "variant": "fast", "engine": "surogate CLI"}),
            peers=(Pick(DSL_NEOX, {"model": "gpt-neox-1.4b", "engine": "hf+peft"}),), gpu="H200",
            command='CLI_MODELS=gpt-neox-1.4b CLI_VARIANTS="fast full-fast" BENCH_BINARY=0 bash bench/run_cli_job.sh'),
        Row(anchor="dsl-gpt-neox-full", label="GPT-NeoX-1.4B full fine-tuning, fast", size_b=1.4,
            ours=Pick(DSL_NEOX, {"model": "gpt-neox-1.4b", "variant": "full-fast", "engine": "surogate CLI"}),
            gpu="H200",
            command='CLI_MODELS=gpt-neox-1.4b CLI_VARIANTS="fast full-fast" BENCH_BINARY=0 bash bench/run_cli_job.sh'),
    ))

DPO_FILE = "2026-12-01-h200-dpo-prompt-sharing.jsonl"  # loss.share_prompts on (the default)
DPO_COMMAND = 'LIGER=only DPO_RUNS="qwen3-8b:lora:fp8_hybrid qwen3-8b:lora qwen3-1.7b:full:fp8_hybrid qwen3-1.7b:full" bash bench/run_dpo_job.sh'
PREFERENCE = Table(
    anchor="preference", title="Preference tuning: `surogate dpo` against TRL",
    note="`surogate dpo` (sigmoid DPO, beta 0.1) on a Qwen3 shape with random bf16 weights and pairs of a "
         "512-token prompt and 512-token completions (bench/preference/make_pairs.py), 4 pairs per micro-batch, "
         "2 micro-batches per step, AdamW, recomputation off, each pair's prompt computed once "
         "(`loss.share_prompts`, the default: docs/preference-tuning.md#prompt-sharing); pairs/s over the steps "
         "after the first two. The peer: TRL 1.16's DPOTrainer (+ PEFT for LoRA) with Liger-Kernel's fused DPO "
         "loss (the stronger of the two, 2026-11-29), in bf16, on the same folder and pairs; TRL runs its "
         "reference inside every step, ours is computed once per epoch (forward only) before the first step: "
         "the record's `pairs_per_s_with_reference` charges it (docs/preference-tuning.md#speed). With "
         "`recipe: fp8_hybrid` the FP8 scales are calibrated before the reference pass (docs/preference-tuning.md#fp8). Peak memory: "
         "nvidia-smi on both sides.",
    rate_heading="Surogate pairs/s", unit="pairs/s", rate_digits=2,
    rows=tuple(
        Row(anchor=f"dpo-{size}-{mode}{'-fp8' if recipe == 'fp8_hybrid' else ''}",
            label=f"Qwen3-{size.upper()} {'LoRA r16' if mode == 'lora' else 'full fine-tuning'} DPO"
                  + (", `recipe: fp8_hybrid`" if recipe == "fp8_hybrid" else ""),
            size_b=billions,
            ours=Pick(DPO_FILE, {"engine": "surogate dpo", "model": f"qwen3-{size}", "recipe": recipe, "call": call},
                      metric="pairs_per_s"),
            peers=(Pick(DPO_FILE, {"engine": f"trl-dpo{'+peft' if mode == 'lora' else ''}+liger",
                                   "model": f"qwen3-{size}", "call": call}, metric="pairs_per_s"),),
            gpu="H200", command=DPO_COMMAND)
        for size, billions, mode, call in (("8b", 8.2, "lora", 5), ("1.7b", 1.7, "full", 5))
        for recipe in ("bf16", "fp8_hybrid")))

VL_FILE = "2026-11-30-h200-vl-lora-host.jsonl"
VL_COMMAND = "CARRY_DIR=$PWD/carry/cli bash bench/run_vl_job.sh"

VISION = Table(
    anchor="vision", title="Vision-language LoRA against transformers + PEFT",
    note="`surogate sft` LoRA r16 on the text model's projections (the tower frozen) of Qwen2.5-VL-7B- and "
         "Qwen3-VL-8B-shaped folders with random bf16 weights, 256 synthetic image–caption rows (one PNG / "
         "JPEG each, 224² to 1600 × 1200, bench/vision/make_vl_data.py), `max_pixels: 1003520`, sequence_len "
         "2048 packed, micro-batch 2 × accumulation 4, fast settings; tokens/s are real tokens (image tokens "
         "included), the median step after two. The peer: the same folder and rows through transformers' "
         "processor, PEFT LoRA r16 on the same projections, SDPA, 4 rows a micro-batch padded to the longest, "
         "4 micro-batches a step. Images/s are in the records (`images_per_s`). Peak memory: ours nvidia-smi, "
         "the peer's torch `max_memory_allocated` (its nvidia-smi peak is in the record).",
    rows=(
        Row(anchor="vl-qwen2.5-7b-lora", label="Qwen2.5-VL-7B LoRA", size_b=8.3,
            ours=Pick(VL_FILE, {"engine": "surogate CLI", "model": "qwen2.5-vl-7b"}),
            peers=(Pick(VL_FILE, {"engine": "hf+peft", "model": "qwen2.5-vl-7b"}),),
            gpu="H200", command=f"VL_RUNS=qwen2.5-vl-7b {VL_COMMAND}"),
        Row(anchor="vl-qwen3-8b-lora", label="Qwen3-VL-8B LoRA", size_b=8.8,
            ours=Pick(VL_FILE, {"engine": "surogate CLI", "model": "qwen3-vl-8b"}),
            peers=(Pick(VL_FILE, {"engine": "hf+peft", "model": "qwen3-vl-8b"}),),
            gpu="H200", command=f"VL_RUNS=qwen3-vl-8b {VL_COMMAND}"),
    ))

TABLES = (LORA, FULL, FP8, QLORA, MOE, GPUS, CONTEXT, GENERATION, SERVING, PREFERENCE, GRPO, VISION, DSL)
