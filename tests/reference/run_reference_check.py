#!/usr/bin/python3
"""Reference check: the C++ model's fp32 logits against hf_reference.py's float64 forward.

For each case: make or write a checkpoint, run ONE packed C++ forward over several sequences
(`lockstep forward --tokens ... --dump FILE`), run the Python reference over each sequence
SEPARATELY (so the C++ packing is checked independently), and compare per sequence.

Cases:
  qwen3_init            Qwen3 tiny from `lockstep init-model` (head tied per the preset)
  llama_init            Llama tiny from `lockstep init-model`
  llama_bf16_sharded    written here: Llama 3 rope_scaling (factor 8, low 1, high 4, original
                        64, theta 500000; all three frequency bands hit), untied head, BF16
                        storage, sharded into 2 files with model.safetensors.index.json
  qwen3_f16_head_dim    written here: Qwen3, untied head, F16 storage, attention_bias false,
                        head_dim 32 != hidden_size / num_attention_heads (64 / 4)
  qwen3_moe_init        Qwen3-MoE tiny from `lockstep init-model` (8 experts, top-2,
                        norm_topk_prob, every layer sparse, untied head)
  qwen3_moe_bf16_mixed  written here: Qwen3-MoE, 6 experts, top-3 without renormalising,
                        decoder_sparse_step 2 and mlp_only_layers [3] (sparse layers 1 and 5,
                        dense 0, 2, 3, 4), BF16 storage, 3 shards

Usage: /usr/bin/python3 run_reference_check.py --lockstep build/lockstep --workdir DIR
       [--case NAME ...] [--tolerance 1e-5]
Prints one line per case; exits non-zero if any case fails or the C++ binary fails.

       /usr/bin/python3 run_reference_check.py --self-test --workdir DIR
checks this check: against fake_lockstep.py (hf_reference in float32) every case must pass,
and against each bug fake_lockstep.py can inject, every case must fail.
"""

import argparse
import os
import shutil
import subprocess
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hf_reference as ref  # noqa: E402

SEQUENCE_LENGTHS = (6, 1, 40, 3)  # the length-1 sequence sits between two others on purpose


class CaseFailure(Exception):
    pass


def run_command(argv, log_path):
    result = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=240)
    with open(log_path, "wb") as f:
        f.write(b"$ " + " ".join(argv).encode() + b"\n" + result.stdout)
    if result.returncode != 0:
        tail = result.stdout.decode(errors="replace").strip().splitlines()[-15:]
        raise CaseFailure(f"command failed (rc {result.returncode}): {' '.join(argv)}\n    "
                          + "\n    ".join(tail))


# --- checkpoints --------------------------------------------------------------------------

def init_model(lockstep, arch, seed):
    def make(model_dir, log_path):
        run_command([lockstep, "init-model", "--arch", arch, "--preset", "tiny",
                     "--out", model_dir, "--seed", str(seed)], log_path)
    return make


def _hf_extras(arch):
    """Fields a real transformers-written config.json carries that lockstep may ignore."""
    extras = {"model_type": arch, "hidden_act": "silu", "initializer_range": 0.02,
              "use_cache": True, "attention_dropout": 0.0, "bos_token_id": 1,
              "eos_token_id": 2, "transformers_version": "4.51.0"}
    if arch == "llama":
        extras.update({"mlp_bias": False, "pretraining_tp": 1})
    else:
        extras.update({"use_sliding_window": False, "sliding_window": None,
                       "max_window_layers": 2})
    if arch == "qwen3_moe":
        extras["output_router_logits"] = False
    return extras


def written_by_python(arch, num_shards, seed, **fields):
    def make(model_dir, log_path):
        raw = ref.synthetic_config(arch, **fields)
        raw.update(_hf_extras(arch))
        weights = ref.random_weights(ref.Config(raw), seed)
        ref.write_model_dir(model_dir, raw, weights, num_shards=num_shards)
        with open(log_path, "w") as f:
            f.write(f"written by hf_reference.write_model_dir, {num_shards} shard(s)\n")
    return make


