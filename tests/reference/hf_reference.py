#!/usr/bin/python3
"""Independent reference forward for Qwen3, Llama and Qwen3-MoE, following Hugging Face
transformers.

This file is the "truth" for the C++ model: it is written from the semantics of
transformers' modeling_qwen3.py / modeling_llama.py / modeling_qwen3_moe.py (and
modeling_rope_utils.py for the Llama 3 RoPE scaling), shares no code with lockstep, and
computes in float64 from the same stored weights (BF16/F16 values are widened exactly, so
rounding of storage is identical).

Contents:
  - a minimal safetensors reader/writer (F64, F32, F16, BF16, I64, I32) and sharded-index
    reading/writing (model.safetensors.index.json);
  - load_model_dir(): config.json + weights -> (Config, float64 weights);
  - forward_packed(): logits for a packed batch (positions restart per sequence, attention
    causal within each sequence only); forward() for one sequence;
  - compare_logits(): the metric the reference check uses.

Run `/usr/bin/python3 hf_reference.py --self-test` to check this file's own code (no C++;
the checks live in hf_reference_self_test.py).
Needs Debian's python3-torch and numpy, i.e. /usr/bin/python3.
"""

import argparse
import json
import math
import os
import struct
import sys

import numpy as np
import torch

# ----------------------------------------------------------------------------------------
# safetensors
# ----------------------------------------------------------------------------------------
# Layout: u64 little-endian header length N, N bytes of JSON header
# {name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {...}}, then the
# data buffer; offsets are relative to the start of the data buffer.

_NUMPY_DTYPES = {
    "F64": np.dtype("<f8"),
    "F32": np.dtype("<f4"),
    "F16": np.dtype("<f2"),
    "I64": np.dtype("<i8"),
    "I32": np.dtype("<i4"),
    "BF16": np.dtype("<u2"),  # raw bits; widened by _bf16_bits_to_float32
}


def _bf16_bits_to_float32(bits_u16):
    """BF16 is the upper half of an IEEE float32: shift the 16 bits into place."""
    return (bits_u16.astype(np.uint32) << np.uint32(16)).view(np.float32)


def _float32_to_bf16_bits(values_f32):
    """Round-to-nearest-even float32 -> BF16 bits (finite inputs)."""
    bits = np.ascontiguousarray(values_f32, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounding_bias = ((bits >> np.uint64(16)) & np.uint64(1)) + np.uint64(0x7FFF)
    return ((bits + rounding_bias) >> np.uint64(16)).astype(np.uint16)


def read_safetensors(path):
    """Returns (dict name -> torch tensor, metadata dict). BF16 is widened to float32,
    every other dtype keeps its own torch dtype."""
    with open(path, "rb") as f:
        blob = f.read()
    (header_len,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + header_len].decode("utf-8"))
    data_start = 8 + header_len
    metadata = header.pop("__metadata__", {}) or {}
    tensors = {}
    for name, info in header.items():
        dtype = info["dtype"]
        if dtype not in _NUMPY_DTYPES:
            raise ValueError(f"{path}: tensor {name}: unsupported dtype {dtype}")
        begin, end = info["data_offsets"]
        shape = [int(s) for s in info["shape"]]
        np_dtype = _NUMPY_DTYPES[dtype]
        count = int(np.prod(shape)) if shape else 1
        if end - begin != count * np_dtype.itemsize:
            raise ValueError(f"{path}: tensor {name}: {end - begin} bytes for shape {shape}")
        raw = np.frombuffer(blob, dtype=np_dtype, count=count, offset=data_start + begin)
        if dtype == "BF16":
            raw = _bf16_bits_to_float32(raw)
        tensors[name] = torch.from_numpy(raw.copy().reshape(shape))
    return tensors, metadata


