"""Reference fixtures for brigade's optimizers, LR schedules and gradient clipping.

Writes into --out (default tests/fixtures/optim):

  <case>.safetensors       one optimizer run of STEPS steps (see CASES)
  lr_schedules.safetensors transformers' LR schedules, one tensor of per-step lrs per schedule
  clip_grad_norm.safetensors  torch.nn.utils.clip_grad_norm_ inputs, outputs and total norms

An optimizer case holds, for parameters P (in the order of the "params" metadata entry):
  init.<P>            the parameter before the first step
  grad.<k>.<P>        the gradient given to step k (k = 0 .. STEPS-1), before any clipping
  param.<k>.<P>       the parameter after step k
  lr                  [STEPS] the learning rate step k used
  grad_norm           [STEPS] the pre-clip total norm (cases with max_grad_norm only)
  state.<P>.<key>     the optimizer state after the last step, under torch's state keys
                      (momentum_buffer, exp_avg, exp_avg_sq, square_avg, grad_avg)
and string metadata: kind, every optimizer hyper-parameter (repr of the Python value), params,
no_decay (parameters in the weight-decay-free group, as transformers' Trainer groups biases and
LayerNorm weights), steps, and for scheduled cases schedule, warmup_steps, total_steps; for
clipped cases max_grad_norm.

The spec is torch.optim in float32 on the CPU with foreach=False (the _single_tensor_* code
paths), with parameter groups built as transformers' Trainer builds them (weight_decay on one
group, 0.0 on the other), transformers' LambdaLR schedules stepped once per optimizer step, and
torch.nn.utils.clip_grad_norm_ before each step when max_grad_norm is set.

Two algorithms have no torch.optim implementation, so this script implements them:
  * LAMB, ported from the reference step() of poptorch.optim.LAMB (You et al. 2019, "Large Batch
    Optimization for Deep Learning"): Adam moments with optional bias correction,
    upd = m_hat / (sqrt(v_hat) + eps) + weight_decay * w, trust = min(||w||, max_weight_norm) / ||upd||
    (1 when either norm is 0), w -= lr * trust * upd.
  * Adam/AdamW without bias correction (PopART's NoBias modes): torch's _single_tensor_adam with
    both bias corrections fixed at 1.

Usage:
  tools/.venv/bin/python tools/optim_fixtures.py [--out tests/fixtures/optim]
Regenerating gives byte-identical files for the same library versions.
"""

import argparse
import dataclasses
import json
import math
import os
import struct

import torch
from transformers import (get_constant_schedule, get_constant_schedule_with_warmup,
                          get_cosine_schedule_with_warmup, get_linear_schedule_with_warmup)

STEPS = 10

# name -> (shape, no_decay)
PARAMS = {
    "dense.weight": ((4, 5), False),
    "dense.bias": ((5,), True),
    "out.weight": ((3, 4), False),
}


