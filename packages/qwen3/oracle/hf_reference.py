#!/usr/bin/env python3
"""Reference logits from Hugging Face transformers' own Qwen3, the oracle qk's engines are checked against.

Builds a Qwen3ForCausalLM with random weights (transformers' own initialisation: normal, std 0.02; norms 1) at a
preset's shapes, saves it as an HF checkpoint directory, then runs a seeded random prompt and HF's greedy decode
with its KV cache, recording the logits of every step. qk loads the same checkpoint, feeds the same prompt and
then HF's tokens one at a time (teacher forcing) and compares logits and argmax step by step
(`qk model compare DIR`).

Writes into OUT: the checkpoint (config.json, model.safetensors, generation_config.json), reference.json
(prompt ids, HF's greedy ids, shapes, versions) and logits.f32 (raw little-endian float32, [steps, vocab]).

Usage: python3 hf_reference.py OUT --preset 0.6b|tiny-fixture [--dtype bfloat16|float32] [--prompt-len 32]
       [--steps 64] [--seed 0] [--device cuda|cpu]
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
    "8b": dict(hidden_size=4096, num_hidden_layers=36, num_attention_heads=32, num_key_value_heads=8, head_dim=128,
               intermediate_size=12288, vocab_size=151936, tie_word_embeddings=False),
    # Small enough to commit: the CI fixture of the cpu engine.
    "tiny-fixture": dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                         intermediate_size=128, vocab_size=512, tie_word_embeddings=True),
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--preset", required=True, choices=sorted(PRESETS))
    ap.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float32", "float16"])
    ap.add_argument("--prompt-len", type=int, default=32)
    ap.add_argument("--steps", type=int, default=64)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    a = ap.parse_args()
    torch.manual_seed(a.seed)
    dtype = getattr(torch, a.dtype)
    cfg = Qwen3Config(**PRESETS[a.preset], max_position_embeddings=40960, rope_theta=1000000.0, rms_norm_eps=1e-6,
                      attention_bias=False, hidden_act="silu", use_sliding_window=False, bos_token_id=151643,
                      eos_token_id=151645, torch_dtype=a.dtype)
    cfg._attn_implementation = "eager"
    with torch.device(a.device):
        model = Qwen3ForCausalLM(cfg)
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
        "attention": "eager",
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


if __name__ == "__main__":
    main()