def write_safetensors(path, tensors, dtype_by_name=None, metadata=None):
    """Writes tensors (name -> torch tensor or numpy array). dtype_by_name maps a name to the
    storage dtype ("F32", "BF16", ...); default F32 for floats, I64 for integers."""
    dtype_by_name = dtype_by_name or {}
    header = {}
    chunks = []
    offset = 0
    for name in sorted(tensors):
        value = tensors[name]
        array = value.detach().cpu().numpy() if isinstance(value, torch.Tensor) else np.asarray(value)
        dtype = dtype_by_name.get(name)
        if dtype is None:
            dtype = "I64" if np.issubdtype(array.dtype, np.integer) else "F32"
        if dtype == "BF16":
            raw = _float32_to_bf16_bits(array.astype(np.float32)).tobytes()
        else:
            raw = np.ascontiguousarray(array.astype(_NUMPY_DTYPES[dtype])).tobytes()
        header[name] = {"dtype": dtype, "shape": list(array.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        chunks.append(raw)
        offset += len(raw)
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    header_bytes = json.dumps(header, separators=(",", ":")).encode("utf-8")
    header_bytes += b" " * ((8 - len(header_bytes) % 8) % 8)  # align the data buffer
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(header_bytes)))
        f.write(header_bytes)
        for raw in chunks:
            f.write(raw)


# ----------------------------------------------------------------------------------------
# Model directory (Hugging Face layout)
# ----------------------------------------------------------------------------------------

_STORAGE_DTYPE_BY_TORCH_DTYPE = {"float32": "F32", "bfloat16": "BF16", "float16": "F16"}


_ARCH_BY_CLASS = {"Qwen3ForCausalLM": "qwen3", "LlamaForCausalLM": "llama",
                  "Qwen3MoeForCausalLM": "qwen3_moe"}


class Config:
    """The config.json fields the architectures use, with transformers' defaults."""

    def __init__(self, raw):
        self.raw = raw
        architectures = raw.get("architectures") or []
        if len(architectures) != 1 or architectures[0] not in _ARCH_BY_CLASS:
            raise ValueError(f"unsupported architectures {architectures}")
        self.arch = _ARCH_BY_CLASS[architectures[0]]
        self.has_qk_norm = self.arch in ("qwen3", "qwen3_moe")
        # Qwen3MoeConfig's fields and defaults (num_experts 0 everywhere else: all layers dense).
        moe = self.arch == "qwen3_moe"
        self.num_experts = int(raw.get("num_experts", 128)) if moe else 0
        self.num_experts_per_tok = int(raw.get("num_experts_per_tok", 8))
        self.moe_intermediate_size = int(raw.get("moe_intermediate_size", 768))
        self.norm_topk_prob = bool(raw.get("norm_topk_prob", False))
        self.decoder_sparse_step = int(raw.get("decoder_sparse_step", 1))
        self.mlp_only_layers = list(raw.get("mlp_only_layers") or [])
        self.hidden_size = int(raw["hidden_size"])
        self.intermediate_size = int(raw["intermediate_size"])
        self.num_hidden_layers = int(raw["num_hidden_layers"])
        self.num_attention_heads = int(raw["num_attention_heads"])
        self.num_key_value_heads = int(raw.get("num_key_value_heads") or self.num_attention_heads)
        head_dim = raw.get("head_dim")
        self.head_dim = int(head_dim) if head_dim else self.hidden_size // self.num_attention_heads
        self.rope_theta = float(raw.get("rope_theta", 10000.0))
        self.rope_scaling = raw.get("rope_scaling")
        self.rms_norm_eps = float(raw.get("rms_norm_eps", 1e-6))
        self.vocab_size = int(raw["vocab_size"])
        self.tie_word_embeddings = bool(raw.get("tie_word_embeddings", False))
        self.attention_bias = bool(raw.get("attention_bias", False))
        if raw.get("hidden_act", "silu") != "silu":
            raise ValueError(f"hidden_act {raw['hidden_act']} is not supported (SwiGLU uses silu)")
        if raw.get("mlp_bias", False):
            raise ValueError("mlp_bias is not supported by the reference")
        if self.num_attention_heads % self.num_key_value_heads:
            raise ValueError("num_attention_heads must be a multiple of num_key_value_heads")

    def is_sparse_layer(self, layer):
        """Qwen3MoeDecoderLayer's rule for a Qwen3MoeSparseMoeBlock."""
        return (layer not in self.mlp_only_layers and self.num_experts > 0
                and (layer + 1) % self.decoder_sparse_step == 0)


