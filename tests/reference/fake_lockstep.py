#!/usr/bin/python3
"""A stand-in for `lockstep init-model` / `lockstep forward`, used only to test the reference
check itself (run_reference_check.py --self-test): it computes the packed forward with
hf_reference.py in float32, which must pass the 1e-5 bar, and with FAKE_LOCKSTEP_BUG set it
injects a known error that the check must catch:
  one_sequence        the packed batch is run as one sequence (boundaries ignored)
  float16_logits      logits rounded through float16 (a precision loss of ~5e-4)
"""

import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hf_reference as ref  # noqa: E402


def main():
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command", required=True)
    init = sub.add_parser("init-model")
    init.add_argument("--arch", required=True, choices=["qwen3", "llama", "qwen3_moe"])
    init.add_argument("--preset", required=True, choices=["tiny"])
    init.add_argument("--out", required=True)
    init.add_argument("--seed", type=int, required=True)
    fwd = sub.add_parser("forward")
    fwd.add_argument("--model", required=True)
    fwd.add_argument("--tokens", action="append", required=True)
    fwd.add_argument("--dump", required=True)
    args = parser.parse_args()
    bug = os.environ.get("FAKE_LOCKSTEP_BUG", "")

    if args.command == "init-model":
        raw = ref.synthetic_config(args.arch, tie_word_embeddings=args.arch == "qwen3")
        ref.write_model_dir(args.out, raw, ref.random_weights(ref.Config(raw), args.seed))
        return 0

    config, weights = ref.load_model_dir(args.model)
    sequences = [[int(t) for t in text.split(",")] for text in args.tokens]
    # (Positions that continue across sequences instead of restarting would be no bug here:
    # RoPE is relative, so a per-sequence position offset does not change the logits.)
    packed = [[t for seq in sequences for t in seq]] if bug == "one_sequence" else sequences
    logits = ref.forward_packed(config, weights, packed, dtype=torch.float32)
    if bug == "float16_logits":
        logits = logits.to(torch.float16).to(torch.float32)
    cu_seqlens = [0]
    for seq in sequences:
        cu_seqlens.append(cu_seqlens[-1] + len(seq))
    ref.write_safetensors(args.dump, {"logits": logits,
                                      "cu_seqlens": torch.tensor(cu_seqlens, dtype=torch.int64)},
                          {"logits": "F32", "cu_seqlens": "I64"})
    print("top-k: (fake)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
