#!/usr/bin/env python3
"""HF transformers decode and prefill peers for `qk bench decode`, measured the way qk measures itself.

Decode (default): tokens per second of batch-1 greedy decode (wall clock around a run of steps, each step's token read
back on the host), at given positions. Two peers per position:
  eager        model(...) with HF's dynamic cache, one Python forward per token (what `generate` does);
  static+graph a StaticCache and ONE CUDA graph of the decode step captured once and replayed per token.
Prints JSON: {"torch", "transformers", "device", "results": [{"peer", "position", "tokens", "runs", "tokPerS",
"msPerToken", "samples"}]}, where tokPerS / msPerToken come from the median run and samples is every run's tok/s.

Prefill (--prefill LENGTHS; then only prefill is measured): latency of prompt forward + first token, as qk's prefill
ms is measured: after torch.cuda.synchronize(), the wall clock around model(input_ids=[1, L], use_cache=True) on a
fresh dynamic cache and the host read-back of the last position's argmax. Only last-position logits are computed when
the model's forward takes logits_to_keep (or num_logits_to_keep), as `generate` asks for. Two peers, by HF's attention
implementation: `sdpa` (hf-sdpa: torch's scaled_dot_product_attention, HF's default) and `eager` (hf-eager: HF's own
matmul + softmax attention); decode's `graph` has no prefill counterpart and is skipped. One untimed warm-up per
length, then --runs timed runs.
Prints JSON: {"torch", "transformers", "device", "mode": "prefill", "results": [{"peer", "length", "runs", "ms",
"samples"}]}, where ms is the median and samples every run's ms.

The model is a checkpoint directory (config.json + safetensors, e.g. written by `qk model init` or hf_reference.py).
The JSON goes to stdout (one line) and, with --out, to that file; progress goes to stderr.

Usage: python3 hf_decode.py CKPT_DIR --positions 1,128,1024 [--tokens 128] [--runs 3] [--peers eager,graph]
       [--dtype bfloat16] [--out OUT.json]
       python3 hf_decode.py CKPT_DIR --prefill 128,512,2048 [--runs 3] [--peers sdpa,eager] [--dtype bfloat16]
       [--out OUT.json]
"""
import argparse
import inspect
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


def last_logits_kwargs(model):
    # `generate` asks for the last position's logits only (logits_to_keep=1, formerly num_logits_to_keep) and so does
    # qk's prefill; without it HF projects every prompt position onto the vocabulary.
    try:
        params = inspect.signature(model.forward).parameters
    except (TypeError, ValueError):
        return {}
    for name in ("logits_to_keep", "num_logits_to_keep"):
        if name in params:
            return {name: 1}
    return {}


@torch.no_grad()
def run_prefill(model, ids, extra):
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    # No past_key_values: the model starts a fresh DynamicCache, as the first forward of `generate` does.
    out = model(input_ids=ids, use_cache=True, **extra)
    int(out.logits[0, -1].argmax())  # first token on the host
    return time.perf_counter() - t0


PREFILL_PEERS = {"sdpa": "hf-sdpa", "eager": "hf-eager"}


def use_attention(model, impl):
    """Switches the loaded model's attention implementation (sdpa or eager) in place."""
    setter = getattr(model, "set_attn_implementation", None)
    if setter is not None:
        setter(impl)
        return
    for module in model.modules():
        config = getattr(module, "config", None)
        if config is not None and hasattr(config, "_attn_implementation"):
            config._attn_implementation = impl


def prefill(model, a):
    extra = last_logits_kwargs(model)
    if not extra:
        print("prefill: forward takes no logits_to_keep; logits cover every prompt position", file=sys.stderr)
    lengths = [int(n) for n in a.prefill.split(",")]
    results = []
    warmed = False
    for peer in a.peers.split(","):
        if peer not in PREFILL_PEERS:
            print(f"prefill: peer {peer!r} skipped (prefill peers: {', '.join(PREFILL_PEERS)})", file=sys.stderr)
            continue
        use_attention(model, peer)
        if not warmed:
            # A fresh process meets cold kernels, cuBLAS heuristics and idle clocks on its first forwards: run every
            # length once before any is timed, so the first length is not charged for the whole process's start.
            for length in lengths:
                run_prefill(model, prompt_ids(length, model.config.vocab_size), extra)
            warmed = True
        name = PREFILL_PEERS[peer]
        for length in lengths:
            ids = prompt_ids(length, model.config.vocab_size)
            try:
                run_prefill(model, ids, extra)  # untimed warm-up at this length (and this implementation)
                samples = [run_prefill(model, ids, extra) * 1000 for _ in range(a.runs)]
            except torch.OutOfMemoryError:
                torch.cuda.empty_cache()
                print(f"{name:>16} prefill {length:>5}: out of GPU memory, not measured", file=sys.stderr)
                continue
            results.append({"peer": name, "length": length, "runs": a.runs, "ms": statistics.median(samples),
                            "samples": samples})
            print(f"{name:>16} prefill {length:>5}: {results[-1]['ms']:.2f} ms", file=sys.stderr)
    return results


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("ckpt")
    ap.add_argument("--positions", default="1,128,1024")
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--peers", default="eager,graph")
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--prefill", help="comma list of prompt lengths: measure prefill latency instead of decode")
    ap.add_argument("--out")
    a = ap.parse_args()
    dtype = getattr(torch, a.dtype)
    model = AutoModelForCausalLM.from_pretrained(a.ckpt, torch_dtype=dtype, attn_implementation="sdpa").cuda().eval()
    if a.prefill:
        doc = {"torch": torch.__version__, "transformers": transformers.__version__,
               "device": torch.cuda.get_device_name(), "mode": "prefill", "results": prefill(model, a)}
        emit(doc, a.out)
        return
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
                            "msPerToken": med * 1000 / a.tokens, "samples": [a.tokens / t for t in times]})
            print(f"{results[-1]['peer']:>16} pos {position:>5}: {results[-1]['tokPerS']:.1f} tok/s", file=sys.stderr)
    doc = {"torch": torch.__version__, "transformers": transformers.__version__,
           "device": torch.cuda.get_device_name(), "results": results}
    emit(doc, a.out)


def emit(doc, out):
    text = json.dumps(doc)
    if out:
        with open(out, "w") as f:
            f.write(text)
    print(text)


if __name__ == "__main__":
    main()