def load_weights(model_dir):
    """All tensors of a model dir (single file or sharded with an index), widened to float64."""
    index_path = os.path.join(model_dir, "model.safetensors.index.json")
    if os.path.exists(index_path):
        with open(index_path) as f:
            weight_map = json.load(f)["weight_map"]
        files = sorted(set(weight_map.values()))
    else:
        weight_map = None
        files = ["model.safetensors"]
    weights = {}
    for file_name in files:
        tensors, _ = read_safetensors(os.path.join(model_dir, file_name))
        for name, tensor in tensors.items():
            if weight_map is not None and weight_map.get(name) != file_name:
                raise ValueError(f"{file_name} holds {name}, which the index does not map to it")
            weights[name] = tensor.to(torch.float64)
    if weight_map is not None:
        missing = set(weight_map) - set(weights)
        if missing:
            raise ValueError(f"index names tensors no shard holds: {sorted(missing)[:5]}")
    return weights


def load_model_dir(model_dir):
    with open(os.path.join(model_dir, "config.json")) as f:
        config = Config(json.load(f))
    return config, load_weights(model_dir)


def write_model_dir(model_dir, config_raw, weights, num_shards=1):
    """Writes config.json and weights in the storage dtype named by config_raw["torch_dtype"];
    with num_shards > 1, model-0000i-of-0000n.safetensors plus model.safetensors.index.json."""
    os.makedirs(model_dir, exist_ok=True)
    with open(os.path.join(model_dir, "config.json"), "w") as f:
        json.dump(config_raw, f, indent=2)
    storage = _STORAGE_DTYPE_BY_TORCH_DTYPE[config_raw.get("torch_dtype", "float32")]
    names = sorted(weights)
    if num_shards == 1:
        write_safetensors(os.path.join(model_dir, "model.safetensors"), weights,
                          {n: storage for n in names}, {"format": "pt"})
        return
    weight_map = {}
    total_size = 0
    per_shard = math.ceil(len(names) / num_shards)
    for shard in range(num_shards):
        shard_names = names[shard * per_shard:(shard + 1) * per_shard]
        file_name = f"model-{shard + 1:05d}-of-{num_shards:05d}.safetensors"
        write_safetensors(os.path.join(model_dir, file_name), {n: weights[n] for n in shard_names},
                          {n: storage for n in shard_names}, {"format": "pt"})
        for n in shard_names:
            weight_map[n] = file_name
            total_size += weights[n].numel() * (4 if storage == "F32" else 2)
    with open(os.path.join(model_dir, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total_size}, "weight_map": weight_map}, f, indent=2)


# ----------------------------------------------------------------------------------------
# Forward (transformers semantics, float64)
# ----------------------------------------------------------------------------------------

def rope_inv_freq(config):
    """inv_freq exactly as transformers builds its buffer: in float32, including the Llama 3
    adjustment (_compute_default_rope_parameters / _compute_llama3_parameters). Returned as
    float64 holding those float32 values; angles and cos/sin are then taken in float64."""
    dim = config.head_dim
    base = config.rope_theta
    inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64).to(torch.float32) / dim))
    scaling = config.rope_scaling
    if scaling:
        rope_type = scaling.get("rope_type", scaling.get("type"))
        if rope_type == "default":
            pass
        elif rope_type == "llama3":
            factor = scaling["factor"]
            low_freq_factor = scaling["low_freq_factor"]
            high_freq_factor = scaling["high_freq_factor"]
            old_context_len = scaling["original_max_position_embeddings"]
            low_freq_wavelen = old_context_len / low_freq_factor
            high_freq_wavelen = old_context_len / high_freq_factor
            wavelen = 2 * math.pi / inv_freq
            # wavelen < high_freq_wavelen: unchanged; wavelen > low_freq_wavelen: divided by
            # factor; in between: smooth interpolation between the two.
            inv_freq_llama = torch.where(wavelen > low_freq_wavelen, inv_freq / factor, inv_freq)
            smooth_factor = (old_context_len / wavelen - low_freq_factor) / (
                high_freq_factor - low_freq_factor)
            smoothed_inv_freq = ((1 - smooth_factor) * inv_freq_llama / factor
                                 + smooth_factor * inv_freq_llama)
            is_medium_freq = ~(wavelen < high_freq_wavelen) * ~(wavelen > low_freq_wavelen)
            inv_freq = torch.where(is_medium_freq, smoothed_inv_freq, inv_freq_llama)
        else:
            raise ValueError(f"unsupported rope_scaling type {rope_type}")
    return inv_freq.to(torch.float64)


