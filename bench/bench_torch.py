"""The workloads of brigade_bench in PyTorch: GPT-2 (transformers' GPT2LMHeadModel) training
(forward + backward + AdamW) and inference at the same shapes, on 1 and 2 intra-op threads.

    python bench/bench_torch.py [--model small|tiny|all] [--mode train|infer|all]
                                [--bt 4x64|8x128|all] [--threads 1,2] [--steps N] [--warmup N]
                                [--peak1 GFLOPS --peak2 GFLOPS] [--env-tag NAME]

Prints the same numbers as brigade_bench and one "RESULT key=value ..." line per measurement
(impl=torch, config=t<threads>), which bench/run.sh collects. FLOPs per token: 6 N + 6 L C T
in training, a third of that for inference (N = parameters, tied embeddings counted once).
"""

import argparse
import os
import time

import torch
from transformers import GPT2Config, GPT2LMHeadModel

MODELS = {
    "small": dict(n_layer=12, n_head=12, n_embd=768, vocab_size=50257, n_positions=1024),
    "tiny": dict(n_layer=4, n_head=4, n_embd=256, vocab_size=8192, n_positions=256),
}
SHAPES = {"4x64": (4, 64), "8x128": (8, 128)}


def default_steps(model, train):
    if model == "tiny":
        return 5
    return 2 if train else 4


def pick(want, name):
    return want == "all" or want == name


def flops_per_token(n_params, cfg, seq, train):
    f = 6.0 * n_params + 6.0 * cfg["n_layer"] * cfg["n_embd"] * seq
    return f if train else f / 3.0


def bench_train(model, ids, warmup, steps):
    model.train()
    # The same optimizer brigade's trainer defaults to: AdamW, lr 5e-5, no weight decay.
    opt = torch.optim.AdamW(model.parameters(), lr=5e-5, weight_decay=0.0)
    times = []
    for i in range(warmup + steps):
        t = time.perf_counter()
        out = model(input_ids=ids, labels=ids)
        out.loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        times.append(time.perf_counter() - t)
    del opt
    return sum(times[warmup:]) / steps


def bench_infer(model, ids, warmup, steps):
    model.eval()
    times = []
    with torch.inference_mode():
        for i in range(warmup + steps):
            t = time.perf_counter()
            model(input_ids=ids).logits
            times.append(time.perf_counter() - t)
    return sum(times[warmup:]) / steps


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="all")
    ap.add_argument("--mode", default="all")
    ap.add_argument("--bt", default="all")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--steps", type=int, default=0)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--peak1", type=float, default=0.0)
    ap.add_argument("--peak2", type=float, default=0.0)
    ap.add_argument("--env-tag", default="default")
    a = ap.parse_args()

    print(f"bench_torch: torch {torch.__version__}, BLAS {torch.backends.mkl.is_available() and 'MKL' or 'other'}, "
          f"OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', 'unset')}, "
          f"OPENBLAS_L2_SIZE={os.environ.get('OPENBLAS_L2_SIZE', 'unset')}", flush=True)
    peaks = {1: a.peak1, 2: a.peak2}
    torch.manual_seed(0)
    for name, cfg in MODELS.items():
        if not pick(a.model, name):
            continue
        model = GPT2LMHeadModel(GPT2Config(**cfg))
        n_params = sum(p.numel() for p in model.parameters())
        print(f"GPT-2 {name}: {n_params} parameters", flush=True)
        for mode in ("train", "infer"):
            if not pick(a.mode, mode):
                continue
            train = mode == "train"
            for bt, (b, t) in SHAPES.items():
                if not pick(a.bt, bt):
                    continue
                ids = torch.randint(0, cfg["vocab_size"], (b, t))
                for threads in [int(x) for x in a.threads.split(",")]:
                    torch.set_num_threads(threads)
                    steps = a.steps or default_steps(name, train)
                    sec = (bench_train if train else bench_infer)(model, ids, a.warmup, steps)
                    tps = b * t / sec
                    gflops = flops_per_token(n_params, cfg, t, train) * tps * 1e-9
                    peak = peaks.get(threads, 0.0)
                    share = gflops / peak if peak > 0 else 0.0
                    print(f"  {name:5s} {mode:5s} {bt:6s} t{threads}     {sec * 1e3:9.1f} ms/step  {tps:9.0f} tokens/s"
                          f"  {gflops:7.1f} GFLOP/s  {100 * share:5.1f}% of {threads}-core peak", flush=True)
                    print(f"RESULT impl=torch model={name} mode={mode} bt={bt} config=t{threads} cores={threads} "
                          f"threads={threads} ms_per_step={sec * 1e3:.3f} tokens_per_s={tps:.3f} gflops={gflops:.3f} "
                          f"peak_share={share:.4f} pipe_eff=0 ideal=0 steps={steps} params={n_params} "
                          f"env={a.env_tag}", flush=True)
        del model


if __name__ == "__main__":
    main()
