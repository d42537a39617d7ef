#!/usr/bin/env python3
"""PyTorch peers for `qk bench ops`, measured the way qk measures itself.

Reads a JSON list of case specs (written by @qk/bench: id, kind, dtype, dims, rotations), builds the same
shapes with rotating input sets (and rotating outputs), and times each case in PyTorch eager and under torch.compile. Like qk, a sample
is a CUDA graph replaying many calls, timed with CUDA events, divided by the call count; the median of the
samples is reported in microseconds per call. Writes {"torch": version, "results": {id: {...}}} as JSON.

Usage: python3 torch_ops.py SPEC.json OUT.json
"""
import json
import math
import sys
import time

import torch
import torch.nn.functional as F

torch._dynamo.config.cache_size_limit = 256
torch._dynamo.config.accumulated_cache_size_limit = 4096

DTYPES = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}
EPS = 1e-6


def rmsnorm_eager(x, w):
    # Hugging Face Qwen3RMSNorm.forward
    dtype = x.dtype
    h = x.to(torch.float32)
    var = h.pow(2).mean(-1, keepdim=True)
    h = h * torch.rsqrt(var + EPS)
    return w * h.to(dtype)


def fused_add_rmsnorm_eager(x, r, w):
    h = x + r
    return rmsnorm_eager(h, w), h


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def rope_eager(x, cos, sin):
    # Hugging Face apply_rotary_pos_emb on one tensor laid out [seq, heads, dim]; cos/sin [seq, 1, dim]
    return x * cos + rotate_half(x) * sin


def swiglu_eager(g, u):
    return F.silu(g) * u


def linear_eager(x, w):
    return F.linear(x, w)


def attention_decode_eager(q, k, v):
    # q [1, Hq, 1, D], k/v [1, Hkv, T, D]
    return F.scaled_dot_product_attention(q, k, v, enable_gqa=True)


def make_sets(spec, device):
    dt = DTYPES[spec["dtype"]]
    d = spec["dims"]
    kind = spec["kind"]
    sets = []
    g = torch.Generator(device=device).manual_seed(1234)

    def rnd(*shape, std=1.0):
        return torch.randn(*shape, generator=g, device=device, dtype=torch.float32).mul_(std).to(dt)

    for _ in range(spec["rotations"]):
        if kind == "rmsnorm":
            sets.append((rnd(d["rows"], d["n"]), rnd(d["n"])))
        elif kind == "fused_add_rmsnorm":
            sets.append((rnd(d["rows"], d["n"]), rnd(d["rows"], d["n"]), rnd(d["n"])))
        elif kind == "rope":
            seq, dim = d["seq"], d["dim"]
            inv = 1.0 / (1e6 ** (torch.arange(0, dim, 2, device=device, dtype=torch.float32) / dim))
            freqs = torch.outer(torch.arange(seq, device=device, dtype=torch.float32), inv)
            emb = torch.cat((freqs, freqs), dim=-1)
            sets.append((rnd(seq, d["heads"], dim), emb.cos()[:, None, :].to(dt), emb.sin()[:, None, :].to(dt)))
        elif kind == "swiglu":
            sets.append((rnd(d["rows"], d["ffn"]), rnd(d["rows"], d["ffn"])))
        elif kind == "linear":
            sets.append((rnd(d["m"], d["k"]), rnd(d["n"], d["k"], std=0.02)))
        elif kind == "attention_decode":
            sets.append(
                (
                    rnd(1, d["qHeads"], 1, d["dim"]),
                    rnd(1, d["kvHeads"], d["kvLen"], d["dim"]),
                    rnd(1, d["kvHeads"], d["kvLen"], d["dim"]),
                )
            )
        else:
            raise ValueError(f"unknown kind {kind}")
    return sets


EAGER = {
    "rmsnorm": rmsnorm_eager,
    "fused_add_rmsnorm": fused_add_rmsnorm_eager,
    "rope": rope_eager,
    "swiglu": swiglu_eager,
    "linear": linear_eager,
    "attention_decode": attention_decode_eager,
}


def time_graph(fn, sets, samples=25):
    """Per-call microseconds: a CUDA graph of N calls over rotating sets, replayed and timed with events."""
    for s in sets:
        fn(*s)
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for s in sets:
        fn(*s)
    end.record()
    end.synchronize()
    estimate_us = max(0.5, start.elapsed_time(end) * 1000 / len(sets))
    calls = max(4, min(2000, math.ceil(200 / estimate_us)))
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for s in sets:  # warm-up on the capture stream, as torch.cuda.graph requires
            fn(*s)
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    # Outputs rotate with the inputs, as qk's do (each of its input sets owns an output tensor): a call's result is
    # kept until the same set comes round again, so the allocator hands that set's block back to it. Dropping the
    # result at once would let every call write the same block, which then stays in L2 and flatters the peer.
    ring = [None] * len(sets)
    with torch.cuda.graph(graph):
        for i in range(calls):
            slot = i % len(sets)
            ring[slot] = None
            ring[slot] = fn(*sets[slot])
    del ring
    for _ in range(3):
        graph.replay()
    per_call = []
    for _ in range(samples):
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        per_call.append(start.elapsed_time(end) * 1000 / calls)
    per_call.sort()
    return per_call[len(per_call) // 2]


def main():
    spec_path, out_path = sys.argv[1], sys.argv[2]
    with open(spec_path) as f:
        specs = json.load(f)
    device = torch.device("cuda")
    results = {}
    for spec in specs:
        t0 = time.time()
        sets = make_sets(spec, device)
        eager = EAGER[spec["kind"]]
        entry = {}
        try:
            entry["eagerUs"] = time_graph(eager, sets)
        except Exception as e:  # report, keep going
            entry["eagerError"] = repr(e)
        try:
            compiled = torch.compile(eager, dynamic=False)
            entry["compileUs"] = time_graph(compiled, sets)
        except Exception as e:
            entry["compileError"] = repr(e)
        entry["seconds"] = round(time.time() - t0, 2)
        results[spec["id"]] = entry
        print(json.dumps({spec["id"]: entry}), flush=True)
        del sets
        torch.cuda.empty_cache()
    with open(out_path, "w") as f:
        json.dump({"torch": torch.__version__, "device": torch.cuda.get_device_name(), "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