class ReferenceLAMB(torch.optim.Optimizer):
    """poptorch.optim.LAMB.step(), minus loss scaling and accumulator types."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2,
                 bias_correction=True, max_weight_norm=65500.0):
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay)
        super().__init__(params, defaults)
        self.bias_correction = bias_correction
        self.max_weight_norm = max_weight_norm

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            for p in group["params"]:
                grad = p.grad
                state = self.state[p]
                if len(state) == 0:
                    state["step"] = 0
                    state["exp_avg"] = torch.zeros_like(p)
                    state["exp_avg_sq"] = torch.zeros_like(p)
                state["step"] += 1
                exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
                beta1, beta2 = group["betas"]
                if self.bias_correction:
                    bias_correction1 = 1 - beta1 ** state["step"]
                    bias_correction2 = 1 - beta2 ** state["step"]
                else:
                    bias_correction1 = 1
                    bias_correction2 = 1
                exp_avg.mul_(beta1).add_(grad, alpha=1 - beta1)
                exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
                denom = (exp_avg_sq.sqrt() / math.sqrt(bias_correction2)).add_(group["eps"])
                upd = ((exp_avg / bias_correction1) / denom) + group["weight_decay"] * p
                r1 = p.pow(2).sum().sqrt()
                r2 = upd.pow(2).sum().sqrt()
                r1_ = r1.clamp(max=self.max_weight_norm)
                trust = 1.0 if (r1_ == 0 or r2 == 0) else r1_ / r2
                p.add_(upd, alpha=-group["lr"] * trust)


class AdamNoBias(torch.optim.Optimizer):
    """torch's _single_tensor_adam with bias_correction1 = bias_correction2 = 1."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0,
                 decoupled_weight_decay=False):
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay)
        super().__init__(params, defaults)
        self.decoupled = decoupled_weight_decay

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            lr, wd, eps = group["lr"], group["weight_decay"], group["eps"]
            beta1, beta2 = group["betas"]
            for p in group["params"]:
                grad = p.grad
                state = self.state[p]
                if len(state) == 0:
                    state["step"] = torch.tensor(0.0)
                    state["exp_avg"] = torch.zeros_like(p)
                    state["exp_avg_sq"] = torch.zeros_like(p)
                state["step"] += 1
                if wd != 0:
                    if self.decoupled:
                        p.mul_(1 - lr * wd)
                    else:
                        grad = grad.add(p, alpha=wd)
                state["exp_avg"].lerp_(grad, 1 - beta1)
                state["exp_avg_sq"].mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
                denom = state["exp_avg_sq"].sqrt().add_(eps)
                p.addcdiv_(state["exp_avg"], denom, value=-lr)


@dataclasses.dataclass
class Case:
    name: str
    kind: str  # sgd | adam | adamw | rmsprop | lamb
    options: dict
    seed: int
    schedule: tuple = None  # (name, warmup_steps, total_steps)
    max_grad_norm: float = None
    zero_bias: bool = False  # start the no-decay parameter at 0 (LAMB: ||w|| = 0 -> trust 1)


CASES = [
    Case("sgd_plain", "sgd", dict(lr=0.1), seed=1),
    Case("sgd_momentum_dampening", "sgd", dict(lr=0.05, momentum=0.9, dampening=0.3), seed=2),
    Case("sgd_nesterov_wd", "sgd", dict(lr=0.05, momentum=0.8, nesterov=True, weight_decay=0.05),
         seed=3),
    Case("adam", "adam", dict(lr=0.01), seed=4),
    Case("adam_wd", "adam", dict(lr=0.01, betas=(0.8, 0.99), eps=1e-6, weight_decay=0.1), seed=5),
    Case("adamw_linear_clip", "adamw", dict(lr=0.02, weight_decay=0.05), seed=6,
         schedule=("linear", 3, 10), max_grad_norm=1.0),
    Case("adamw_nobias", "adamw", dict(lr=0.01, weight_decay=0.01, bias_correction=False), seed=7),
    Case("rmsprop", "rmsprop", dict(lr=0.01), seed=8),
    Case("rmsprop_centered_momentum", "rmsprop",
         dict(lr=0.01, alpha=0.9, momentum=0.5, centered=True, weight_decay=0.02), seed=9),
    Case("lamb_cosine_clip", "lamb", dict(lr=0.02, weight_decay=0.01), seed=10,
         schedule=("cosine", 2, 10), max_grad_norm=1.0, zero_bias=True),
    Case("lamb_nobias_maxnorm", "lamb",
         dict(lr=0.02, weight_decay=0.1, bias_correction=False, max_weight_norm=1.0), seed=11,
         zero_bias=True),
]


def make_optimizer(case, groups):
    opts = dict(case.options)
    if case.kind == "sgd":
        return torch.optim.SGD(groups, foreach=False, **opts)
    if case.kind in ("adam", "adamw"):
        if opts.pop("bias_correction", True):
            cls = torch.optim.Adam if case.kind == "adam" else torch.optim.AdamW
            return cls(groups, foreach=False, **opts)
        return AdamNoBias(groups, decoupled_weight_decay=case.kind == "adamw", **opts)
    if case.kind == "rmsprop":
        return torch.optim.RMSprop(groups, foreach=False, **opts)
    if case.kind == "lamb":
        return ReferenceLAMB(groups, **opts)
    raise ValueError(case.kind)


