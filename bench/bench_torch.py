"""The workloads of brigade_bench in PyTorch, with transformers' classes and random weights built
from configs in code (no downloads): GPT-2 (GPT2LMHeadModel) at B x T 4x64 and 8x128, and at one
shape each ("default"): BertForSequenceClassification (bert-base, 2 labels, 4 x 128 tokens),
ViTForImageClassification (vit-base, 224x224 patch 16, 1000 labels, 2 images) and
T5ForConditionalGeneration (t5-small, 4 pairs of 128 -> 32 tokens). Training is forward +
backward + AdamW (lr 5e-5, no weight decay, as brigade's trainer defaults to); inference is the
forward under torch.inference_mode. --mode decode (GPT-2, not part of "all"): greedy
generate() with the cache, batches 1 and 8 of --prompt random tokens (128), --new-tokens new
tokens (128, min_new_tokens as many, so eos cannot end a row early); eager only (see run_decode).

    python bench/bench_torch.py [--model small|tiny|bert-base|vit-base|t5-small|all (comma list)]
                                [--mode train|infer|all] [--bt 4x64|8x128|default|all]
                                [--threads 1,2] [--variants eager,fused,compile] [--compile-threads 1,2]
                                [--one CONFIG]
                                [--steps N] [--warmup N] [--peak1 GFLOPS --peak2 GFLOPS]
                                [--env-tag NAME] [--prompt N] [--new-tokens N]

Configurations, for each thread count n (torch.set_num_threads(n)):
  tn          eager, torch.optim.AdamW with its defaults (the for-loop implementation on CPU)
  tn-fused    eager, AdamW(fused=True); foreach=True where this torch has no fused CPU AdamW
              (training only; the optim= field says which ran)
  tn-compile  torch.compile(model) (inductor), the optimizer as tn-fused. Compilation happens in
              the warm-up steps (at least 2), which are not timed; compile_s= is their time less
              as many timed steps. Inductor's on-disk cache makes later compiles of the same graph
              faster. A compile that fails (no C++ compiler, ...) prints a note, not a RESULT line.
              --compile-threads limits it to some thread counts (bench/run.sh: 2, PyTorch's fastest on
              2 cores, since each compile costs tens of seconds there).
--one CONFIG runs that configuration alone (e.g. --one t2-fused); with one model, mode and shape it
makes this process's peak RSS that workload's own.

Prints the same numbers as brigade_bench and one "RESULT key=value ..." line per measurement
(impl=torch), which bench/run.sh collects. peak_rss_mb= is the process's peak resident set so far
(getrusage ru_maxrss): rss=fresh on the first measurement of the process (that workload's own,
plus the imports), rss=cumulative on later ones. FLOPs as brigade_bench counts them (see
flops_per_row).
"""

import argparse
import importlib
import os
import resource
import time

import torch
from transformers import (BertConfig, BertForSequenceClassification, GPT2Config, GPT2LMHeadModel, T5Config,
                          T5ForConditionalGeneration, ViTConfig, ViTForImageClassification)

GPT2 = {
    "small": dict(n_layer=12, n_head=12, n_embd=768, vocab_size=50257, n_positions=1024),
    "tiny": dict(n_layer=4, n_head=4, n_embd=256, vocab_size=8192, n_positions=256),
}
GPT2_SHAPES = {"4x64": (4, 64), "8x128": (8, 128)}
# name: (batch, tokens per row (ViT: patches + [CLS]; T5: source), T5 target tokens)
OTHER_SHAPES = {"bert-base": (4, 128, 0), "vit-base": (2, 197, 0), "t5-small": (4, 128, 32)}
MODEL_NAMES = ["small", "tiny", "bert-base", "vit-base", "t5-small"]
VARIANTS = ("eager", "fused", "compile")


def pick(want, name):
    return want == "all" or name in want.split(",")


def default_steps(model, train):
    """As brigade_bench: BERT, ViT and T5 take fewer steps to keep `make bench` within minutes."""
    if model == "tiny":
        return 5
    if model in OTHER_SHAPES:
        return 1 if train else 2
    return 2 if train else 4


def numel(module):
    return sum(p.numel() for p in module.parameters())


