"""Pieces shared by the fixture scripts (gpt2_fixtures.py, bert_vit_fixtures.py, t5_fixtures.py):
parameter noise, version metadata, byte-stable safetensors headers, error measures, and the
command line (--out / --random N --seed S / --verify DIR...)."""

import argparse
import json
import os

import torch
import transformers
from safetensors.torch import load_file


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
