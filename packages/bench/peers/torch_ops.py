#!/usr/bin/env python3
"""PyTorch peers for `qk bench ops`, measured the way qk measures itself.

Reads a JSON list of case specs (written by @qk/bench: id, kind, dtype, dims, rotations), builds the same
shapes with rotating input sets (and rotating outputs), and times each case in PyTorch eager and under torch.compile. Like qk, a sample
is a CUDA graph replaying many calls, timed with CUDA events, divided by the call count; the median of the
samples is reported in microseconds per call. Writes {"torch": version, "device": name, "results": {id: {...}}} as
JSON, where each entry is {eagerUs, compileUs, seconds} with eagerError / compileError in place of a time that could
not be taken (a case that fails, even while building its inputs, is reported and the script goes on).

Kinds and their inputs (one tuple per rotation; shapes from `dims`):
  rmsnorm            (x [rows,n], w [n])
  fused_add_rmsnorm  (x [rows,n], r [rows,n], w [n])
  rope               (x [seq,heads,dim], cos [seq,1,dim], sin [seq,1,dim])
  swiglu             (g [rows,ffn], u [rows,ffn])
  linear             (x [m,k], w [n,k])
  attention_decode   (q [1,qHeads,1,dim], k/v [1,kvHeads,kvLen,dim])
  rmsnorm_linear     (x [rows,k], norm w [k], w [n,k]); HF RMSNorm then F.linear; glu=1: n is 2*ffn (gate rows,
                     then up rows) and the result is silu(gate) * up
  attention_prefill  (q [batch,qHeads,seq,dim], k/v [batch,kvHeads,seq,dim]); SDPA, causal when causal=1
  linear_act         (x [m,k], w [n,k]); act(F.linear) with act 1 = SiLU, 2 = exact (erf) GELU, 3 = tanh GELU
  linear_int8        (x [m,k], q int8 [n,k], scale [n]); weight-only int8, one scale per output channel
  linear_int4        (x [m,k], packed uint8 [n,k/2], scale [n,k/group]); weight-only int4, symmetric groups of
                     `group` (default 128) along k, two codes per byte (low nibble = even k), stored code+8

Usage: python3 torch_ops.py SPEC.json OUT.json [--no-compile]
  --no-compile  time eager only (no torch.compile peer, no compileUs)
"""
import argparse
import json
import math
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


def rmsnorm_linear_eager(x, nw, w):
    # HF decoder layer: input_layernorm then the q/k/v (or any) projection of the normed rows
    return F.linear(rmsnorm_eager(x, nw), w)


def rmsnorm_linear_glu_eager(x, nw, w):
    # post_attention_layernorm then the gate and up projections as one [2*ffn, k] weight, then SwiGLU
    y = F.linear(rmsnorm_eager(x, nw), w)
    ffn = y.shape[-1] // 2
    return F.silu(y[:, :ffn]) * y[:, ffn:]


def _probe_enable_gqa():
    # `enable_gqa` arrived in torch 2.5; probe once on tiny CPU tensors rather than catching TypeError inside a function
    # that dynamo traces.
    try:
        F.scaled_dot_product_attention(torch.zeros(1, 2, 1, 8), torch.zeros(1, 1, 1, 8), torch.zeros(1, 1, 1, 8),
                                       enable_gqa=True)
        return True
    except Exception:
        return False


HAS_ENABLE_GQA = _probe_enable_gqa()


def sdpa(q, k, v, causal):
    # q [B, Hq, S, D], k/v [B, Hkv, S, D]. enable_gqa only when the head counts differ; without it, HF's own fallback
    # (repeat_kv) expands k/v to the query heads first.
    hq, hkv = q.shape[1], k.shape[1]
    if hq == hkv:
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    if HAS_ENABLE_GQA:
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True)
    rep = hq // hkv
    return F.scaled_dot_product_attention(q, k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1),
                                          is_causal=causal)


def attention_prefill_eager(q, k, v):
    return sdpa(q, k, v, False)


def attention_prefill_causal_eager(q, k, v):
    return sdpa(q, k, v, True)


def linear_silu_eager(x, w):
    return F.silu(F.linear(x, w))


def linear_gelu_eager(x, w):
    return F.gelu(F.linear(x, w))  # exact (erf)


def linear_gelu_tanh_eager(x, w):
    return F.gelu(F.linear(x, w), approximate="tanh")


LINEAR_ACT = {1: linear_silu_eager, 2: linear_gelu_eager, 3: linear_gelu_tanh_eager}


def linear_int8_eager(x, q, scale):
    # Weight-only int8 as torchao-style code writes it: widen the codes, matmul, scale each output column. Eager pays
    # for the widened weight in DRAM; torch.compile may fold the cast into the matmul's operand load.
    return F.linear(x, q.to(x.dtype)) * scale.to(x.dtype)


def linear_int4_eager(x, packed, scale):
    # packed [n, k/2] uint8: low nibble = even k, high nibble = odd k, each code stored +8 (0..15); scale [n, k/group].
    n, groups = scale.shape
    codes = torch.stack((packed & 15, packed >> 4), dim=-1).reshape(n, -1)  # interleave back to [n, k]
    w = codes.to(x.dtype) - 8  # widen before the -8, which would wrap in uint8; -8..7 are exact in bf16/fp16
    w = (w.reshape(n, groups, -1) * scale.to(x.dtype)[..., None]).reshape(n, -1)
    return F.linear(x, w)


