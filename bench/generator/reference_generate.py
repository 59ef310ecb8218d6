#!/usr/bin/python3
"""Reference generation loop for bench_generator: a minimal Qwen3 forward with a KV cache.

Loads config.json + model.safetensors written by lockstep (float32, Hugging Face names), then
generates greedily for a batch of equal-length prompts: one batched prefill over all prompt
tokens, then one batched decode step per token. Kept honest as a speed reference:
  - the KV cache is preallocated once ([batch, kv_heads, max_len, head_dim] per layer) and written
    in place; attention reads a view of the filled prefix (no concatenation, no recompute);
  - grouped-query attention without repeating keys/values (queries are grouped per kv head);
  - logits only for each sequence's last position; greedy token plus its fp32 log-prob
    (log_softmax over the vocabulary), as the C++ engine reports one.
It is a reference for speed, not for bit parity with the C++ model.

Usage (bench_generator runs it):
  reference_generate.py --model DIR --prompts FILE --max-tokens 64 --threads 1 --out FILE
FILE (prompts) is a JSON list of equal-length token id lists. Writes JSON to --out:
  {prefill,decode}_seconds (wall clock), {prefill,decode}_cpu_seconds (process CPU time),
  decode_tokens, decode_tokens_per_s, decode_tokens_per_cpu_s, tokens_per_s, tokens.
"""

import argparse
import json
import os
import struct
import time

import numpy as np
import torch
import torch.nn.functional as F

_DTYPES = {"F32": np.float32, "F16": np.float16}


def load_safetensors(path):
    """Returns {name: float32 torch tensor} from one .safetensors file."""
    with open(path, "rb") as f:
        (header_len,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(header_len))
        data = f.read()
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        if info["dtype"] not in _DTYPES:
            raise ValueError(f"{path}: tensor {name} has unsupported dtype {info['dtype']}")
        begin, end = info["data_offsets"]
        dtype = np.dtype(_DTYPES[info["dtype"]])
        array = np.frombuffer(data, dtype=dtype, count=(end - begin) // dtype.itemsize,
                              offset=begin).reshape(info["shape"])
        tensors[name] = torch.from_numpy(array.astype(np.float32, copy=True))
    return tensors


