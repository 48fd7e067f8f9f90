"""The benchmark models: Qwen3 and Qwen3-MoE shapes (real sizes, random weights) and their FLOP
counts. MoE FLOPs count the active parameters only: the router and the k experts a token uses.

FLOPs per token follow the usual accounting: a matmul of an [m, k] by [k, n] costs 2mkn.
Forward = 2 * (matmul parameters) + attention (2 * 2 * T * d_attn per layer per token, causal
halves it). Full fine-tuning: backward computes input and weight gradients (2x forward).
LoRA: the base weights are frozen, so backward computes only input gradients (1x forward for
base matmuls); adapter FLOPs are counted too but are tiny.
"""
from dataclasses import dataclass


@dataclass(frozen=True)
class Qwen3Shape:
    name: str
    hidden: int
    intermediate: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int = 128
    vocab: int = 151936
    tied: bool = True

    def hf_config(self) -> dict:
        return {
            "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3",
            "hidden_size": self.hidden, "intermediate_size": self.intermediate,
            "num_hidden_layers": self.layers, "num_attention_heads": self.heads,
            "num_key_value_heads": self.kv_heads, "head_dim": self.head_dim,
            "vocab_size": self.vocab, "tie_word_embeddings": self.tied,
            "rms_norm_eps": 1e-6, "rope_theta": 1000000.0, "max_position_embeddings": 40960,
            "hidden_act": "silu", "attention_bias": False, "torch_dtype": "bfloat16",
            "bos_token_id": 151643, "eos_token_id": 151645, "use_sliding_window": False,
        }

    def linear_params_per_layer(self) -> int:
        q = self.hidden * self.heads * self.head_dim
        kv = 2 * self.hidden * self.kv_heads * self.head_dim
        o = self.heads * self.head_dim * self.hidden
        mlp = 3 * self.hidden * self.intermediate
        return q + kv + o + mlp

    def lora_params_per_layer(self, rank: int) -> int:
        dims = [(self.hidden, self.heads * self.head_dim), (self.hidden, self.kv_heads * self.head_dim),
                (self.hidden, self.kv_heads * self.head_dim), (self.heads * self.head_dim, self.hidden),
                (self.hidden, self.intermediate), (self.hidden, self.intermediate),
                (self.intermediate, self.hidden)]
        return sum(rank * (i + o) for i, o in dims)

    def forward_flops_per_token(self, seq_len: int) -> float:
        matmul = 2 * (self.layers * self.linear_params_per_layer() + self.vocab * self.hidden)
        attention = self.layers * 2 * 2 * seq_len * self.heads * self.head_dim / 2  # causal
        return matmul + attention

    def training_flops_per_token(self, seq_len: int, mode: str, lora_rank: int = 16) -> float:
        forward = self.forward_flops_per_token(seq_len)
        attention = self.layers * 2 * 2 * seq_len * self.heads * self.head_dim / 2
        if mode == "full":
            return 3 * forward
        # LoRA: forward + input-gradient backward for base matmuls and attention (2x attention
        # forward for its backward), plus the adapters' forward and both backward products.
        adapters = 2 * self.layers * self.lora_params_per_layer(lora_rank)
        return 2 * forward + attention + 3 * adapters


@dataclass(frozen=True)
class Qwen3MoeShape(Qwen3Shape):
    """Qwen3-MoE: every layer sparse, `experts` SwiGLU experts of `expert_intermediate`, top-k routed
    with normalised weights (Qwen3-30B-A3B's config)."""
    experts: int = 128
    experts_per_token: int = 8
    expert_intermediate: int = 768

    def hf_config(self) -> dict:
        config = super().hf_config()
        config.update({"architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe", "num_experts": self.experts,
                       "num_experts_per_tok": self.experts_per_token, "moe_intermediate_size": self.expert_intermediate,
                       "norm_topk_prob": True, "decoder_sparse_step": 1, "mlp_only_layers": [],
                       "output_router_logits": False, "router_aux_loss_coef": 0.001})
        return config

    def linear_params_per_layer(self) -> int:  # active: attention, router, k experts
        attention = super().linear_params_per_layer() - 3 * self.hidden * self.intermediate
        return attention + self.hidden * self.experts + self.experts_per_token * 3 * self.hidden * self.expert_intermediate

    def lora_params_per_layer(self, rank: int) -> int:  # active adapters: attention and the k experts used
        attention = super().lora_params_per_layer(rank) - 3 * rank * (self.hidden + self.intermediate)
        return attention + self.experts_per_token * 3 * rank * (self.hidden + self.expert_intermediate)

    def total_params(self) -> int:
        per_layer = (super().linear_params_per_layer() - 3 * self.hidden * self.intermediate + self.hidden * self.experts
                     + self.experts * 3 * self.hidden * self.expert_intermediate)
        return self.layers * per_layer + self.vocab * self.hidden * (1 if self.tied else 2)