def make_schedule(optimizer, schedule):
    if schedule is None:
        return get_constant_schedule(optimizer)
    name, warmup, total = schedule
    if name == "constant_with_warmup":
        return get_constant_schedule_with_warmup(optimizer, warmup)
    if name == "linear":
        return get_linear_schedule_with_warmup(optimizer, warmup, total)
    if name == "cosine":
        return get_cosine_schedule_with_warmup(optimizer, warmup, total)
    raise ValueError(name)


def case_grads(case, gen):
    """STEPS gradients per parameter; clipped cases alternate large norms (clip active) with one
    small step (clip inactive)."""
    grads = []
    for k in range(STEPS):
        scale = 1.0
        if case.max_grad_norm is not None:
            scale = 0.01 if k == 4 else 1.0
        grads.append({n: torch.randn(shape, generator=gen) * scale
                      for n, (shape, _) in PARAMS.items()})
    return grads


def case_metadata(case, optimizer):
    meta = {"kind": case.kind, "steps": str(STEPS), "params": ",".join(PARAMS),
            "no_decay": ",".join(n for n, (_, nd) in PARAMS.items() if nd)}
    group = optimizer.param_groups[0]
    for key in ("lr", "eps", "weight_decay", "momentum", "dampening", "nesterov", "alpha",
                "centered"):
        if key in group:
            meta[key] = repr(case.options.get(key, group[key]))
    if "betas" in group:
        meta["beta1"], meta["beta2"] = (repr(float(b)) for b in group["betas"])
    if case.kind in ("adam", "adamw", "lamb"):
        meta["bias_correction"] = repr(case.options.get("bias_correction", True))
    if case.kind == "lamb":
        meta["max_weight_norm"] = repr(float(optimizer.max_weight_norm))
    if case.schedule is not None:
        meta["schedule"], meta["warmup_steps"], meta["total_steps"] = map(str, case.schedule)
    if case.max_grad_norm is not None:
        meta["max_grad_norm"] = repr(case.max_grad_norm)
    return meta


def run_case(case):
    gen = torch.Generator().manual_seed(case.seed)
    params = {}
    for n, (shape, no_decay) in PARAMS.items():
        init = torch.randn(shape, generator=gen) * 0.5
        if no_decay and case.zero_bias:
            init = torch.zeros(shape)
        params[n] = torch.nn.Parameter(init)
    wd = case.options.get("weight_decay", 0.0)
    decay = [p for n, p in params.items() if not PARAMS[n][1]]
    no_decay = [p for n, p in params.items() if PARAMS[n][1]]
    optimizer = make_optimizer(case, [{"params": decay, "weight_decay": wd},
                                      {"params": no_decay, "weight_decay": 0.0}])
    scheduler = make_schedule(optimizer, case.schedule)
    grads = case_grads(case, gen)

    out = {f"init.{n}": p.detach().clone() for n, p in params.items()}
    lrs, norms = [], []
    for k in range(STEPS):
        for n, p in params.items():
            out[f"grad.{k}.{n}"] = grads[k][n].clone()
            p.grad = grads[k][n].clone()
        if case.max_grad_norm is not None:
            norms.append(float(torch.nn.utils.clip_grad_norm_(
                list(params.values()), case.max_grad_norm, foreach=False)))
        lrs.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        scheduler.step()
        for n, p in params.items():
            out[f"param.{k}.{n}"] = p.detach().clone()
    out["lr"] = torch.tensor(lrs, dtype=torch.float32)
    if norms:
        out["grad_norm"] = torch.tensor(norms, dtype=torch.float32)
    for n, p in params.items():
        for key, value in optimizer.state[p].items():
            if torch.is_tensor(value) and value.shape == p.shape:
                out[f"state.{n}.{key}"] = value.clone()
    return out, case_metadata(case, optimizer)