class Qwen3:
    """Qwen3 dense or MoE forward (RMSNorm, RoPE, GQA, QK-norm, SwiGLU or Qwen3-MoE's sparse
    blocks, tied or untied head)."""

    def __init__(self, model_dir):
        with open(os.path.join(model_dir, "config.json")) as f:
            self.config = c = json.load(f)
        self.w = load_safetensors(os.path.join(model_dir, "model.safetensors"))
        self.num_layers = c["num_hidden_layers"]
        self.num_heads = c["num_attention_heads"]
        self.num_kv_heads = c["num_key_value_heads"]
        self.head_dim = c.get("head_dim", c["hidden_size"] // self.num_heads)
        self.eps = c["rms_norm_eps"]
        self.group = self.num_heads // self.num_kv_heads
        self.embed = self.w["model.embed_tokens.weight"]
        self.head = self.embed if c.get("tie_word_embeddings") else self.w["lm_head.weight"]
        self.layers = []
        for i in range(self.num_layers):
            p = f"model.layers.{i}."
            self.layers.append({k[len(p):]: v for k, v in self.w.items() if k.startswith(p)})
        self.final_norm = self.w["model.norm.weight"]
        # RoPE (rotate-half layout, as transformers): angles [max_positions, head_dim].
        d = self.head_dim
        inv_freq = 1.0 / (c["rope_theta"] ** (torch.arange(0, d, 2).float() / d))
        positions = torch.arange(c["max_position_embeddings"]).float()
        freqs = torch.outer(positions, inv_freq)
        angles = torch.cat([freqs, freqs], dim=-1)
        self.cos, self.sin = angles.cos(), angles.sin()

    def rms_norm(self, x, weight):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * weight

    def rope(self, x, start, length):
        # x: [B, T, heads, d]
        cos = self.cos[start:start + length].view(1, length, 1, -1)
        sin = self.sin[start:start + length].view(1, length, 1, -1)
        half = self.head_dim // 2
        rotated = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
        return x * cos + rotated * sin

    def new_cache(self, batch, max_len):
        shape = (batch, self.num_kv_heads, max_len, self.head_dim)
        return [(torch.empty(shape), torch.empty(shape)) for _ in range(self.num_layers)]

    def attention(self, layer, x, cache, start):
        b, t, _ = x.shape
        h, kvh, d, g = self.num_heads, self.num_kv_heads, self.head_dim, self.group
        q = F.linear(x, layer["self_attn.q_proj.weight"]).view(b, t, h, d)
        k = F.linear(x, layer["self_attn.k_proj.weight"]).view(b, t, kvh, d)
        v = F.linear(x, layer["self_attn.v_proj.weight"]).view(b, t, kvh, d)
        q = self.rope(self.rms_norm(q, layer["self_attn.q_norm.weight"]), start, t)
        k = self.rope(self.rms_norm(k, layer["self_attn.k_norm.weight"]), start, t)
        cache_k, cache_v = cache
        end = start + t
        cache_k[:, :, start:end] = k.transpose(1, 2)
        cache_v[:, :, start:end] = v.transpose(1, 2)
        keys, values = cache_k[:, :, :end], cache_v[:, :, :end]  # views: [b, kvh, end, d]
        # Query head j uses kv head j // g: group the g query heads of each kv head together.
        qg = q.view(b, t, kvh, g, d).permute(0, 2, 3, 1, 4).reshape(b, kvh, g * t, d)
        scores = torch.matmul(qg, keys.transpose(-1, -2)) * (d ** -0.5)  # [b, kvh, g*t, end]
        if t > 1:  # causal within the new tokens: query i (position start+i) sees keys <= it
            key_pos = torch.arange(end).view(1, end)
            query_pos = torch.arange(start, end).view(t, 1)
            mask = torch.zeros(t, end).masked_fill_(key_pos > query_pos, float("-inf"))
            scores = scores.view(b, kvh, g, t, end) + mask
            scores = scores.view(b, kvh, g * t, end)
        out = torch.matmul(torch.softmax(scores, dim=-1), values)  # [b, kvh, g*t, d]
        out = out.view(b, kvh, g, t, d).permute(0, 3, 1, 2, 4).reshape(b, t, h * d)
        return F.linear(out, layer["self_attn.o_proj.weight"])

    def mlp(self, layer, x, prefix="mlp."):
        return F.linear(F.silu(F.linear(x, layer[prefix + "gate_proj.weight"])) *
                        F.linear(x, layer[prefix + "up_proj.weight"]),
                        layer[prefix + "down_proj.weight"])

    def moe(self, layer, x):
        """Qwen3-MoE's sparse block as transformers runs it: softmax over the router logits,
        top-k (renormalised if norm_topk_prob), each chosen expert over its tokens."""
        flat = x.reshape(-1, x.shape[-1])
        probs = torch.softmax(F.linear(flat, layer["mlp.gate.weight"]), dim=-1)
        top, chosen = torch.topk(probs, self.config["num_experts_per_tok"], dim=-1)
        if self.config.get("norm_topk_prob"):
            top = top / top.sum(dim=-1, keepdim=True)
        out = torch.zeros_like(flat)
        for expert in chosen.unique().tolist():
            rows, rank = torch.where(chosen == expert)
            y = self.mlp(layer, flat[rows], f"mlp.experts.{expert}.")
            out.index_add_(0, rows, y * top[rows, rank, None])
        return out.view_as(x)

    def forward_last(self, tokens, caches, start):
        """tokens [B, T] at positions start..start+T-1 -> float32 logits [B, vocab] of the last."""
        x = F.embedding(tokens, self.embed)
        for layer, cache in zip(self.layers, caches):
            x = x + self.attention(layer, self.rms_norm(x, layer["input_layernorm.weight"]),
                                   cache, start)
            hn = self.rms_norm(x, layer["post_attention_layernorm.weight"])
            x = x + (self.moe(layer, hn) if "mlp.gate.weight" in layer else self.mlp(layer, hn))
        last = self.rms_norm(x[:, -1], self.final_norm)
        return F.linear(last, self.head)


def greedy(logits):
    token = logits.argmax(-1)
    logprob = torch.log_softmax(logits, dim=-1).gather(-1, token.unsqueeze(-1)).squeeze(-1)
    return token, logprob


def generate(model, prompts, max_tokens):
    """Greedy generation; returns (tokens [B, max_tokens], {prefill|decode}_{cpu_}seconds).

    Wall-clock and process CPU seconds of the prefill and of the decode steps."""
    batch, prompt_len = prompts.shape
    caches = model.new_cache(batch, prompt_len + max_tokens)
    times = [(time.perf_counter(), time.process_time())]
    token, _ = greedy(model.forward_last(prompts, caches, 0))
    generated = [token]
    times.append((time.perf_counter(), time.process_time()))
    for step in range(1, max_tokens):
        token, _ = greedy(model.forward_last(token.view(batch, 1), caches, prompt_len + step - 1))
        generated.append(token)
    times.append((time.perf_counter(), time.process_time()))
    spans = {
        "prefill_seconds": times[1][0] - times[0][0],
        "decode_seconds": times[2][0] - times[1][0],
        "prefill_cpu_seconds": times[1][1] - times[0][1],
        "decode_cpu_seconds": times[2][1] - times[1][1],
    }
    return torch.stack(generated, dim=1), spans


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--prompts", required=True)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    if args.max_tokens < 2:
        parser.error("--max-tokens must be >= 2 (one prefill token, then decode steps)")
    torch.set_num_threads(args.threads)
    with open(args.prompts) as f:
        prompts = torch.tensor(json.load(f), dtype=torch.int64)
    with torch.inference_mode():
        model = Qwen3(args.model)
        generate(model, prompts[:, :8], 4)  # warm-up: allocator and kernels, not timed
        tokens, spans = generate(model, prompts, args.max_tokens)
    batch = prompts.shape[0]
    decode_tokens = batch * (args.max_tokens - 1)
    result = {
        "batch": batch,
        "prompt_len": prompts.shape[1],
        "max_tokens": args.max_tokens,
        "threads": torch.get_num_threads(),
        "torch_version": torch.__version__,
        **spans,
        "decode_tokens": decode_tokens,
        "decode_tokens_per_s": decode_tokens / spans["decode_seconds"],
        "decode_tokens_per_cpu_s": decode_tokens / spans["decode_cpu_seconds"],
        "tokens_per_s": batch * args.max_tokens / (spans["prefill_seconds"] +
                                                   spans["decode_seconds"]),
        "tokens": tokens.tolist(),
    }
    with open(args.out, "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    main()