class Workload:
    """One model at one shape: its inputs, tokens per row and training FLOPs per row."""

    def __init__(self, name, bt):
        self.name, self.bt = name, bt
        g = torch.Generator().manual_seed(42)
        if name in GPT2:
            c = GPT2[name]
            self.model = GPT2LMHeadModel(GPT2Config(**c))
            b, t = GPT2_SHAPES[bt]
            ids = torch.randint(0, c["vocab_size"], (b, t), generator=g)
            self.train_in, self.infer_in = dict(input_ids=ids, labels=ids), dict(input_ids=ids)
            self.tokens = t
            self.flops = (6.0 * numel(self.model) + 6.0 * c["n_layer"] * c["n_embd"] * t) * t
            self.batch = b
            return
        b, t, td = OTHER_SHAPES[name]
        self.batch, self.tokens = b, t + td
        if name == "bert-base":
            cfg = BertConfig(num_labels=2)
            self.model = BertForSequenceClassification(cfg)
            ids = torch.randint(0, cfg.vocab_size, (b, t), generator=g)
            labels = torch.randint(0, 2, (b,), generator=g)
            self.train_in, self.infer_in = dict(input_ids=ids, labels=labels), dict(input_ids=ids)
            L, A = cfg.num_hidden_layers, cfg.hidden_size
            self.flops = 6.0 * numel(self.model.bert.encoder.layer) * t + 12.0 * L * A * t * t
        elif name == "vit-base":
            cfg = ViTConfig(num_labels=1000)
            self.model = ViTForImageClassification(cfg)
            px = torch.rand((b, 3, cfg.image_size, cfg.image_size), generator=g) * 2 - 1
            labels = torch.randint(0, 1000, (b,), generator=g)
            self.train_in, self.infer_in = dict(pixel_values=px, labels=labels), dict(pixel_values=px)
            L, A = cfg.num_hidden_layers, cfg.hidden_size
            vit = self.model.vit  # transformers 5 keeps the layers in vit.layers, 4 in vit.encoder.layer
            layers = vit.layers if hasattr(vit, "layers") else vit.encoder.layer
            self.flops = 6.0 * numel(layers) * t + 12.0 * L * A * t * t
        elif name == "t5-small":
            # t5-small: 6 + 6 layers, d_model 512, 8 heads of 64, relu, tied head; decoder start 0 as
            # in its config.json (T5Config leaves it unset in transformers 5)
            cfg = T5Config(decoder_start_token_id=0)
            self.model = T5ForConditionalGeneration(cfg)
            ids = torch.randint(0, cfg.vocab_size, (b, t), generator=g)
            labels = torch.randint(0, cfg.vocab_size, (b, td), generator=g)
            dec = torch.cat([torch.full((b, 1), cfg.decoder_start_token_id), labels[:, :-1]], dim=1)
            self.train_in = dict(input_ids=ids, labels=labels)
            self.infer_in = dict(input_ids=ids, decoder_input_ids=dec)
            A = cfg.num_heads * cfg.d_kv
            self.flops = (6.0 * (numel(self.model.encoder.block) * t + numel(self.model.decoder.block) * td +
                                 cfg.vocab_size * cfg.d_model * td) +
                          12.0 * cfg.num_layers * A * t * t + 6.0 * cfg.num_decoder_layers * A * td * td +
                          12.0 * cfg.num_decoder_layers * A * td * t)
        else:
            raise ValueError(f"unknown model {name}")


def make_optimizer(model, fast):
    """The trainer's AdamW (lr 5e-5, no weight decay); `fast`: fused, else foreach."""
    params = list(model.parameters())
    if not fast:
        return torch.optim.AdamW(params, lr=5e-5, weight_decay=0.0), "default"
    try:
        return torch.optim.AdamW(params, lr=5e-5, weight_decay=0.0, fused=True), "fused"
    except (RuntimeError, ValueError, TypeError):
        return torch.optim.AdamW(params, lr=5e-5, weight_decay=0.0, foreach=True), "foreach"


def run_train(model, fn, inputs, opt, warmup, steps):
    model.train()
    times = []
    for _ in range(warmup + steps):
        t = time.perf_counter()
        fn(**inputs).loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        times.append(time.perf_counter() - t)
    return times


def run_infer(model, fn, inputs, warmup, steps):
    model.eval()
    times = []
    with torch.inference_mode():
        for _ in range(warmup + steps):
            t = time.perf_counter()
            fn(**inputs).logits
            times.append(time.perf_counter() - t)
    return times


