"""Reference for brigade's trainer: 10 AdamW steps of a tiny GPT-2 in PyTorch/transformers.

Writes one folder (default tests/fixtures/train_gpt2):
  config.json, model.safetensors   the initial model (GPT2LMHeadModel.save_pretrained, dropout 0)
  data.safetensors                 the dataset: input_ids, attention_mask, labels [rows, T]
  expected.safetensors             loss [steps] (mean over each step's global batch), lr [steps],
                                   and final.<name> for every tensor of model.safetensors

The run is what `brigade train --no-shuffle` does with the same settings: step s reads rows
[s*G, (s+1)*G) (wrapping over the dataset), the loss is the causal-LM cross-entropy summed over
the global batch and divided by its number of counted labels (transformers' num_items_in_batch),
AdamW (torch.optim) with weight decay on every parameter but biases and LayerNorm weights (the
Trainer's grouping), a linear schedule with warm-up (get_linear_schedule_with_warmup), and
gradient clipping by the global norm (clip_grad_norm_).

Usage: python tools/train_fixtures.py [--out DIR]
"""

import argparse
import json
import os

import torch
from safetensors.torch import save_file
from transformers import GPT2Config, GPT2LMHeadModel, get_linear_schedule_with_warmup

SETTINGS = {
    "steps": 10, "rows": 24, "seq": 10, "global_batch": 8, "lr": 5e-4, "weight_decay": 0.01,
    "warmup_steps": 2, "max_grad_norm": 1.0, "seed": 11,
}


def make_model(seed):
    torch.manual_seed(seed)
    config = GPT2Config(n_layer=2, n_embd=32, n_head=4, vocab_size=61, n_positions=16,
                        activation_function="gelu_new", embd_pdrop=0.0, attn_pdrop=0.0, resid_pdrop=0.0,
                        initializer_range=0.1, bos_token_id=60, eos_token_id=60)
    model = GPT2LMHeadModel(config)
    model.eval()  # dropout is 0 anyway; eval keeps it so regardless of defaults
    return model


def make_data(seed, rows, seq, vocab):
    gen = torch.Generator().manual_seed(seed + 1)
    ids = torch.randint(0, vocab, (rows, seq), generator=gen)
    mask = torch.ones(rows, seq, dtype=torch.int64)
    for r in range(rows):
        pad = r % 3  # right padding of 0-2 positions
        if pad:
            mask[r, seq - pad:] = 0
    labels = ids.clone()
    labels[mask == 0] = -100
    return ids, mask, labels


def step_loss(model, ids, mask, labels):
    logits = model(input_ids=ids, attention_mask=mask).logits
    shift_logits = logits[:, :-1, :].reshape(-1, logits.shape[-1])
    shift_labels = labels[:, 1:].reshape(-1)
    total = torch.nn.functional.cross_entropy(shift_logits, shift_labels, ignore_index=-100, reduction="sum")
    return total / (shift_labels != -100).sum()


def param_groups(model, weight_decay):
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        is_ln = ".ln_" in name or name.startswith("transformer.ln_f")
        (no_decay if name.endswith("bias") or is_ln else decay).append(p)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]


def train(model, ids, mask, labels, s):
    opt = torch.optim.AdamW(param_groups(model, s["weight_decay"]), lr=s["lr"], betas=(0.9, 0.999), eps=1e-8)
    sched = get_linear_schedule_with_warmup(opt, s["warmup_steps"], s["steps"])
    losses, lrs, g = [], [], s["global_batch"]
    for step in range(s["steps"]):
        rows = [(step * g + j) % ids.shape[0] for j in range(g)]
        lrs.append(sched.get_last_lr()[0])
        loss = step_loss(model, ids[rows], mask[rows], labels[rows])
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), s["max_grad_norm"])
        opt.step()
        sched.step()
        losses.append(loss.item())
    return losses, lrs


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="tests/fixtures/train_gpt2")
    args = ap.parse_args()
    torch.set_num_threads(1)
    s = SETTINGS
    model = make_model(s["seed"])
    os.makedirs(args.out, exist_ok=True)
    model.save_pretrained(args.out)
    gen_cfg = os.path.join(args.out, "generation_config.json")
    if os.path.exists(gen_cfg):
        os.remove(gen_cfg)
    ids, mask, labels = make_data(s["seed"], s["rows"], s["seq"], model.config.vocab_size)
    save_file({"input_ids": ids, "attention_mask": mask, "labels": labels}, os.path.join(args.out, "data.safetensors"))
    losses, lrs = train(model, ids, mask, labels, s)
    expected = {"loss": torch.tensor(losses, dtype=torch.float32), "lr": torch.tensor(lrs, dtype=torch.float32)}
    for name, t in model.state_dict().items():
        if name == "lm_head.weight" and model.config.tie_word_embeddings:
            continue
        expected["final." + name] = t.detach().clone().contiguous()
    save_file(expected, os.path.join(args.out, "expected.safetensors"), metadata={"settings": json.dumps(s)})
    print("losses:", " ".join(f"{x:.6f}" for x in losses))


if __name__ == "__main__":
    main()
