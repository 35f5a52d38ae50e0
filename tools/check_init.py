"""Check a model folder written by `brigade init` against transformers, and `brigade forward`'s output.

  python tools/check_init.py MODEL_DIR INPUTS.safetensors BRIGADE_OUTPUT.safetensors

1. MODEL_DIR must load with GPT2LMHeadModel.from_pretrained with no missing, unexpected or
   mismatched tensors, and model.safetensors must use exactly transformers' tensor names
   (the tied lm_head.weight stored once, as transformer.wte.weight).
2. transformers' forward on INPUTS (input_ids, optional attention_mask, optional labels), in
   float32, eval mode, eager attention, must agree with BRIGADE_OUTPUT: `logits` within 1e-4
   absolute, `loss` within 1e-5 (required when INPUTS has labels).

Prints one line, PASS or FAIL, and exits 0 on PASS, 1 on FAIL.
"""

import argparse
import os
import sys

import safetensors
import torch
import transformers
from safetensors.torch import load_file
from transformers import GPT2LMHeadModel

INPUT_NAMES = ("input_ids", "attention_mask", "labels")


def parse_args(argv):
    """Command-line options."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model_dir", help="model folder (config.json + model.safetensors)")
    parser.add_argument("inputs", help="safetensors with input_ids [, attention_mask, labels]")
    parser.add_argument("output", help="brigade forward output safetensors (logits [, loss])")
    parser.add_argument("--logits-atol", type=float, default=1e-4)
    parser.add_argument("--loss-atol", type=float, default=1e-5)
    return parser.parse_args(argv)


def brief(names, limit=4):
    """A short listing of names: the first few, then how many more."""
    names = sorted(map(str, names))
    more = f" (+{len(names) - limit} more)" if len(names) > limit else ""
    return "[" + ", ".join(names[:limit]) + "]" + more


def load_model(model_dir):
    """Load with transformers; return (model, problems) where problems lists loading issues."""
    model, info = GPT2LMHeadModel.from_pretrained(
        model_dir, attn_implementation="eager", dtype=torch.float32, output_loading_info=True)
    problems = [f"{kind.replace('_', ' ')}: {brief(keys)}"
                for kind, keys in info.items() if keys and kind != "error_msgs"]
    problems += [str(msg) for msg in info.get("error_msgs", [])]
    return model.eval(), problems


def stored_names(model_dir):
    """Tensor names in model_dir/model.safetensors."""
    with safetensors.safe_open(os.path.join(model_dir, "model.safetensors"), "pt") as f:
        return set(f.keys())


def expected_names(model):
    """Names transformers saves for `model`: its state dict minus tied duplicates."""
    names = set(model.state_dict().keys())
    if model.lm_head.weight is model.transformer.wte.weight:
        names.discard("lm_head.weight")
    return names


def check_weights(model, model_dir):
    """Stored names must match transformers' names exactly and the loaded values the stored ones."""
    stored = stored_names(model_dir)
    wanted = expected_names(model)
    problems = []
    if stored != wanted:
        problems.append(f"tensor names differ from transformers': unexpected {brief(stored - wanted)}, "
                        f"absent {brief(wanted - stored)}")
    params = model.state_dict()
    for name, tensor in load_file(os.path.join(model_dir, "model.safetensors")).items():
        if name in params and not torch.equal(params[name], tensor.to(params[name].dtype)):
            problems.append(f"{name} was not loaded as stored")
    return problems


def run_reference(model, inputs):
    """transformers' logits and loss (loss None without labels)."""
    with torch.no_grad():
        out = model(**inputs)
    return out.logits, out.loss


def compare(ref_logits, ref_loss, brigade, args):
    """Return (problems, summary) comparing brigade's outputs with the reference."""
    problems, parts = [], []
    logits = brigade.get("logits")
    if logits is None:
        problems.append("brigade output has no `logits`")
    elif tuple(logits.shape) != tuple(ref_logits.shape):
        problems.append(f"logits shape {list(logits.shape)} != {list(ref_logits.shape)}")
    else:
        diff = (logits.float() - ref_logits).abs().max().item()
        parts.append(f"logits max|diff| {diff:.2e}")
        if not diff <= args.logits_atol:
            problems.append(f"logits differ by {diff:.2e} > {args.logits_atol:g}")
    if ref_loss is not None:
        loss = brigade.get("loss")
        if loss is None or loss.numel() != 1:
            problems.append("brigade output has no scalar `loss` although labels were given")
        else:
            diff = abs(loss.float().item() - ref_loss.item())
            parts.append(f"loss {ref_loss.item():.6f} |diff| {diff:.2e}")
            if not diff <= args.loss_atol:
                problems.append(f"loss differs by {diff:.2e} > {args.loss_atol:g}")
    return problems, ", ".join(parts)


def check(args):
    """All checks; return (problems, summary)."""
    model, problems = load_model(args.model_dir)
    problems += check_weights(model, args.model_dir)
    stored_inputs = load_file(args.inputs)
    if "input_ids" not in stored_inputs:
        return problems + [f"{args.inputs} has no input_ids"], ""
    inputs = {k: stored_inputs[k].to(torch.int64) for k in INPUT_NAMES if k in stored_inputs}
    ref_logits, ref_loss = run_reference(model, inputs)
    more, summary = compare(ref_logits, ref_loss, load_file(args.output), args)
    return problems + more, summary


def main(argv=None):
    args = parse_args(argv)
    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    try:
        problems, summary = check(args)
    except Exception as exc:  # a model that does not load at all is a failure, not a crash
        problems, summary = [f"{type(exc).__name__}: {exc}"], ""
    if problems:
        print(f"FAIL check_init {args.model_dir}: " + "; ".join(problems))
        return 1
    print(f"PASS check_init {args.model_dir}: {summary}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
