#!/usr/bin/env python3
"""Reference logits from Hugging Face transformers' own Qwen3, the oracle qk's engines are checked against.

Builds a Qwen3ForCausalLM with random weights (transformers' own initialisation: normal, std 0.02; norms 1, or
U(0.5, 1.5) with --random-norms) at a preset's shapes, saves it as an HF checkpoint directory, then runs a seeded
random prompt and HF's greedy decode with its KV cache, recording the logits of every step. qk loads the same
checkpoint, feeds the same prompt and then HF's tokens one at a time (teacher forcing) and compares logits and argmax
step by step (`qk model compare DIR`).

Writes into OUT: the checkpoint (config.json, model.safetensors, generation_config.json), reference.json
(prompt ids, HF's greedy ids, shapes, versions) and logits.f32 (raw little-endian float32, [steps, vocab]).

With --from DIR, builds nothing: loads DIR's checkpoint in --dtype with --attention (eager or sdpa), feeds DIR's
prompt and DIR's tokens (teacher forcing, as `qk model compare` does) and records this run's logits and its own
argmax per step ("argmaxIds"; "greedyIds" stay DIR's tokens). OUT links DIR's checkpoint files, so `qk model
compare OUT` checks an engine against, say, HF in float32 over the same bf16 weights. It also prints how this run
agrees with DIR's own logits: the spread between two HF runs of one checkpoint.

Usage: python3 hf_reference.py OUT --preset 0.6b|1.7b|4b|8b|tiny-fixture [--dtype bfloat16|float32] [--prompt-len 32]
       [--steps 64] [--seed 0] [--random-norms] [--device cuda|cpu]
       python3 hf_reference.py OUT --from DIR [--dtype float32] [--attention eager|sdpa] [--device cuda|cpu]
"""
import argparse
import json
import os
import sys

import torch
import transformers
from transformers import Qwen3Config, Qwen3ForCausalLM

PRESETS = {
    # Published Qwen3-0.6B shapes.
    "0.6b": dict(hidden_size=1024, num_hidden_layers=28, num_attention_heads=16, num_key_value_heads=8, head_dim=128,
                 intermediate_size=3072, vocab_size=151936, tie_word_embeddings=True),
    "1.7b": dict(hidden_size=2048, num_hidden_layers=28, num_attention_heads=16, num_key_value_heads=8, head_dim=128,
                 intermediate_size=6144, vocab_size=151936, tie_word_embeddings=True),
    "4b": dict(hidden_size=2560, num_hidden_layers=36, num_attention_heads=32, num_key_value_heads=8, head_dim=128,
               intermediate_size=9728, vocab_size=151936, tie_word_embeddings=True),
    "8b": dict(hidden_size=4096, num_hidden_layers=36, num_attention_heads=32, num_key_value_heads=8, head_dim=128,
               intermediate_size=12288, vocab_size=151936, tie_word_embeddings=False),
    # Small enough to commit: the CI fixture of the cpu engine.
    "tiny-fixture": dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                         intermediate_size=128, vocab_size=512, tie_word_embeddings=True),
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--preset", choices=sorted(PRESETS))
    ap.add_argument("--from", dest="source", help="teacher-force the checkpoint and tokens of this reference dir")
    ap.add_argument("--attention", default="eager", choices=["eager", "sdpa"])
    ap.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float32", "float16"])
    ap.add_argument("--prompt-len", type=int, default=32)
    ap.add_argument("--steps", type=int, default=64)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--random-norms", action="store_true",
                    help="draw every RMSNorm weight (input, post-attention, QK-norm, final) from U(0.5, 1.5) instead "
                         "of HF's ones, so an engine that skips or misplaces a norm weight cannot agree by accident")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    a = ap.parse_args()
    if (a.preset is None) == (a.source is None):
        ap.error("give exactly one of --preset (a new random checkpoint) and --from DIR (an existing reference)")
    if a.source is not None:
        return teacher_forced(a)
    torch.manual_seed(a.seed)
    dtype = getattr(torch, a.dtype)
    cfg = Qwen3Config(**PRESETS[a.preset], max_position_embeddings=40960, rope_theta=1000000.0, rms_norm_eps=1e-6,
                      attention_bias=False, hidden_act="silu", use_sliding_window=False, bos_token_id=151643,
                      eos_token_id=151645, torch_dtype=a.dtype)
    cfg._attn_implementation = a.attention
    with torch.device(a.device):
        model = Qwen3ForCausalLM(cfg)
    if a.random_norms:
        gn = torch.Generator(device="cpu").manual_seed(a.seed + 7)
        with torch.no_grad():
            for name, param in model.named_parameters():
                if name.endswith("norm.weight"):
                    param.copy_(0.5 + torch.rand(param.shape, generator=gn))
    model = model.to(dtype).eval()
    os.makedirs(a.out, exist_ok=True)
    model.save_pretrained(a.out, safe_serialization=True)

    g = torch.Generator().manual_seed(a.seed + 1)
    # Ids the real tokenizer can print (below 151669) when the vocabulary is the real one.
    high = min(cfg.vocab_size, 151669)
    prompt = torch.randint(0, high, (1, a.prompt_len), generator=g).to(a.device)
    logits_steps, greedy = [], []
    with torch.no_grad():
        out = model(input_ids=prompt, use_cache=True)
        past = out.past_key_values
        step_logits = out.logits[0, -1].float()
        for _ in range(a.steps):
            logits_steps.append(step_logits.cpu())
            nxt = int(torch.argmax(step_logits[:high]))
            greedy.append(nxt)
            out = model(input_ids=torch.tensor([[nxt]], device=a.device), past_key_values=past, use_cache=True)
            past = out.past_key_values
            step_logits = out.logits[0, -1].float()
    logits = torch.stack(logits_steps).contiguous()
    logits.numpy().astype("<f4").tofile(os.path.join(a.out, "logits.f32"))
    ref = {
        "preset": a.preset,
        "dtype": a.dtype,
        "attention": a.attention,
        "randomNorms": a.random_norms,
        "promptIds": prompt[0].tolist(),
        "greedyIds": greedy,
        "steps": a.steps,
        "vocab": cfg.vocab_size,
        "argmaxLimit": high,
        "logitsFile": "logits.f32",
        "transformers": transformers.__version__,
        "torch": torch.__version__,
        "device": torch.cuda.get_device_name() if a.device == "cuda" else "cpu",
    }
    with open(os.path.join(a.out, "reference.json"), "w") as f:
        json.dump(ref, f)
    print(f"wrote {a.out}: {a.preset} {a.dtype}, prompt {a.prompt_len}, {a.steps} greedy steps", file=sys.stderr)


