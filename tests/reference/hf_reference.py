#!/usr/bin/python3
"""Independent reference forward for Qwen3 and Llama, following Hugging Face transformers.

This file is the "truth" for the C++ model: it is written from the semantics of
transformers' modeling_qwen3.py / modeling_llama.py (and modeling_rope_utils.py for the
Llama 3 RoPE scaling), shares no code with lockstep, and computes in float64 from the same
stored weights (BF16/F16 values are widened exactly, so rounding of storage is identical).

Contents:
  - a minimal safetensors reader/writer (F64, F32, F16, BF16, I64, I32) and sharded-index
    reading/writing (model.safetensors.index.json);
  - load_model_dir(): config.json + weights -> (Config, float64 weights);
  - forward_packed(): logits for a packed batch (positions restart per sequence, attention
    causal within each sequence only); forward() for one sequence;
  - compare_logits(): the metric the reference check uses.

Run `/usr/bin/python3 hf_reference.py --self-test` to check this file's own code (no C++).
Needs Debian's python3-torch and numpy, i.e. /usr/bin/python3.
"""

import argparse
import json
import math
import os
import struct
import sys
import tempfile

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


class Config:
    """The config.json fields both architectures use, with transformers' defaults."""

    def __init__(self, raw):
        self.raw = raw
        architectures = raw.get("architectures") or []
        if architectures == ["Qwen3ForCausalLM"]:
            self.arch = "qwen3"
        elif architectures == ["LlamaForCausalLM"]:
            self.arch = "llama"
        else:
            raise ValueError(f"unsupported architectures {architectures}")
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
        if config.arch == "qwen3":  # QK-norm per head over head_dim, before RoPE
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
        gate = x @ weights[prefix + "mlp.gate_proj.weight"].T
        up = x @ weights[prefix + "mlp.up_proj.weight"].T
        hidden = residual + (torch.nn.functional.silu(gate) * up) @ weights[prefix + "mlp.down_proj.weight"].T

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
        if config.arch == "qwen3":
            weights[p + "self_attn.q_norm.weight"] = norm(config.head_dim)
            weights[p + "self_attn.k_norm.weight"] = norm(config.head_dim)
        weights[p + "mlp.gate_proj.weight"] = linear(inter, h)
        weights[p + "mlp.up_proj.weight"] = linear(inter, h)
        weights[p + "mlp.down_proj.weight"] = linear(h, inter)
    return weights


def synthetic_config(arch, **overrides):
    raw = {
        "architectures": ["Qwen3ForCausalLM" if arch == "qwen3" else "LlamaForCausalLM"],
        "model_type": arch,
        "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
        "rope_theta": 10000.0, "rope_scaling": None, "rms_norm_eps": 1e-6,
        "vocab_size": 300, "tie_word_embeddings": False, "max_position_embeddings": 512,
        "torch_dtype": "float32", "attention_bias": False,
    }
    raw.update(overrides)
    return raw


# ----------------------------------------------------------------------------------------
# Self-test of this file's own code
# ----------------------------------------------------------------------------------------

def _check(condition, message):
    if not condition:
        raise AssertionError(message)
    print(f"  ok  {message}")