def measure(w, train, variant, threads, warmup, steps):
    """Seconds per step, the optimizer that ran, and the compile time (None when eager)."""
    torch.set_num_threads(threads)
    fn, compiled = w.model, variant == "compile"
    if compiled:
        dynamo = importlib.import_module("torch._dynamo")
        dynamo.reset()
        # The generated kernels' OpenMP width is fixed when they are generated.
        importlib.import_module("torch._inductor.config").cpp.threads = threads
        fn = torch.compile(w.model)
        warmup = max(warmup, 2)
    opt, optim = (make_optimizer(w.model, variant != "eager") if train else (None, "none"))
    try:
        times = (run_train(w.model, fn, w.train_in, opt, warmup, steps) if train
                 else run_infer(w.model, fn, w.infer_in, warmup, steps))
    finally:
        del opt
        if compiled:
            dynamo.reset()
    sec = sum(times[warmup:]) / steps
    return sec, optim, (max(0.0, sum(times[:warmup]) - warmup * sec) if compiled else None)


def generate_seconds(model, ids, new_tokens):
    t = time.perf_counter()
    out = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=new_tokens,
                         min_new_tokens=new_tokens, do_sample=False, use_cache=True, pad_token_id=0)
    assert out.shape[1] == ids.shape[1] + new_tokens
    return time.perf_counter() - t


def decode_bytes_per_step(c, n_params, batch, prompt, new_tokens):
    """As brigade_bench: every weight once (tied head counted once, one position row), and each
    row's keys and values at the mean cache length of the decode steps."""
    weights = n_params - (c["n_positions"] - 1) * c["n_embd"]
    return 4.0 * (weights + batch * 2.0 * c["n_layer"] * (prompt + new_tokens / 2.0) * c["n_embd"])


def run_decode(a, name, measured):
    """transformers' generate, greedy with the cache, as brigade_bench --mode decode: the prefill is
    a generate of one new token, the decode time the full generate's less that. Eager only:
    torch.compile of generate's growing dynamic cache recompiles as the length changes, and a
    static cache to avoid that is not what generate does by default."""
    c = GPT2[name]
    model = GPT2LMHeadModel(GPT2Config(**c)).eval()
    n_params = numel(model)
    g = torch.Generator().manual_seed(42)
    reps = a.steps or 1
    for batch in (1, 8):
        ids = torch.randint(0, c["vocab_size"], (batch, a.prompt), generator=g)
        for threads in (int(x) for x in a.threads.split(",")):
            torch.set_num_threads(threads)
            with torch.inference_mode():
                generate_seconds(model, ids, 2)
                prefill = min(generate_seconds(model, ids, 1) for _ in range(reps))
                full = min(generate_seconds(model, ids, a.new_tokens) for _ in range(reps))
            dec = full - prefill
            tps = (a.new_tokens - 1) * batch / dec
            step_bytes = decode_bytes_per_step(c, n_params, batch, a.prompt, a.new_tokens)
            mean_len = a.prompt + a.new_tokens / 2.0
            gflops = tps * (2.0 * n_params + 4.0 * c["n_layer"] * c["n_embd"] * mean_len) * 1e-9
            rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
            print(f"  {name:9s} decode {batch}x{a.prompt}+{a.new_tokens} t{threads}  prefill {prefill * 1e3:8.1f} ms  "
                  f"decode {tps:9.1f} tokens/s  {step_bytes / batch * 1e-6:.1f} MB/token", flush=True)
            print(f"RESULT impl=torch model={name} mode=decode bt={batch}x{a.prompt} config=t{threads} cores={threads} "
                  f"threads={threads} batch={batch} prompt={a.prompt} new_tokens={a.new_tokens} "
                  f"prefill_ms={prefill * 1e3:.3f} ms_per_step={dec / (a.new_tokens - 1) * 1e3:.3f} "
                  f"decode_tokens_per_s={tps:.3f} tokens_per_s={tps:.3f} gflops={gflops:.3f} "
                  f"bytes_per_token={step_bytes / batch:.0f} params={n_params} peak_rss_mb={rss:.1f} "
                  f"rss={'cumulative' if measured else 'fresh'} env={a.env_tag}", flush=True)
            measured += 1
    return measured