def teacher_forced(a):
    """Runs DIR's checkpoint on DIR's prompt and tokens in another dtype / attention; see the module docstring."""
    src = os.path.abspath(a.source)
    with open(os.path.join(src, "reference.json")) as f:
        ref = json.load(f)
    vocab, high, fed = ref["vocab"], ref.get("argmaxLimit", ref["vocab"]), ref["greedyIds"]
    import numpy as np

    raw = np.fromfile(os.path.join(src, ref.get("logitsFile", "logits.f32")), dtype="<f4")
    theirs = torch.from_numpy(raw).view(len(fed), vocab)
    dtype = getattr(torch, a.dtype)
    model = Qwen3ForCausalLM.from_pretrained(src, torch_dtype=dtype, attn_implementation=a.attention).to(a.device)
    model.eval()
    prompt = torch.tensor([ref["promptIds"]], device=a.device)
    rows, own = [], []
    with torch.no_grad():
        out = model(input_ids=prompt, use_cache=True)
        past = out.past_key_values
        for t in range(len(fed)):
            row = out.logits[0, -1].float().cpu()
            rows.append(row)
            own.append(int(torch.argmax(row[:high])))
            out = model(input_ids=torch.tensor([[fed[t]]], device=a.device), past_key_values=past, use_cache=True)
            past = out.past_key_values
    logits = torch.stack(rows).contiguous()
    os.makedirs(a.out, exist_ok=True)
    for name in os.listdir(src):
        if name.endswith((".json", ".safetensors")) and name != "reference.json":
            dst = os.path.join(a.out, name)
            if os.path.lexists(dst):
                os.remove(dst)
            os.symlink(os.path.join(src, name), dst)
    logits.numpy().astype("<f4").tofile(os.path.join(a.out, "logits.f32"))
    theirs_argmax = [int(torch.argmax(theirs[t, :high])) for t in range(len(fed))]
    agree = sum(x == y for x, y in zip(own, theirs_argmax)) / len(fed)
    diff = (logits - theirs).abs()
    meta = dict(ref, dtype=a.dtype, attention=a.attention, argmaxIds=own, logitsFile="logits.f32",
                teacher=src, transformers=transformers.__version__, torch=torch.__version__,
                device=torch.cuda.get_device_name() if a.device == "cuda" else "cpu")
    with open(os.path.join(a.out, "reference.json"), "w") as f:
        json.dump(meta, f)
    summary = dict(run=f"{a.dtype}/{a.attention}", teacher=f"{ref.get('dtype')}/{ref.get('attention')}",
                   steps=len(fed), agreement=agree, maxAbs=float(diff.max()), meanAbs=float(diff.mean()),
                   differ=[t for t in range(len(fed)) if own[t] != theirs_argmax[t]])
    print(json.dumps(summary))
    print(f"wrote {a.out}: {a.dtype} {a.attention}, teacher-forced with {src}'s {len(fed)} tokens; "
          f"argmax agreement with it {agree:.1%}, max |diff| {summary['maxAbs']:.3g}", file=sys.stderr)


if __name__ == "__main__":
    main()