def _self_test_safetensors(tmp):
    g = torch.Generator().manual_seed(1)
    tensors = {"a": torch.randn(3, 5, generator=g, dtype=torch.float64),
               "b": torch.randn(7, generator=g, dtype=torch.float64),
               "c": torch.randn(2, 2, 2, generator=g, dtype=torch.float64),
               "d": torch.randn(4, 3, generator=g, dtype=torch.float64),
               "ids": torch.tensor([0, 3, 9, 2 ** 40], dtype=torch.int64),
               "scalar": torch.tensor(2.5, dtype=torch.float64)}
    dtypes = {"a": "F32", "b": "BF16", "c": "F16", "d": "F64", "ids": "I64", "scalar": "F32"}
    path = os.path.join(tmp, "roundtrip.safetensors")
    write_safetensors(path, tensors, dtypes, {"format": "pt"})
    back, metadata = read_safetensors(path)
    _check(metadata == {"format": "pt"}, "safetensors: metadata round trip")
    _check(set(back) == set(tensors), "safetensors: names round trip")
    _check(all(list(back[n].shape) == list(tensors[n].shape) for n in tensors),
           "safetensors: shapes round trip (incl. 0-d)")
    _check(torch.equal(back["a"], tensors["a"].to(torch.float32)), "safetensors: F32 exact")
    _check(torch.equal(back["d"], tensors["d"]), "safetensors: F64 exact")
    _check(torch.equal(back["c"], tensors["c"].to(torch.float16)), "safetensors: F16 equals torch's rounding")
    _check(torch.equal(back["b"], tensors["b"].to(torch.float32).to(torch.bfloat16).to(torch.float32)),
           "safetensors: BF16 write/read equals torch's round-to-nearest-even")
    _check(torch.equal(back["ids"], tensors["ids"]), "safetensors: I64 exact")
    with open(path, "rb") as f:
        (header_len,) = struct.unpack("<Q", f.read(8))
    _check(header_len % 8 == 0, "safetensors: header padded to 8 bytes")
    # BF16 bit patterns, independent of torch: 1.0 = 0x3F80, -2.0 = 0xC000, 1+2^-8 ties to even.
    bits = _float32_to_bf16_bits(np.array([1.0, -2.0, 1.0 + 2.0 ** -8, 1.0 + 3 * 2.0 ** -8], np.float32))
    _check(list(bits) == [0x3F80, 0xC000, 0x3F80, 0x3F82], "bf16: known bit patterns, ties to even")
    _check(list(_bf16_bits_to_float32(np.array([0x3F80, 0xC000, 0x8000], np.uint16))) == [1.0, -2.0, -0.0],
           "bf16: known widenings")


def _self_test_model_dir(tmp):
    raw = synthetic_config("llama", torch_dtype="bfloat16")
    config = Config(raw)
    weights = random_weights(config, seed=5)
    single = os.path.join(tmp, "single")
    sharded = os.path.join(tmp, "sharded")
    write_model_dir(single, raw, weights, num_shards=1)
    write_model_dir(sharded, raw, weights, num_shards=3)
    _, w1 = load_model_dir(single)
    _, w3 = load_model_dir(sharded)
    _check(len(os.listdir(sharded)) == 5, "model dir: 3 shards + index + config written")
    _check(set(w1) == set(weights) == set(w3), "model dir: sharded and single hold all names")
    _check(all(torch.equal(w1[n], w3[n]) for n in w1), "model dir: sharded equals single file")
    _check(all(torch.equal(w1[n], weights[n].to(torch.float32).to(torch.bfloat16).to(torch.float64))
               for n in w1), "model dir: BF16 weights read back as their rounded values")


def _self_test_rope():
    # Default RoPE: inv_freq[i] = theta^(-2i/d).
    config = Config(synthetic_config("llama", head_dim=16, rope_theta=10000.0))
    expected = torch.tensor([10000.0 ** (-2 * i / 16) for i in range(8)], dtype=torch.float64)
    _check(torch.allclose(rope_inv_freq(config), expected, rtol=1e-6, atol=0),
           "rope: default inv_freq = theta^(-2i/d)")
    # Llama 3 rule, written out per element as in Meta's reference (apply_scaling).
    scaling = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
               "high_freq_factor": 4.0, "original_max_position_embeddings": 64}
    config = Config(synthetic_config("llama", head_dim=16, rope_theta=500000.0, rope_scaling=scaling))
    base = rope_inv_freq(Config(synthetic_config("llama", head_dim=16, rope_theta=500000.0)))
    expected = []
    kinds = set()
    for freq in base.tolist():
        wavelen = 2 * math.pi / freq
        if wavelen < 64 / 4.0:
            expected.append(freq)
            kinds.add("high")
        elif wavelen > 64 / 1.0:
            expected.append(freq / 8.0)
            kinds.add("low")
        else:
            smooth = (64 / wavelen - 1.0) / (4.0 - 1.0)
            expected.append((1 - smooth) * freq / 8.0 + smooth * freq)
            kinds.add("medium")
    _check(torch.allclose(rope_inv_freq(config), torch.tensor(expected, dtype=torch.float64),
                          rtol=1e-6, atol=0), "rope: llama3 scaling matches Meta's apply_scaling")
    _check(kinds == {"high", "medium", "low"}, "rope: the llama3 test config hits all three bands")
    # rotate_half convention: pair (i, i + d/2) rotates by angle pos * inv_freq[i].
    g = torch.Generator().manual_seed(3)
    x = torch.randn(1, 1, 16, generator=g, dtype=torch.float64)
    angle = 5 * rope_inv_freq(config)
    emb = torch.cat((angle, angle))
    y = apply_rope(x, emb.cos()[None], emb.sin()[None])[0, 0]
    z = torch.complex(x[0, 0, :8], x[0, 0, 8:]) * torch.exp(1j * angle)
    _check(torch.allclose(y, torch.cat((z.real, z.imag)), atol=1e-14, rtol=0),
           "rope: rotate_half pairs (i, i+d/2) rotate by pos*inv_freq[i]")