SCHEDULES = [
    # name, kind, warmup, total, base_lr, steps to tabulate
    ("constant", "constant", 0, 0, 5e-5, 12),
    ("constant_with_warmup", "constant_with_warmup", 4, 0, 1e-3, 12),
    ("constant_with_warmup_0", "constant_with_warmup", 0, 0, 1e-3, 6),
    ("linear", "linear", 3, 10, 5e-5, 14),
    ("linear_no_warmup", "linear", 0, 7, 0.1, 10),
    ("linear_warmup_eq_total", "linear", 5, 5, 2e-4, 9),
    ("cosine", "cosine", 2, 10, 3e-4, 14),
    ("cosine_no_warmup", "cosine", 0, 100, 1e-3, 120),
    ("cosine_long_warmup", "cosine", 25, 60, 6e-4, 70),
]


def schedule_fixture():
    tensors, meta = {}, {}
    for name, kind, warmup, total, base_lr, steps in SCHEDULES:
        opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=base_lr)
        sched = make_schedule(opt, None if kind == "constant" else (kind, warmup, total))
        lrs = []
        for _ in range(steps):
            lrs.append(opt.param_groups[0]["lr"])
            opt.step()
            sched.step()
        tensors[name] = torch.tensor(lrs, dtype=torch.float32)
        meta[name] = f"kind={kind} warmup={warmup} total={total} base_lr={base_lr!r}"
    return tensors, meta


CLIPS = [
    # name, max_norm, gradient scale
    ("active", 1.0, 1.0),
    ("inactive", 100.0, 1.0),
    ("norm_only", math.inf, 1.0),
    ("tiny", 0.5, 1e-3),
]


def clip_fixture():
    gen = torch.Generator().manual_seed(1234)
    tensors, meta = {}, {}
    for name, max_norm, scale in CLIPS:
        params = [torch.nn.Parameter(torch.zeros(shape)) for shape in ((7, 3), (11,), (2, 2, 5))]
        for i, p in enumerate(params):
            p.grad = torch.randn(p.shape, generator=gen) * scale
            tensors[f"{name}.in.{i}"] = p.grad.clone()
        total = torch.nn.utils.clip_grad_norm_(params, max_norm, foreach=False)
        for i, p in enumerate(params):
            tensors[f"{name}.out.{i}"] = p.grad.clone()
        tensors[f"{name}.total_norm"] = total.reshape(1).to(torch.float32)
        meta[name] = f"max_norm={max_norm!r} n={len(params)}"
    return tensors, meta


def write_safetensors(path, tensors, metadata):
    """safetensors.torch.save_file's layout (data ordered by name, all F32; header padded with
    spaces to 8 bytes), but with the metadata keys sorted: save_file writes them in hash order,
    which changes from run to run and would make regenerated files differ."""
    header = {"__metadata__": dict(sorted(metadata.items()))}
    blobs, offset = [], 0
    for name in sorted(tensors):
        t = tensors[name].detach().to(torch.float32).contiguous()
        data = t.numpy().astype("<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for blob in blobs:
            f.write(blob)
    os.replace(tmp, path)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "tests",
                                                      "fixtures", "optim"))
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    torch.set_num_threads(1)
    for case in CASES:
        tensors, meta = run_case(case)
        write_safetensors(os.path.join(args.out, f"{case.name}.safetensors"), tensors, meta)
    tensors, meta = schedule_fixture()
    write_safetensors(os.path.join(args.out, "lr_schedules.safetensors"), tensors, meta)
    tensors, meta = clip_fixture()
    write_safetensors(os.path.join(args.out, "clip_grad_norm.safetensors"), tensors, meta)
    print(f"wrote {len(CASES) + 2} files to {os.path.normpath(args.out)}")


if __name__ == "__main__":
    main()
