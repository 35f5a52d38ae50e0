"""Committed fixtures for brigade embed: small random sentence-transformers folders (a BertModel,
the bert_uncased tokenizer fixture, modules.json, a pooling config, optionally Normalize,
sentence_bert_config.json with a short max_seq_length so truncation is exercised), the input
sentences, and the embeddings sentence-transformers' pooling gives for them (computed as
tools/embed_parity.py does).

    python tools/embed_fixtures.py [--out tests/fixtures]
"""

import argparse
import json
import os
import shutil

import torch
import transformers

import embed_parity

VARIANTS = {  # name: (pooling mode, normalize)
    "embed_mean": ("pooling_mode_mean_tokens", True),
    "embed_cls": ("pooling_mode_cls_token", False),
    "embed_max": ("pooling_mode_max_tokens", True),
    "embed_sqrt": ("pooling_mode_mean_sqrt_len_tokens", False),
}
MODES = ["pooling_mode_cls_token", "pooling_mode_mean_tokens", "pooling_mode_max_tokens",
         "pooling_mode_mean_sqrt_len_tokens"]


def write_json(path, value):
    with open(path, "w") as f:
        json.dump(value, f, indent=2)
        f.write("\n")


def build(out, name, mode, normalize, tokenizer_dir):
    d = os.path.join(out, name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    shutil.copy(os.path.join(tokenizer_dir, "tokenizer.json"), d)
    with open(os.path.join(tokenizer_dir, "tokenizer.json")) as f:
        vocab = len(json.load(f)["model"]["vocab"])
    torch.manual_seed(sum(map(ord, name)))
    cfg = transformers.BertConfig(vocab_size=vocab, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                                  intermediate_size=24, max_position_embeddings=32, initializer_range=0.3)
    model = transformers.BertModel(cfg).eval()
    model.save_pretrained(d)
    modules = [{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
               {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}]
    if normalize:
        modules.append({"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"})
        os.makedirs(os.path.join(d, "2_Normalize"))
    write_json(os.path.join(d, "modules.json"), modules)
    os.makedirs(os.path.join(d, "1_Pooling"))
    pool = {"word_embedding_dimension": 16, **{m: m == mode for m in MODES}}
    write_json(os.path.join(d, "1_Pooling", "config.json"), pool)
    write_json(os.path.join(d, "sentence_bert_config.json"), {"max_seq_length": 12, "do_lower_case": False})
    ref = embed_parity.reference(d)
    with open(os.path.join(d, "sentences.txt"), "w") as f:
        f.write("\n".join(embed_parity.SENTENCES) + "\n")
    with open(os.path.join(d, "expected.jsonl"), "w") as f:
        for row in ref.tolist():
            f.write(json.dumps({"embedding": [float(f"{x:.9g}") for x in row]}) + "\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures"))
    args = ap.parse_args()
    tokenizer_dir = os.path.join(args.out, "tokenizers", "bert_uncased")
    for name, (mode, normalize) in VARIANTS.items():
        build(args.out, name, mode, normalize, tokenizer_dir)
        print(f"wrote {name}")


if __name__ == "__main__":
    main()
