"""brigade embed against sentence-transformers' computation on a sentence-transformers folder:
the folder's tokenizer and model in transformers, then its pooling and normalisation as
sentence_transformers.models.Pooling / Normalize do them (mean over attended tokens, CLS, max,
mean * sqrt(len); F.normalize). Prints the worst cosine and max difference and exits non-zero
below cosine 0.99999.

    python tools/embed_parity.py BRIGADE MODEL_DIR [--batch-size N]
"""

import json
import os
import subprocess
import sys

import torch
import transformers

SENTENCES = [
    "A man is eating food.",
    "The quick brown fox jumps over the lazy dog, while brigade computes sentence embeddings in C.",
    "Café au lait, naïve façade — déjà vu.",
    "日本語の文章も埋め込みます。",
    "short",
    "A much longer sentence " + "that keeps going and going " * 12 + "until it is truncated.",
]


def reference(model_dir):
    tok = transformers.AutoTokenizer.from_pretrained(model_dir)
    model = transformers.AutoModel.from_pretrained(model_dir).eval()
    with open(os.path.join(model_dir, "modules.json")) as f:
        modules = json.load(f)
    pool_dir = next(m["path"] for m in modules if m["type"].endswith("Pooling"))
    with open(os.path.join(model_dir, pool_dir, "config.json")) as f:
        pool = json.load(f)
    normalize = any(m["type"].endswith("Normalize") for m in modules)
    max_len = 512
    cfg_path = os.path.join(model_dir, "sentence_bert_config.json")
    if os.path.exists(cfg_path):
        with open(cfg_path) as f:
            max_len = json.load(f).get("max_seq_length", max_len)
    enc = tok(SENTENCES, padding=True, truncation="longest_first", max_length=max_len, return_tensors="pt")
    with torch.no_grad():
        hidden = model(**enc).last_hidden_state
    mask = enc["attention_mask"].unsqueeze(-1).to(hidden.dtype)
    if pool.get("pooling_mode_cls_token"):
        out = hidden[:, 0]
    elif pool.get("pooling_mode_max_tokens"):
        out = hidden.masked_fill(mask == 0, -1e9).max(dim=1).values
    else:
        out = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
        if pool.get("pooling_mode_mean_sqrt_len_tokens"):
            out = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9).sqrt()
    if normalize:
        out = torch.nn.functional.normalize(out, p=2, dim=1)
    return out.double()


def brigade(exe, model_dir, batch_size):
    run = subprocess.run([exe, "embed", "--model", model_dir, "--batch-size", str(batch_size)],
                         input="\n".join(SENTENCES) + "\n", capture_output=True, text=True, check=True)
    return torch.tensor([json.loads(line)["embedding"] for line in run.stdout.splitlines()], dtype=torch.float64)


def main():
    exe, model_dir = sys.argv[1], sys.argv[2]
    batch = int(sys.argv[sys.argv.index("--batch-size") + 1]) if "--batch-size" in sys.argv else 4
    ref, got = reference(model_dir), brigade(exe, model_dir, batch)
    cos = torch.nn.functional.cosine_similarity(ref, got, dim=1)
    diff = (ref - got).abs().max().item()
    print(f"embed parity on {model_dir}: {len(SENTENCES)} sentences, worst cosine {cos.min().item():.9f}, "
          f"max |diff| {diff:.3g}")
    sys.exit(0 if cos.min().item() >= 0.99999 else 1)


if __name__ == "__main__":
    main()
