"""Pieces shared by the fixture scripts (gpt2_fixtures.py, bert_vit_fixtures.py, t5_fixtures.py):
parameter noise, the saved folder (tensor names, expected.safetensors with version metadata and
byte-stable headers, reloading with transformers), forward/backward and the float32
recomputation check, central differences, and the command line (--out / --random N --seed S /
--verify DIR...)."""

import argparse
import json
import os

import safetensors
import torch
import transformers
from safetensors.torch import load_file, save_file


def perturb_parameters(model, generator, std):
    """Add N(0, std) noise to every (unique) parameter in place."""
    with torch.no_grad():
        for param in model.parameters():
            noise = torch.randn(param.shape, generator=generator, dtype=param.dtype)
            param.add_(noise * std)


def version_metadata():
    """Metadata stored in expected.safetensors."""
    return {"transformers_version": transformers.__version__, "torch_version": torch.__version__}


def max_rel_error(actual, reference):
    """max|actual - reference| / max(max|reference|, tiny)."""
    scale = max(reference.abs().max().item(), 1e-30)
    return (actual - reference).abs().max().item() / scale


def sort_metadata_keys(path):
    """Rewrite a safetensors header in place with its metadata keys sorted, so that regenerating
    a fixture gives identical bytes (the writer does not keep a stable metadata order)."""
    with open(path, "r+b") as f:
        size = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(size))
        metadata = header.pop("__metadata__", {})
        ordered = {"__metadata__": dict(sorted(metadata.items())), **header}
        text = json.dumps(ordered, separators=(",", ":")).encode()
        if len(text) > size:
            raise RuntimeError(f"{path}: rewritten header is longer than the original")
        f.seek(8)
        f.write(text + b" " * (size - len(text)))


def saved_tensor_names(model_dir):
    """Names of the tensors stored in model_dir/model.safetensors, sorted."""
    with safetensors.safe_open(os.path.join(model_dir, "model.safetensors"), "pt") as f:
        return sorted(f.keys())


def drop_generation_config(model_dir):
    """Removes the generation_config.json save_pretrained writes for generative models."""
    path = os.path.join(model_dir, "generation_config.json")
    if os.path.exists(path):
        os.remove(path)


def forward_backward(model, inputs, names):
    """Run the model with labels and backpropagate; return logits, loss and grads of `names`."""
    model.zero_grad(set_to_none=True)
    out = model(**inputs)
    out.loss.backward()
    grads = {}
    for name in names:
        grad = model.get_parameter(name).grad
        if grad is None:
            raise RuntimeError(f"no gradient for {name}")
        grads[name] = grad.detach().clone()
    return out.logits.detach().clone(), out.loss.detach().clone(), grads


def save_expected(model_dir, inputs, outputs, loss, grads, metadata):
    """Writes model_dir/expected.safetensors: the inputs, the outputs ({name: tensor}), the
    scalar loss and grad.<name> for every gradient, with version metadata added to `metadata`
    and the header's keys sorted (so that rewriting a fixture gives the same bytes)."""
    tensors = {k: v.contiguous() for k, v in inputs.items()}
    tensors.update({k: v.contiguous() for k, v in outputs.items()})
    tensors["loss"] = loss.reshape(())
    for name, grad in grads.items():
        tensors[f"grad.{name}"] = grad.contiguous()
    path = os.path.join(model_dir, "expected.safetensors")
    save_file(tensors, path, metadata={**version_metadata(), **metadata})
    sort_metadata_keys(path)


def load_checked(model_class, model_dir, dtype, attention="eager"):
    """model_class.from_pretrained(model_dir) in eval mode, failing on missing, unexpected or
    mismatched tensors."""
    model, info = model_class.from_pretrained(
        model_dir, attn_implementation=attention, dtype=dtype, output_loading_info=True)
    problems = [f"{k}: {sorted(v)}" for k, v in info.items() if v and k != "error_msgs"]
    problems += list(info.get("error_msgs", []))
    if problems:
        raise RuntimeError(f"{model_dir}: loading problems: {problems}")
    return model.eval()


