#!/usr/bin/env python3
"""HF transformers decode peers for `qk bench decode`: tokens per second of batch-1 greedy decode, measured the way
qk measures itself (wall clock around a run of steps, each step's token read back on the host), at given positions.

Two peers per position:
  eager        model(...) with HF's dynamic cache, one Python forward per token (what `generate` does);
  static+graph a StaticCache and ONE CUDA graph of the decode step captured once and replayed per token.

The model is a checkpoint directory (config.json + safetensors, e.g. written by `qk model init` or hf_reference.py).
Prints JSON: {"torch", "transformers", "device", "results": [{"peer", "position", "tokens", "tokPerS", "msPerToken"}]}.

Usage: python3 hf_decode.py CKPT_DIR --positions 1,128,1024 [--tokens 128] [--runs 3] [--peers eager,graph]
       [--dtype bfloat16] [--out OUT.json]
"""
import argparse
import json
import statistics
import sys
import time

import torch
import transformers
from transformers import AutoModelForCausalLM, StaticCache


def make_static_cache(model, max_len, dtype):
    kwargs = dict(config=model.config, max_cache_len=max_len)
    for extra in (dict(max_batch_size=1, device="cuda", dtype=dtype), dict(device="cuda", dtype=dtype), {}):
        try:
            return StaticCache(**kwargs, **extra)
        except TypeError:
            continue
    raise RuntimeError("StaticCache: no known constructor signature worked")


def prompt_ids(n, vocab):
    g = torch.Generator().manual_seed(n)
    return torch.randint(0, min(vocab, 151669), (1, n), generator=g).cuda()


@torch.no_grad()
def run_eager(model, position, tokens):
    ids = prompt_ids(position, model.config.vocab_size)
    out = model(input_ids=ids, use_cache=True)
    past, nxt = out.past_key_values, int(out.logits[0, -1].argmax())
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(tokens):
        out = model(input_ids=torch.tensor([[nxt]], device="cuda"), past_key_values=past, use_cache=True)
        past = out.past_key_values
        nxt = int(out.logits[0, -1].argmax())  # read back each token, as a streaming generator must
    return time.perf_counter() - t0


@torch.no_grad()
def run_graph(model, position, tokens, dtype):
    ids = prompt_ids(position, model.config.vocab_size)
    cache = make_static_cache(model, position + tokens + 8, dtype)
    out = model(input_ids=ids, cache_position=torch.arange(position, device="cuda"), past_key_values=cache,
                use_cache=True)
    step_ids = out.logits[0, -1].argmax().view(1, 1).clone()
    step_pos = torch.tensor([position], device="cuda")

    def step():
        o = model(input_ids=step_ids, cache_position=step_pos, past_key_values=cache, use_cache=True)
        return o.logits[0, -1].argmax().view(1, 1)

    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(2):  # warm-up writes positions `position` and `position+1`; both are rewritten below
            step()
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        nxt = step()
    step_pos.fill_(position)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(tokens):
        graph.replay()
        step_ids.copy_(nxt)
        step_pos.add_(1)
        int(nxt)  # read back each token
    return time.perf_counter() - t0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("ckpt")
    ap.add_argument("--positions", default="1,128,1024")
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--peers", default="eager,graph")
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--out")
    a = ap.parse_args()
    dtype = getattr(torch, a.dtype)
    model = AutoModelForCausalLM.from_pretrained(a.ckpt, torch_dtype=dtype, attn_implementation="sdpa").cuda().eval()
    results = []
    for peer in a.peers.split(","):
        for position in [int(p) for p in a.positions.split(",")]:
            times = []
            for _ in range(a.runs):
                dt = run_eager(model, position, a.tokens) if peer == "eager" else run_graph(model, position, a.tokens, dtype)
                times.append(dt)
            med = statistics.median(times)
            results.append({"peer": "hf-eager" if peer == "eager" else "hf-static-graph", "position": position,
                            "tokens": a.tokens, "runs": a.runs, "tokPerS": a.tokens / med,
                            "msPerToken": med * 1000 / a.tokens})
            print(f"{results[-1]['peer']:>16} pos {position:>5}: {results[-1]['tokPerS']:.1f} tok/s", file=sys.stderr)
    doc = {"torch": torch.__version__, "transformers": transformers.__version__,
           "device": torch.cuda.get_device_name(), "results": results}
    text = json.dumps(doc)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text)
    print(text)


if __name__ == "__main__":
    main()