def rms_norm(x, weight, eps):
    """weight * (x * rsqrt(mean(x^2) + eps)) over the last dim."""
    variance = x.pow(2).mean(-1, keepdim=True)
    return weight * (x * torch.rsqrt(variance + eps))


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def apply_rope(x, cos, sin):
    """x: [heads, tokens, head_dim]; cos/sin: [tokens, head_dim]."""
    return x * cos + rotate_half(x) * sin


def _linear(x, weights, name, with_bias):
    y = x @ weights[name + ".weight"].T
    if with_bias:
        y = y + weights[name + ".bias"]
    return y


def _swiglu(x, weights, prefix):
    """down(silu(gate(x)) * up(x)) with the weights under `prefix` (e.g. "...mlp.")."""
    gate = x @ weights[prefix + "gate_proj.weight"].T
    up = x @ weights[prefix + "up_proj.weight"].T
    return (torch.nn.functional.silu(gate) * up) @ weights[prefix + "down_proj.weight"].T


def _sparse_moe(config, weights, prefix, x):
    """Qwen3MoeSparseMoeBlock: softmax over the router logits, top-k (renormalised if
    norm_topk_prob), each expert over its tokens, outputs times weights added per token."""
    probs = torch.softmax(x @ weights[prefix + "gate.weight"].T, dim=-1)
    top, chosen = torch.topk(probs, config.num_experts_per_tok, dim=-1)
    if config.norm_topk_prob:
        top = top / top.sum(dim=-1, keepdim=True)
    out = torch.zeros_like(x)
    for expert in range(config.num_experts):
        tokens, rank = torch.where(chosen == expert)
        if tokens.numel():
            y = _swiglu(x[tokens], weights, f"{prefix}experts.{expert}.")
            out.index_add_(0, tokens, y * top[tokens, rank, None])
    return out