def quantize_int8(w, dt):
    """w [n, k] float32 -> (q int8 [n, k], scale [n] in dt), symmetric per output channel."""
    # Round the scale to the storage dtype first and quantize with that, so codes and scale agree.
    scale = (w.abs().amax(1) / 127).clamp_min_(1e-12).to(dt)
    q = torch.round(w / scale.float()[:, None]).clamp_(-127, 127).to(torch.int8)
    return q, scale


def quantize_int4(w, group, dt):
    """w [n, k] float32 -> (packed uint8 [n, k/2], scale [n, k/group] in dt), symmetric groups along k."""
    n, k = w.shape
    if group <= 0 or k % group or group % 2:
        raise ValueError(f"linear_int4: k={k} is not a whole number of even groups of {group}")
    wg = w.view(n, k // group, group)
    scale = (wg.abs().amax(-1) / 7).clamp_min_(1e-12).to(dt)
    codes = torch.round(wg / scale.float()[..., None]).clamp_(-7, 7).add_(8).to(torch.uint8).view(n, k)
    del wg
    packed = codes[:, 0::2] | (codes[:, 1::2] << 4)  # 1..15 << 4 fits a byte
    return packed.contiguous(), scale


def make_sets(spec, device):
    dt = DTYPES[spec["dtype"]]
    d = spec["dims"]
    kind = spec["kind"]
    sets = []
    g = torch.Generator(device=device).manual_seed(1234)

    def rnd(*shape, std=1.0):
        return torch.randn(*shape, generator=g, device=device, dtype=torch.float32).mul_(std).to(dt)

    def rnd32(*shape, std=1.0):
        # float32 on the GPU, for weights that are quantized before they are stored
        return torch.randn(*shape, generator=g, device=device, dtype=torch.float32).mul_(std)

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
        elif kind == "rmsnorm_linear":
            if d.get("glu") and d["n"] % 2:
                raise ValueError(f"rmsnorm_linear: glu needs an even n (2*ffn), got {d['n']}")
            sets.append((rnd(d["rows"], d["k"]), rnd(d["k"]), rnd(d["n"], d["k"], std=0.02)))
        elif kind == "attention_prefill":
            b, seq, dim = d["batch"], d["seq"], d["dim"]
            sets.append(
                (
                    rnd(b, d["qHeads"], seq, dim),
                    rnd(b, d["kvHeads"], seq, dim),
                    rnd(b, d["kvHeads"], seq, dim),
                )
            )
        elif kind == "linear_act":
            sets.append((rnd(d["m"], d["k"]), rnd(d["n"], d["k"], std=0.02)))
        elif kind == "linear_int8":
            w = rnd32(d["n"], d["k"], std=0.02)
            q, scale = quantize_int8(w, dt)
            del w
            sets.append((rnd(d["m"], d["k"]), q, scale))
        elif kind == "linear_int4":
            w = rnd32(d["n"], d["k"], std=0.02)
            packed, scale = quantize_int4(w, int(d.get("group") or 128), dt)
            del w
            sets.append((rnd(d["m"], d["k"]), packed, scale))
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
    "linear_int8": linear_int8_eager,
    "linear_int4": linear_int4_eager,
}


def eager_for(spec):
    """The eager function of a case. Flags in `dims` pick a separate top-level function rather than a closure, so the
    compiled peer has plain constants and one dynamo cache entry per shape."""
    kind, d = spec["kind"], spec["dims"]
    if kind == "rmsnorm_linear":
        return rmsnorm_linear_glu_eager if d.get("glu") else rmsnorm_linear_eager
    if kind == "attention_prefill":
        return attention_prefill_causal_eager if d.get("causal") else attention_prefill_eager
    if kind == "linear_act":
        act = int(d.get("act", 1))
        if act not in LINEAR_ACT:
            raise ValueError(f"linear_act: unknown act {act} (1 = SiLU, 2 = GELU erf, 3 = GELU tanh)")
        return LINEAR_ACT[act]
    if kind not in EAGER:
        raise ValueError(f"unknown kind {kind}")
    return EAGER[kind]


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
    ap = argparse.ArgumentParser(description="PyTorch eager / torch.compile peers for qk bench ops")
    ap.add_argument("spec", help="JSON list of case specs")
    ap.add_argument("out", help="where to write the results JSON")
    ap.add_argument("--no-compile", action="store_true", help="skip the torch.compile peer")
    a = ap.parse_args()
    with open(a.spec) as f:
        specs = json.load(f)
    device = torch.device("cuda")
    results = {}
    for spec in specs:
        t0 = time.time()
        entry = {}
        sets = None
        try:
            eager = eager_for(spec)
            sets = make_sets(spec, device)
        except Exception as e:  # e.g. out of memory or bad dims: this case has no peer, the others still run
            msg = f"building inputs: {e!r}"
            entry["eagerError"] = msg
            if not a.no_compile:
                entry["compileError"] = msg
        else:
            try:
                entry["eagerUs"] = time_graph(eager, sets)
            except Exception as e:  # report, keep going
                entry["eagerError"] = repr(e)
            if not a.no_compile:
                try:
                    compiled = torch.compile(eager, dynamic=False)
                    entry["compileUs"] = time_graph(compiled, sets)
                except Exception as e:
                    entry["compileError"] = repr(e)
        entry["seconds"] = round(time.time() - t0, 2)
        results[spec["id"]] = entry
        print(json.dumps({spec["id"]: entry}), flush=True)
        sets = None
        torch.cuda.empty_cache()
    with open(a.out, "w") as f:
        json.dump({"torch": torch.__version__, "device": torch.cuda.get_device_name(), "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