def recompute_problems(model_dir, expected, outputs, loss, grads):
    """A float32 recomputation against the stored fixture: the grad.* names against
    model.safetensors, every output within 1e-5, the loss within 1e-6 and every gradient within
    1e-5 of its scale; returns the problems."""
    problems = []
    if {f"grad.{n}" for n in saved_tensor_names(model_dir)} != {k for k in expected if k.startswith("grad.")}:
        problems.append("grad.* names differ from model.safetensors names")
    for name, value in outputs.items():
        diff = (value - expected[name]).abs().max().item()
        if diff > 1e-5:
            problems.append(f"{name} differ by {diff:.3g}")
    if abs(loss.item() - expected["loss"].item()) > 1e-6:
        problems.append(f"loss differs: {loss.item()} vs {expected['loss'].item()}")
    for name, grad in grads.items():
        err = max_rel_error(grad, expected[f"grad.{name}"])
        if err > 1e-5:
            problems.append(f"grad.{name} differs (rel {err:.3g})")
    return problems


def central_difference(param, index, loss, eps):
    """(loss() at param[index] + eps - loss() at param[index] - eps) / (2 eps), param restored."""
    with torch.no_grad():
        x = param[index].item()
        param[index] = x + eps
        up = loss()
        param[index] = x - eps
        down = loss()
        param[index] = x
    return (up - down) / (2 * eps)


def check_probes(expected, probes, numeric_of, tol=1e-4):
    """Stored float32 gradient entries against float64 central differences; returns the problems.

    probes: (parameter name, index) pairs; numeric_of(name, index) computes the central difference.
    An entry's error is taken relative to its tensor's largest stored gradient."""
    problems = []
    for name, index in probes:
        stored = expected[f"grad.{name}"]
        numeric = numeric_of(name, index)
        err = abs(numeric - stored[index].item()) / max(stored.abs().max().item(), 1e-12)
        status = "ok" if err < tol else "MISMATCH"
        print(f"  fd {name}{list(index)}: stored {stored[index].item():+.6e} "
              f"numeric {numeric:+.6e} rel-to-max {err:.2e} {status}")
        if err >= tol:
            problems.append(f"finite difference mismatch for {name}{list(index)}")
    return problems


def verify_folder(model_dir, *checks):
    """Runs check(model_dir, expected) for each check on the folder's expected.safetensors;
    returns all their problems."""
    expected = load_file(os.path.join(model_dir, "expected.safetensors"))
    return [problem for check in checks for problem in check(model_dir, expected)]


def parse_args(description, argv):
    """The scripts' common command line."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--out", help="output root folder (one sub-folder per fixture)")
    parser.add_argument("--random", type=int, metavar="N",
                        help="write N random configurations instead of the committed set")
    parser.add_argument("--seed", type=int, default=0, help="seed for --random")
    parser.add_argument("--verify", nargs="+", metavar="DIR",
                        help="recompute fixture folders and check gradients numerically")
    args = parser.parse_args(argv)
    if not args.verify and not args.out:
        parser.error("--out is required unless --verify is given")
    return args


def run_verify(dirs, checks):
    """Runs the checks (see verify_folder) on each folder; returns the exit status."""
    failed = 0
    for model_dir in dirs:
        print(f"verify {model_dir}")
        problems = verify_folder(model_dir, *checks)
        for problem in problems:
            print(f"  FAIL {problem}")
        failed += bool(problems)
    print(f"{len(dirs) - failed} passed, {failed} failed")
    return 1 if failed else 0


def run_cli(description, argv, committed_specs, random_specs, write_fixture, describe, checks):
    """Write the committed or random fixtures, or verify folders with `checks` (functions of
    (model_dir, expected) returning problems: a recomputation, finite differences), as the
    arguments say."""
    args = parse_args(description, argv)
    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    torch.set_num_threads(1)
    if args.verify:
        return run_verify(args.verify, checks)
    specs = random_specs(args.random, args.seed) if args.random else committed_specs()
    os.makedirs(args.out, exist_ok=True)
    for spec in specs:
        print(describe(spec, write_fixture(spec, args.out)))
    return 0