def forward_packed(config, weights, sequences, dtype=torch.float64):
    """Logits ([total_tokens, vocab]) for a packed batch of token-id lists: positions restart
    at 0 for each sequence; attention is causal within each sequence only. The reference is
    dtype float64; float32 exists only for fake_lockstep.py (a test of the test)."""
    weights = {name: w.to(dtype) for name, w in weights.items()}
    token_ids = torch.tensor([t for seq in sequences for t in seq], dtype=torch.int64)
    positions = torch.tensor([p for seq in sequences for p in range(len(seq))], dtype=torch.float64)
    seq_ids = torch.tensor([i for i, seq in enumerate(sequences) for _ in seq], dtype=torch.int64)
    num_tokens = token_ids.numel()
    if int(token_ids.max()) >= config.vocab_size or int(token_ids.min()) < 0:
        raise ValueError("token id out of range")

    # Mask: query i may attend key j iff same sequence and j <= i (positions restart per
    # sequence, and sequences are contiguous, so index order is position order).
    index = torch.arange(num_tokens)
    allowed = (seq_ids[:, None] == seq_ids[None, :]) & (index[None, :] <= index[:, None])

    inv_freq = rope_inv_freq(config)
    angles = positions[:, None] * inv_freq[None, :]        # [tokens, head_dim/2]
    emb = torch.cat((angles, angles), dim=-1)              # [tokens, head_dim]
    cos, sin = emb.cos().to(dtype), emb.sin().to(dtype)

    num_heads = config.num_attention_heads
    num_kv_heads = config.num_key_value_heads
    head_dim = config.head_dim
    groups = num_heads // num_kv_heads
    scale = head_dim ** -0.5
    bias = config.attention_bias
    eps = config.rms_norm_eps

    hidden = weights["model.embed_tokens.weight"][token_ids]   # [tokens, hidden]
    for layer in range(config.num_hidden_layers):
        prefix = f"model.layers.{layer}."
        residual = hidden
        x = rms_norm(hidden, weights[prefix + "input_layernorm.weight"], eps)
        q = _linear(x, weights, prefix + "self_attn.q_proj", bias).view(num_tokens, num_heads, head_dim)
        k = _linear(x, weights, prefix + "self_attn.k_proj", bias).view(num_tokens, num_kv_heads, head_dim)
        v = _linear(x, weights, prefix + "self_attn.v_proj", bias).view(num_tokens, num_kv_heads, head_dim)
        if config.has_qk_norm:  # QK-norm per head over head_dim, before RoPE
            q = rms_norm(q, weights[prefix + "self_attn.q_norm.weight"], eps)
            k = rms_norm(k, weights[prefix + "self_attn.k_norm.weight"], eps)
        q = apply_rope(q.transpose(0, 1), cos, sin)            # [heads, tokens, head_dim]
        k = apply_rope(k.transpose(0, 1), cos, sin)
        v = v.transpose(0, 1)
        k = k.repeat_interleave(groups, dim=0)                  # repeat_kv: head h uses kv h // groups
        v = v.repeat_interleave(groups, dim=0)
        scores = (q @ k.transpose(1, 2)) * scale                # [heads, tokens, tokens]
        scores = scores.masked_fill(~allowed, float("-inf"))
        probs = torch.softmax(scores, dim=-1)
        attn = (probs @ v).transpose(0, 1).reshape(num_tokens, num_heads * head_dim)
        hidden = residual + _linear(attn, weights, prefix + "self_attn.o_proj", bias)

        residual = hidden
        x = rms_norm(hidden, weights[prefix + "post_attention_layernorm.weight"], eps)
        if config.is_sparse_layer(layer):
            hidden = residual + _sparse_moe(config, weights, prefix + "mlp.", x)
        else:
            hidden = residual + _swiglu(x, weights, prefix + "mlp.")

    hidden = rms_norm(hidden, weights["model.norm.weight"], eps)
    head = (weights["model.embed_tokens.weight"] if config.tie_word_embeddings
            else weights["lm_head.weight"])
    return hidden @ head.T


def forward(config, weights, token_ids):
    """Logits (float64, [len, vocab]) for one sequence."""
    return forward_packed(config, weights, [list(token_ids)])


# ----------------------------------------------------------------------------------------
# Comparison
# ----------------------------------------------------------------------------------------

METRIC_DESCRIPTION = ("rel = max|cpp - ref| / max|ref| over one sequence's logits "
                      "(cpp: C++ fp32, ref: this file in float64); pass iff rel <= tol for every "
                      "sequence. elem = max over elements of |cpp - ref| / |ref| (information only)")


def compare_logits(candidate, reference):
    """Returns (rel, elem): the pass/fail metric and the elementwise max relative error."""
    candidate = candidate.to(torch.float64)
    reference = reference.to(torch.float64)
    diff = (candidate - reference).abs()
    rel = float(diff.max() / reference.abs().max())
    elem = float((diff / reference.abs().clamp_min(torch.finfo(torch.float64).tiny)).max())
    return rel, elem


# ----------------------------------------------------------------------------------------
# Synthetic checkpoints (used by the self-test and by the reference check's own files)
# ----------------------------------------------------------------------------------------