def configs(a, train):
    if a.one:
        threads, _, variant = a.one.removeprefix("t").partition("-")
        out = [(int(threads), variant or "eager")]
    else:
        out = [(n, v) for v in a.variants.split(",")
               for n in (int(x) for x in (a.compile_threads if v == "compile" else a.threads).split(","))]
    for _, v in out:
        if v not in VARIANTS:
            raise SystemExit(f"bench_torch: unknown variant {v} (want {', '.join(VARIANTS)})")
    return [(n, v) for n, v in out if train or v != "fused"]  # no optimizer in inference


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="all")
    ap.add_argument("--mode", default="all")
    ap.add_argument("--bt", default="all")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--compile-threads", default="", help="thread counts of the compile variant (default --threads)")
    ap.add_argument("--one", default="", help="one configuration, e.g. t2-fused")
    ap.add_argument("--steps", type=int, default=0)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--peak1", type=float, default=0.0)
    ap.add_argument("--peak2", type=float, default=0.0)
    ap.add_argument("--env-tag", default="default")
    ap.add_argument("--prompt", type=int, default=128, help="decode: tokens per prompt")
    ap.add_argument("--new-tokens", type=int, default=128, help="decode: new tokens per row")
    a = ap.parse_args()
    a.compile_threads = a.compile_threads or a.threads

    print(f"bench_torch: torch {torch.__version__}, BLAS {torch.backends.mkl.is_available() and 'MKL' or 'other'}, "
          f"OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', 'unset')}, "
          f"OPENBLAS_L2_SIZE={os.environ.get('OPENBLAS_L2_SIZE', 'unset')}", flush=True)
    peaks = {1: a.peak1, 2: a.peak2}
    measured = 0
    torch.manual_seed(0)
    for name in MODEL_NAMES:
        if not pick(a.model, name):
            continue
        if a.mode != "all" and pick(a.mode, "decode") and name in GPT2:
            measured = run_decode(a, name, measured)
        shapes = list(GPT2_SHAPES) if name in GPT2 else ["default"]
        for mode in ("train", "infer"):
            if not pick(a.mode, mode):
                continue
            train = mode == "train"
            for bt in shapes:
                if not pick(a.bt, bt):
                    continue
                w = Workload(name, bt)
                n_params = numel(w.model)
                print(f"{name} {bt}: {n_params} parameters, B = {w.batch}", flush=True)
                for threads, variant in configs(a, train):
                    config = f"t{threads}" + ("" if variant == "eager" else f"-{variant}")
                    steps = a.steps or default_steps(name, train)
                    try:
                        sec, optim, compile_s = measure(w, train, variant, threads, a.warmup, steps)
                    except Exception as e:  # noqa: BLE001 - a failing compile is reported, not fatal
                        if variant != "compile":
                            raise
                        msg = str(e).strip().splitlines()
                        print(f"  note: {name} {mode} {bt} {config}: torch.compile failed ({type(e).__name__}: "
                              f"{msg[0][:200] if msg else ''}); no result", flush=True)
                        continue
                    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
                    tps = w.batch * w.tokens / sec
                    gflops = w.flops / (1.0 if train else 3.0) * w.batch / sec * 1e-9
                    peak = peaks.get(threads, 0.0)
                    share = gflops / peak if peak > 0 else 0.0
                    extra = f"  compile {compile_s:.1f} s" if compile_s is not None else ""
                    print(f"  {name:9s} {mode:5s} {bt:7s} {config:12s} {sec * 1e3:9.1f} ms/step  {tps:9.0f} tokens/s"
                          f"  {gflops:7.1f} GFLOP/s  {100 * share:5.1f}% of {threads}-core peak  peak RSS {rss:.0f} MiB"
                          f"{' (process so far)' if measured else ''}{extra}", flush=True)
                    fields = (f"RESULT impl=torch model={name} mode={mode} bt={bt} config={config} cores={threads} "
                              f"threads={threads} ms_per_step={sec * 1e3:.3f} tokens_per_s={tps:.3f} "
                              f"gflops={gflops:.3f} peak_share={share:.4f} pipe_eff=0 ideal=0 steps={steps} "
                              f"params={n_params} optim={optim} peak_rss_mb={rss:.1f} "
                              f"rss={'cumulative' if measured else 'fresh'} env={a.env_tag}")
                    if compile_s is not None:
                        fields += f" compile_s={compile_s:.2f}"
                    print(fields, flush=True)
                    measured += 1
                del w


if __name__ == "__main__":
    main()