def make_cases(lockstep):
    llama3_scaling = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                      "high_freq_factor": 4.0, "original_max_position_embeddings": 64}
    return {
        "qwen3_init": init_model(lockstep, "qwen3", seed=1),
        "llama_init": init_model(lockstep, "llama", seed=2),
        "llama_bf16_sharded": written_by_python(
            "llama", num_shards=2, seed=3, hidden_size=64, intermediate_size=128,
            num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
            vocab_size=320, rope_theta=500000.0, rope_scaling=llama3_scaling, rms_norm_eps=1e-5,
            tie_word_embeddings=False, torch_dtype="bfloat16", attention_bias=False),
        "qwen3_f16_head_dim": written_by_python(
            "qwen3", num_shards=1, seed=4, hidden_size=64, intermediate_size=96,
            num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, head_dim=32,
            vocab_size=320, rope_theta=1000000.0, rope_scaling=None, rms_norm_eps=1e-6,
            tie_word_embeddings=False, torch_dtype="float16", attention_bias=False),
        "qwen3_moe_init": init_model(lockstep, "qwen3_moe", seed=5),
        "qwen3_moe_bf16_mixed": written_by_python(
            "qwen3_moe", num_shards=3, seed=6, hidden_size=64, intermediate_size=96,
            num_hidden_layers=6, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
            vocab_size=320, rope_theta=1000000.0, rms_norm_eps=1e-6, tie_word_embeddings=False,
            torch_dtype="bfloat16", num_experts=6, num_experts_per_tok=3,
            moe_intermediate_size=48, norm_topk_prob=False, decoder_sparse_step=2,
            mlp_only_layers=[3]),
    }


# --- one case -----------------------------------------------------------------------------

def check_case(name, make_checkpoint, lockstep, workdir, tolerance, seed):
    case_dir = os.path.join(workdir, name)
    shutil.rmtree(case_dir, ignore_errors=True)
    os.makedirs(case_dir)
    model_dir = os.path.join(case_dir, "model")
    make_checkpoint(model_dir, os.path.join(case_dir, "make_checkpoint.log"))
    config, weights = ref.load_model_dir(model_dir)

    rng = np.random.default_rng(seed)
    sequences = [rng.integers(0, config.vocab_size, n).tolist() for n in SEQUENCE_LENGTHS]
    dump_path = os.path.join(case_dir, "logits.safetensors")
    argv = [lockstep, "forward", "--model", model_dir, "--dump", dump_path]
    for seq in sequences:
        argv += ["--tokens", ",".join(str(t) for t in seq)]
    run_command(argv, os.path.join(case_dir, "forward.log"))

    dump, _ = ref.read_safetensors(dump_path)
    for key in ("logits", "cu_seqlens"):
        if key not in dump:
            raise CaseFailure(f"dump lacks '{key}' (has {sorted(dump)})")
    logits, cu_seqlens = dump["logits"], dump["cu_seqlens"]
    expected_cu = np.cumsum([0] + [len(s) for s in sequences]).tolist()
    if logits.dtype != torch.float32:
        raise CaseFailure(f"logits dtype {logits.dtype}, expected float32")
    if cu_seqlens.tolist() != expected_cu:
        raise CaseFailure(f"cu_seqlens {cu_seqlens.tolist()}, expected {expected_cu}")
    if list(logits.shape) != [expected_cu[-1], config.vocab_size]:
        raise CaseFailure(f"logits shape {list(logits.shape)}, expected "
                          f"[{expected_cu[-1]}, {config.vocab_size}]")

    per_sequence = []
    for i, seq in enumerate(sequences):
        reference = ref.forward(config, weights, seq)
        candidate = logits[expected_cu[i]:expected_cu[i + 1]].to(torch.float64)
        rel, elem = ref.compare_logits(candidate, reference)
        # First position whose row alone breaks the bar: where a mismatch starts.
        row_rel = (candidate - reference).abs().max(dim=1).values / reference.abs().max()
        bad = (row_rel > tolerance).nonzero().flatten().tolist()
        per_sequence.append((rel, elem, float(reference.abs().max()), bad[0] if bad else None))
    return per_sequence