def random_weights(config, seed):
    """float64 weights with unit-scale activations (so attention, RoPE and norms all matter):
    embeddings ~ N(0, 1), linears ~ N(0, 1/fan_in), norm weights ~ 1 + N(0, 0.1^2)."""
    g = torch.Generator().manual_seed(seed)

    def normal(*shape, std=1.0):
        return torch.randn(*shape, generator=g, dtype=torch.float64) * std

    def linear(out_features, in_features):
        return normal(out_features, in_features, std=in_features ** -0.5)

    def norm(size):
        return 1.0 + normal(size, std=0.1)

    h, inter = config.hidden_size, config.intermediate_size
    q_size = config.num_attention_heads * config.head_dim
    kv_size = config.num_key_value_heads * config.head_dim
    weights = {"model.embed_tokens.weight": normal(config.vocab_size, h),
               "model.norm.weight": norm(h)}
    if not config.tie_word_embeddings:
        weights["lm_head.weight"] = linear(config.vocab_size, h)
    for layer in range(config.num_hidden_layers):
        p = f"model.layers.{layer}."
        weights[p + "input_layernorm.weight"] = norm(h)
        weights[p + "post_attention_layernorm.weight"] = norm(h)
        weights[p + "self_attn.q_proj.weight"] = linear(q_size, h)
        weights[p + "self_attn.k_proj.weight"] = linear(kv_size, h)
        weights[p + "self_attn.v_proj.weight"] = linear(kv_size, h)
        weights[p + "self_attn.o_proj.weight"] = linear(h, q_size)
        if config.attention_bias:
            weights[p + "self_attn.q_proj.bias"] = normal(q_size, std=0.1)
            weights[p + "self_attn.k_proj.bias"] = normal(kv_size, std=0.1)
            weights[p + "self_attn.v_proj.bias"] = normal(kv_size, std=0.1)
            weights[p + "self_attn.o_proj.bias"] = normal(h, std=0.1)
        if config.has_qk_norm:
            weights[p + "self_attn.q_norm.weight"] = norm(config.head_dim)
            weights[p + "self_attn.k_norm.weight"] = norm(config.head_dim)
        sparse = config.is_sparse_layer(layer)
        mlps = [f"mlp.experts.{e}." for e in range(config.num_experts)] if sparse else ["mlp."]
        width = config.moe_intermediate_size if sparse else inter
        if sparse:
            weights[p + "mlp.gate.weight"] = linear(config.num_experts, h)
        for mlp in mlps:
            weights[p + mlp + "gate_proj.weight"] = linear(width, h)
            weights[p + mlp + "up_proj.weight"] = linear(width, h)
            weights[p + mlp + "down_proj.weight"] = linear(h, width)
    return weights


def synthetic_config(arch, **overrides):
    """A small config.json of `arch` ("qwen3", "llama", "qwen3_moe"), fields overridable."""
    raw = {
        "architectures": [{v: k for k, v in _ARCH_BY_CLASS.items()}[arch]],
        "model_type": arch,
        "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
        "rope_theta": 10000.0, "rope_scaling": None, "rms_norm_eps": 1e-6,
        "vocab_size": 300, "tie_word_embeddings": False, "max_position_embeddings": 512,
        "torch_dtype": "float32", "attention_bias": False,
    }
    if arch == "qwen3_moe":
        raw.update({"num_experts": 6, "num_experts_per_tok": 2, "moe_intermediate_size": 32,
                    "norm_topk_prob": True, "decoder_sparse_step": 1, "mlp_only_layers": [],
                    "router_aux_loss_coef": 0.001})
    raw.update(overrides)
    return raw


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--self-test", action="store_true", help="check this file's own code")
    parser.add_argument("--model", help="model dir: print logits for --tokens")
    parser.add_argument("--tokens", action="append", default=[],
                        help="comma-separated token ids; repeat for several sequences")
    args = parser.parse_args()
    torch.set_num_threads(1)
    if args.self_test:
        import hf_reference_self_test  # pylint: disable=import-outside-toplevel
        hf_reference_self_test.self_test()
        return 0
    if args.model and args.tokens:
        config, weights = load_model_dir(args.model)
        for text in args.tokens:
            ids = [int(t) for t in text.split(",")]
            logits = forward(config, weights, ids)
            print(f"tokens {ids}: last-position logits[:8] = {logits[-1, :8].tolist()}")
        return 0
    parser.print_help()
    return 2


if __name__ == "__main__":
    sys.exit(main())
