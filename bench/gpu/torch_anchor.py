#!/usr/bin/env python3
# The native anchor of scripts/device/gpu.sh: PyTorch in true fp32 (TF32 off for matmuls and
# cuDNN) on the SAME shapes our WebGPU benches time on the same GPU:
#   - the kernels bench's GEMMs and convolutions (forward, backward-data, backward-filter), from
#     `node bench.mjs kernels --gpu --list`;
#   - the step bench's training steps, each model built from our own ModelSpec (the node list of
#     src/nn/graph.ts, from `node bench.mjs specs --models=...`) by bench/torch_models.py, so both
#     sides train the same layers; cudnn.benchmark on (PyTorch at its best, said so).
# Also PyTorch's own fp32 GEMM at 8192^3, the practical fp32 ceiling to read shares against.
# `--device cpu` checks the script on a machine without a GPU (scripts/device/gpu.sh --check).
#
#   python3 bench/gpu/torch_anchor.py --cases cases.json --specs specs.json --out torch.json
#
# Prints progress on stderr and one JSON object as its last line on stdout.
import argparse
import json
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F

# torch_models.py sits in bench/ (gpu.sh copies it beside this file).
sys.path[:0] = [os.path.dirname(os.path.abspath(__file__)), os.path.dirname(os.path.dirname(os.path.abspath(__file__)))]
from torch_models import train_step_ms  # noqa: E402

torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
torch.backends.cudnn.benchmark = True


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def sync(dev):
    if dev.type == "cuda":
        torch.cuda.synchronize()


def time_calls(fn, dev, min_ms=200.0, samples=5, warmup=2):
    """Median ms per call: `warmup` calls, then samples of enough calls to last `min_ms`."""
    for _ in range(warmup):
        fn()
    sync(dev)
    t0 = time.perf_counter()
    fn()
    sync(dev)
    one = (time.perf_counter() - t0) * 1e3
    reps = max(1, min(200, int(min_ms / max(one, 1e-3)) + 1))
    times = []
    for _ in range(samples):
        t0 = time.perf_counter()
        for _ in range(reps):
            fn()
        sync(dev)
        times.append((time.perf_counter() - t0) * 1e3 / reps)
    return statistics.median(times)


def case_fn(c, dev):
    g = torch.Generator(device=dev).manual_seed(1)

    def rand(*shape):
        return torch.rand(*shape, device=dev, generator=g) * 2 - 1

    if c["kind"] == "gemm":
        a = rand(c["M"], c["K"])
        b = rand(c["N"], c["K"]) if c["transB"] else rand(c["K"], c["N"])
        return (lambda: a @ b.t()) if c["transB"] else (lambda: a @ b)
    n, cin, h, cout, k, s, p = (c[x] for x in ("n", "cin", "h", "cout", "k", "stride", "pad"))
    x, w = rand(n, cin, h, h), rand(cout, cin, k, k) * 0.1
    oh = (h + 2 * p - k) // s + 1
    dy = rand(n, cout, oh, oh)
    if c["pass"] == "fwd":
        return lambda: F.conv2d(x, w, stride=s, padding=p)
    if c["pass"] == "bwd-input":
        return lambda: torch.nn.grad.conv2d_input(x.shape, w, dy, stride=s, padding=p)
    return lambda: torch.nn.grad.conv2d_weight(x, w.shape, dy, stride=s, padding=p)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cases", required=True, help="JSON from `node bench.mjs kernels --gpu --list`")
    ap.add_argument("--specs", required=True, help="JSON from `node bench.mjs specs --models=...`")
    ap.add_argument("--out", required=True)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--device", default="cuda", help="cuda (the anchor), or cpu to check this script on a machine without a GPU")
    a = ap.parse_args()
    if a.device == "cuda" and not torch.cuda.is_available():
        sys.exit("torch_anchor: PyTorch sees no CUDA device here (--device cpu checks the script without one)")
    dev = torch.device(a.device)
    name = torch.cuda.get_device_name(0) if dev.type == "cuda" else "cpu"
    log(f"torch {torch.__version__} on {name}; TF32 off, cudnn.benchmark on")
    result = {"torch_version": torch.__version__, "device": name, "cuda": torch.version.cuda, "cudnn": torch.backends.cudnn.version(),
              "kernels": [], "steps": []}

    # The practical fp32 ceiling (a smaller product on a CPU, where 8192^3 takes minutes).
    side = 8192 if dev.type == "cuda" else 1024
    a8 = torch.rand(side, side, device=dev)
    ms = time_calls(lambda: a8 @ a8, dev)
    result["gemm_peak_side"] = side
    result["gemm_peak_gflops"] = 2 * side**3 / 1e9 / (ms / 1e3)
    log(f"torch gemm {side} fp32: {result['gemm_peak_gflops']:.0f} GFLOP/s")
    del a8

    for c in json.load(open(a.cases)):
        try:
            ms = time_calls(case_fn(c, dev), dev)
            result["kernels"].append({"name": c["name"], "ms": ms, "gflops": c["gflop"] / (ms / 1e3)})
            log(f"{c['name']:44s} torch {c['gflop'] / (ms / 1e3):10.1f} GFLOP/s")
        except Exception as e:  # one shape must not cost the others' figures
            result["kernels"].append({"name": c["name"], "error": str(e)})
            log(f"{c['name']}: FAILED {e}")
        if dev.type == "cuda":
            torch.cuda.empty_cache()

    for e in json.load(open(a.specs)):
        try:
            ms, losses = train_step_ms(e, dev, a.steps)
            result["steps"].append({"model": e["label"], "ms": ms, "ips": e["batch"] / (ms / 1e3), "loss": losses})
            log(f"{e['label']:20s} torch {e['batch'] / (ms / 1e3):10.1f} img/s ({ms:.1f} ms/step)")
        except Exception as ex:
            result["steps"].append({"model": e["label"], "error": str(ex)})
            log(f"{e['label']}: FAILED {ex}")

    with open(a.out, "w") as f:
        json.dump(result, f, indent=1)
    print(json.dumps({"torch_version": result["torch_version"], "gemm_peak_gflops": round(result["gemm_peak_gflops"], 1)}))


if __name__ == "__main__":
    main()