def self_test(workdir):
    """Runs this script against fake_lockstep.py: clean must pass, each injected bug must fail."""
    here = os.path.dirname(os.path.abspath(__file__))
    fake = os.path.join(here, "fake_lockstep.py")
    ok = True
    for bug, expected_rc in (("", 0), ("one_sequence", 1), ("float16_logits", 1)):
        env = dict(os.environ, FAKE_LOCKSTEP_BUG=bug)
        argv = [sys.executable, os.path.abspath(__file__), "--lockstep", fake,
                "--workdir", os.path.join(workdir, "fake_" + (bug or "clean"))]
        if bug:  # one case per bug keeps the self-test quick
            argv += ["--case", "llama_bf16_sharded"]
        result = subprocess.run(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                timeout=240)
        out = result.stdout.decode(errors="replace")
        lines = [l for l in out.splitlines() if l.startswith(("PASS", "FAIL"))]
        num_cases = 1 if bug else len(make_cases("lockstep"))
        good = result.returncode == expected_rc and len(lines) == num_cases and all(
            l.startswith("FAIL" if bug else "PASS") for l in lines)
        ok &= good
        print(f"  {'ok  ' if good else 'BAD '} fake lockstep, bug '{bug or 'none'}': rc "
              f"{result.returncode} (want {expected_rc})")
        for line in lines if good else out.splitlines():
            print(f"       {line}")
    print("SELF-TEST PASSED" if ok else "SELF-TEST FAILED")
    return 0 if ok else 1


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--self-test", action="store_true",
                        help="check this script against fake_lockstep.py (no C++ needed)")
    parser.add_argument("--lockstep", help="path to the lockstep binary")
    parser.add_argument("--workdir", required=True, help="scratch dir (per-case subdirs, logs)")
    parser.add_argument("--case", action="append", help="run only this case (repeatable)")
    parser.add_argument("--tolerance", type=float, default=1e-5)
    parser.add_argument("--seed", type=int, default=1234, help="seed of the token ids")
    args = parser.parse_args()
    torch.set_num_threads(1)
    if args.self_test:
        return self_test(args.workdir)
    if not args.lockstep:
        parser.error("--lockstep is required")

    lockstep = os.path.abspath(args.lockstep)
    cases = make_cases(lockstep)
    names = args.case or list(cases)
    unknown = [n for n in names if n not in cases]
    if unknown:
        parser.error(f"unknown case(s) {unknown}; known: {list(cases)}")
    if not os.access(lockstep, os.X_OK):
        print(f"FAIL: {lockstep} is not an executable")
        return 1
    os.makedirs(args.workdir, exist_ok=True)

    print(f"metric: {ref.METRIC_DESCRIPTION}; tol = {args.tolerance:g}")
    print(f"sequence lengths (one packed C++ forward): {list(SEQUENCE_LENGTHS)}")
    num_failed = 0
    for name in names:
        try:
            results = check_case(name, cases[name], lockstep, args.workdir, args.tolerance,
                                 args.seed)
        except (CaseFailure, ValueError, KeyError, subprocess.TimeoutExpired) as error:
            num_failed += 1
            print(f"FAIL {name}: {type(error).__name__}: {error}")
            continue
        worst = max(r[0] for r in results)
        ok = worst <= args.tolerance
        num_failed += not ok
        details = " ".join(f"{r[0]:.2e}" for r in results)
        first_bad = "".join(f" [seq {i} (len {SEQUENCE_LENGTHS[i]}) first bad pos {r[3]}]"
                            for i, r in enumerate(results) if r[3] is not None)
        print(f"{'PASS' if ok else 'FAIL'} {name}: rel {worst:.3e} (per sequence: {details}) "
              f"elem {max(r[1] for r in results):.3e} max|ref| {max(r[2] for r in results):.3g}"
              f"{first_bad}")
    print(f"{len(names) - num_failed}/{len(names)} cases passed")
    return 1 if num_failed else 0


if __name__ == "__main__":
    sys.exit(main())
