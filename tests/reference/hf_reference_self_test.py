#!/usr/bin/python3
"""Self-test of hf_reference.py's own code (no C++): safetensors round trips, model dirs,
RoPE, the dense forward (packing, causality, QK-norm, tied head) and the Qwen3-MoE block
(Hugging Face's sparse-layer rule, top-k routing against a dense evaluation of every expert).

Run through `/usr/bin/python3 hf_reference.py --self-test`.
"""

import math
import os
import struct
import sys
import tempfile

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hf_reference import (  # noqa: E402
    Config, _bf16_bits_to_float32, _float32_to_bf16_bits, _sparse_moe, _swiglu, apply_rope,
    compare_logits, forward, forward_packed, load_model_dir, random_weights, read_safetensors,
    rope_inv_freq, synthetic_config, write_model_dir, write_safetensors)


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


def _self_test_moe():
    config = Config(synthetic_config("qwen3_moe", num_hidden_layers=6, decoder_sparse_step=2,
                                     mlp_only_layers=[3]))
    sparse = [layer for layer in range(6) if config.is_sparse_layer(layer)]
    _check(sparse == [1, 5], "moe: sparse layers follow (i+1) % step == 0 minus mlp_only_layers")
    weights = random_weights(config, seed=12)
    _check("model.layers.1.mlp.experts.5.down_proj.weight" in weights
           and "model.layers.3.mlp.gate_proj.weight" in weights
           and "model.layers.3.mlp.gate.weight" not in weights,
           "moe: random weights carry experts in sparse layers only")
    g = torch.Generator().manual_seed(13)
    x = torch.randn(17, config.hidden_size, generator=g, dtype=torch.float64)
    prefix = "model.layers.1.mlp."
    # Independent evaluation: every expert on every token, weighted by a dense mask.
    probs = torch.softmax(x @ weights[prefix + "gate.weight"].T, dim=-1)
    for normalize in (False, True):
        config.norm_topk_prob = normalize
        k = config.num_experts_per_tok
        threshold = probs.sort(dim=-1, descending=True).values[:, k - 1:k]
        mask = (probs >= threshold).to(probs.dtype)
        gates = probs * mask
        if normalize:
            gates = gates / gates.sum(dim=-1, keepdim=True)
        dense = sum(gates[:, e:e + 1] * _swiglu(x, weights, f"{prefix}experts.{e}.")
                    for e in range(config.num_experts))
        rel, _ = compare_logits(_sparse_moe(config, weights, prefix, x), dense)
        _check(rel < 1e-12, f"moe: top-{k} block equals a dense mask over all experts "
                            f"(norm_topk_prob {normalize}, rel {rel:.1e})")
    # All experts, renormalised: the full softmax mixture.
    config.num_experts_per_tok = config.num_experts
    config.norm_topk_prob = True
    dense = sum(probs[:, e:e + 1] * _swiglu(x, weights, f"{prefix}experts.{e}.")
                for e in range(config.num_experts))
    rel, _ = compare_logits(_sparse_moe(config, weights, prefix, x), dense)
    _check(rel < 1e-12, f"moe: k = num_experts is the softmax mixture (rel {rel:.1e})")
    config = Config(synthetic_config("qwen3_moe", num_hidden_layers=3, mlp_only_layers=[1]))
    weights = random_weights(config, seed=14)
    rng = np.random.default_rng(15)
    sequences = [rng.integers(0, config.vocab_size, n).tolist() for n in (9, 1, 30)]
    packed = forward_packed(config, weights, sequences)
    separate = torch.cat([forward(config, weights, seq) for seq in sequences])
    rel, _ = compare_logits(packed, separate)
    _check(rel < 1e-12, f"moe: packed forward equals per-sequence forwards (rel {rel:.1e})")


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
    print("qwen3-moe:")
    _self_test_moe()
    print("SELF-TEST PASSED")


if __name__ == "__main__":
    self_test()