def _self_test_forward():
    rng = np.random.default_rng(11)
    for arch, overrides in (("qwen3", {"head_dim": 32, "tie_word_embeddings": True}),
                            ("llama", {"attention_bias": True, "rope_scaling": {
                                "rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                "high_freq_factor": 4.0, "original_max_position_embeddings": 64},
                                "rope_theta": 500000.0})):
        config = Config(synthetic_config(arch, **overrides))
        weights = random_weights(config, seed=7)
        sequences = [rng.integers(0, config.vocab_size, n).tolist() for n in (1, 5, 40, 12)]
        packed = forward_packed(config, weights, sequences)
        separate = torch.cat([forward(config, weights, seq) for seq in sequences])
        rel, _ = compare_logits(packed, separate)
        _check(rel < 1e-12, f"{arch}: packed forward equals per-sequence forwards (rel {rel:.1e})")
        prefix = forward(config, weights, sequences[2][:17])
        rel, _ = compare_logits(prefix, separate[6:6 + 17])
        _check(rel < 1e-12, f"{arch}: causal: a prefix's logits do not see later tokens (rel {rel:.1e})")
        # Order matters (RoPE is applied): without positions, attention is a permutation-
        # invariant pooling over keys, so swapping the first two tokens would not change the
        # last position's logits.
        swapped = forward(config, weights, [4, 3, 5])[-1]
        _check(not torch.allclose(forward(config, weights, [3, 4, 5])[-1], swapped),
               f"{arch}: logits depend on token order (RoPE is applied)")
        _check(bool(torch.isfinite(packed).all()) and float(packed.std()) > 0.1,
               f"{arch}: logits finite and not degenerate (std {float(packed.std()):.2f})")
    # Qwen3 QK-norm is used: scaling q_proj leaves a Qwen3 model's logits unchanged.
    config = Config(synthetic_config("qwen3", rms_norm_eps=1e-30))
    weights = random_weights(config, seed=9)
    scaled = dict(weights)
    for layer in range(config.num_hidden_layers):
        scaled[f"model.layers.{layer}.self_attn.q_proj.weight"] = weights[f"model.layers.{layer}.self_attn.q_proj.weight"] * 3
    rel, _ = compare_logits(forward(config, scaled, [1, 2, 3, 4]), forward(config, weights, [1, 2, 3, 4]))
    _check(rel < 1e-12, "qwen3: q_norm makes logits invariant to q_proj scale")
    # Tied head: the head is the embedding matrix.
    config = Config(synthetic_config("qwen3", tie_word_embeddings=True))
    weights = random_weights(config, seed=9)
    _check("lm_head.weight" not in weights, "tied: no lm_head.weight needed")
    forward(config, weights, [1, 2])


def self_test():
    with tempfile.TemporaryDirectory() as tmp:
        print("safetensors:")
        _self_test_safetensors(tmp)
        print("model dir:")
        _self_test_model_dir(tmp)
    print("rope:")
    _self_test_rope()
    print("forward:")
    _self_test_forward()
    print("SELF-TEST PASSED")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--self-test", action="store_true", help="check this file's own code")
    parser.add_argument("--model", help="model dir: print logits for --tokens")
    parser.add_argument("--tokens", action="append", default=[],
                        help="comma-separated token ids; repeat for several sequences")
    args = parser.parse_args()
    torch.set_num_threads(1)
    if args.self_test:
        self_test()
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