@dataclass(frozen=True)
class GptNeoxShape(Qwen3Shape):
    """GPT-NeoX (Pythia): LayerNorm with bias, GELU MLP of two matrices, fused qkv, parallel residual,
    a quarter of each head rotated; no C++ in the engine: trained through examples/dsl/gpt_neox.py.
    The vocabulary is the Qwen3 tokenizer's, so the bench's data and tokenizer serve it too."""
    rotary_pct: float = 0.25

    def hf_config(self) -> dict:
        return {
            "architectures": ["GPTNeoXForCausalLM"], "model_type": "gpt_neox", "hidden_size": self.hidden,
            "intermediate_size": self.intermediate, "num_hidden_layers": self.layers,
            "num_attention_heads": self.heads, "vocab_size": self.vocab, "rotary_pct": self.rotary_pct,
            "rotary_emb_base": 10000, "max_position_embeddings": 2048, "layer_norm_eps": 1e-5,
            "use_parallel_residual": True, "hidden_act": "gelu", "tie_word_embeddings": False,
            "attention_bias": True, "torch_dtype": "bfloat16", "bos_token_id": 151643, "eos_token_id": 151645,
        }

    def linear_params_per_layer(self) -> int:
        return 4 * self.hidden * self.hidden + 2 * self.hidden * self.intermediate

    def lora_params_per_layer(self, rank: int) -> int:
        dims = [(self.hidden, 3 * self.hidden), (self.hidden, self.hidden), (self.hidden, self.intermediate),
                (self.intermediate, self.hidden)]
        return sum(rank * (i + o) for i, o in dims)


MODELS = {
    # A Qwen3 of a few million parameters (most of them the real vocabulary's embedding): the CPU
    # smoke tests of the bench scripts (tests/python/test_grpo_bench.py).
    "qwen3-tiny": Qwen3Shape("qwen3-tiny", 64, 128, 2, 4, 2, head_dim=16),
    "qwen3-0.6b": Qwen3Shape("qwen3-0.6b", 1024, 3072, 28, 16, 8),
    "qwen3-1.7b": Qwen3Shape("qwen3-1.7b", 2048, 6144, 28, 16, 8),
    "qwen3-4b": Qwen3Shape("qwen3-4b", 2560, 9728, 36, 32, 8),
    "qwen3-8b": Qwen3Shape("qwen3-8b", 4096, 12288, 36, 32, 8, tied=False),
    "qwen3-14b": Qwen3Shape("qwen3-14b", 5120, 17408, 40, 40, 8, tied=False),
    "qwen3-32b": Qwen3Shape("qwen3-32b", 5120, 25600, 64, 64, 8, tied=False),  # 65.5 GB in bf16: QLoRA on one H100
    # Qwen3-30B-A3B's shape (30.5B parameters, 3.3B active; 61 GB in bf16: one H200, or an H100 for LoRA
    # only with recompute) and a small Qwen3-MoE for the H100 (2.0B parameters, 0.6B active).
    "qwen3-30b-a3b": Qwen3MoeShape("qwen3-30b-a3b", 2048, 6144, 48, 32, 4, tied=False, experts=128,
                                   experts_per_token=8, expert_intermediate=768),
    # Pythia-1.4B's shape (GPT-NeoX) over the Qwen3 vocabulary: the Python DSL's worked example at size.
    "gpt-neox-1.4b": GptNeoxShape("gpt-neox-1.4b", 2048, 8192, 24, 16, 16, tied=False),
    "qwen3-moe-2b": Qwen3MoeShape("qwen3-moe-2b", 1024, 3072, 16, 16, 8, tied=False, experts=64,
                                  experts_per_token=8, expert_intermediate=512),
}
