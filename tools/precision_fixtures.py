"""Reference for brigade's --precision modes: 20 training steps of tiny GPT-2, BERT, ViT and T5
models in PyTorch/transformers, in each of 32.32, 16.32, 16.16, bf16.32 and bf16.16.

Writes one folder per model under --out (default tests/fixtures), precision_<model>:
  config.json, model.safetensors   the initial float32 model (save_pretrained, dropout 0)
  data.safetensors                 the dataset as brigade train --data reads it:
                                     gpt2  GPT2LMHeadModel: input_ids, attention_mask [rows, T]
                                           (labels: the ids where the mask is 1, as brigade derives)
                                     bert  BertForMaskedLM: input_ids, attention_mask,
                                           token_type_ids, labels [rows, T] (-100 where unmasked)
                                     vit   ViTForImageClassification: pixel_values [rows, 3, H, W],
                                           labels int [rows]
                                     t5    T5ForConditionalGeneration: input_ids, attention_mask
                                           [rows, T], labels [rows, T'] (decoder inputs: the
                                           labels shifted right)
  expected.safetensors             loss.<mode> [steps] for every mode: each step's loss, the mean
                                   over the step's global batch (cross-entropy summed over it and
                                   divided by its counted labels; the mean over images for ViT),
                                   and loss.32.32-sgd: float32 with the .16 modes' optimizer (the
                                   baseline those modes are measured against)

Every run is what brigade's trainer does with --no-shuffle: step s reads rows
[s*G, (s+1)*G) modulo the dataset's rows (rows is a multiple of G), constant learning rate,
gradients clipped to a global norm of 1 (clip_grad_norm_), weight decay 0.

  .32 modes  torch.autocast("cpu", dtype=float16 / bfloat16) around forward and loss on the float32
             model (products in the half type, fp32 master weights), AdamW (torch.optim) at
             ADAMW_LR, logits cast to float32 before the loss.
  .16 modes  the model cast to float16 / bfloat16 (its float inputs, pixel_values, too), logits
             cast to float32 before the loss, the optimizer on the half parameters. AdamW's eps of
             1e-8 is 0 in float16 (its update divides by sqrt(v) alone and blows up), so these
             modes train with SGD, momentum SGD_MOMENTUM, at SGD_LR[model].
  fp16 modes (16.32, 16.16): a static loss scale of LOSS_SCALE: the loss is multiplied by it
             before backward and the gradients divided by it before clipping and the step
             (brigade: loss_scaling = LOSS_SCALE).

--seed S draws other models and data (the committed folders use seed 0); `make parity` writes
a fresh set in a scratch folder and runs test_precision_parity on it. The script prints, per
model and mode, the largest relative distance of the mode's losses from float32 with the same
optimizer. --emulate also prints how far autocast's .32 losses are from products that only round
their operands (everything else, products' outputs included, in float32), as brigade computes.

Usage: python tools/precision_fixtures.py [--out DIR] [--seed S] [--emulate]
"""

import argparse
import copy
import json
import os

import torch
import transformers
from safetensors.torch import save_file

from fixture_common import drop_generation_config, sort_metadata_keys, version_metadata

MODES = ("32.32", "16.32", "16.16", "bf16.32", "bf16.16")
HALF_TYPES = {"16": torch.float16, "bf16": torch.bfloat16}
STEPS = 20
ROWS = {"gpt2": 16, "bert": 16, "vit": 48, "t5": 16}  # ViT memorises fewer images within 20 steps
GLOBAL_BATCH = 8
MAX_GRAD_NORM = 1.0
ADAMW_LR = 3e-3
SGD_LR = {"gpt2": 0.05, "bert": 0.05, "vit": 0.1, "t5": 0.1}
SGD_MOMENTUM = 0.9
LOSS_SCALE = 1024.0
MODELS = ("gpt2", "bert", "vit", "t5")
MODEL_SEEDS = {"gpt2": 101, "bert": 202, "vit": 303, "t5": 404}


def settings():
    return {"steps": STEPS, "rows": ROWS, "global_batch": GLOBAL_BATCH, "max_grad_norm": MAX_GRAD_NORM,
            "adamw_lr": ADAMW_LR, "sgd_lr": SGD_LR, "sgd_momentum": SGD_MOMENTUM, "loss_scale": LOSS_SCALE,
            "weight_decay": 0.0, "lr_schedule": "constant", "shuffle": False}


# ---- models and data ----

def make_gpt2():
    config = transformers.GPT2Config(
        n_layer=2, n_embd=16, n_head=2, vocab_size=48, n_positions=12, activation_function="gelu_new",
        embd_pdrop=0.0, attn_pdrop=0.0, resid_pdrop=0.0, initializer_range=0.2, bos_token_id=47,
        eos_token_id=47, attn_implementation="eager")
    return transformers.GPT2LMHeadModel(config)


def make_bert():
    config = transformers.BertConfig(
        vocab_size=48, hidden_size=16, num_hidden_layers=2, num_attention_heads=2, intermediate_size=32,
        hidden_act="gelu", max_position_embeddings=12, type_vocab_size=2, initializer_range=0.2,
        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, pad_token_id=0, attn_implementation="eager")
    return transformers.BertForMaskedLM(config)


def make_vit():
    config = transformers.ViTConfig(
        hidden_size=16, num_hidden_layers=2, num_attention_heads=2, intermediate_size=32, hidden_act="gelu",
        image_size=8, patch_size=4, num_channels=3, num_labels=4, initializer_range=0.2,
        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, attn_implementation="eager")
    return transformers.ViTForImageClassification(config)


def make_t5():
    config = transformers.T5Config(
        vocab_size=40, d_model=16, d_kv=4, d_ff=24, num_layers=2, num_decoder_layers=2, num_heads=4,
        relative_attention_num_buckets=8, relative_attention_max_distance=16, feed_forward_proj="gated-gelu",
        dropout_rate=0.0, initializer_factor=0.3, tie_word_embeddings=False, pad_token_id=0, eos_token_id=1, decoder_start_token_id=0,
        attn_implementation="eager")
    return transformers.T5ForConditionalGeneration(config)


def padded_mask(rows, seq):
    """1 on the first seq - (r % 3) positions of row r (right padding of 0-2 positions)."""
    mask = torch.ones(rows, seq, dtype=torch.int64)
    for r in range(rows):
        if r % 3:
            mask[r, seq - r % 3:] = 0
    return mask


def data_gpt2(gen, model, rows):
    ids = torch.randint(0, model.config.vocab_size, (rows, 10), generator=gen)
    return {"input_ids": ids, "attention_mask": padded_mask(rows, 10)}


def data_bert(gen, model, rows):
    seq, vocab = 10, model.config.vocab_size
    ids = torch.randint(1, vocab, (rows, seq), generator=gen)
    mask = padded_mask(rows, seq)
    ids[mask == 0] = 0
    types = torch.zeros(rows, seq, dtype=torch.int64)
    types[:, seq // 2:] = 1
    chosen = (torch.rand(rows, seq, generator=gen) < 0.3) & (mask == 1)
    chosen[:, 1] = True  # every row has a label
    labels = torch.where(chosen, ids, torch.full_like(ids, -100))
    masked = ids.clone()
    masked[chosen] = vocab - 1  # the [MASK] token's id
    return {"input_ids": masked, "attention_mask": mask, "token_type_ids": types, "labels": labels}


def data_vit(gen, model, rows):
    c = model.config
    pixels = torch.randn(rows, c.num_channels, c.image_size, c.image_size, generator=gen)
    labels = torch.randint(0, c.num_labels, (rows,), generator=gen)
    return {"pixel_values": pixels, "labels": labels}


def data_t5(gen, model, rows):
    vocab = model.config.vocab_size
    ids = torch.randint(2, vocab, (rows, 9), generator=gen)
    mask = padded_mask(rows, 9)
    ids[mask == 0] = 0
    labels = torch.randint(2, vocab, (rows, 6), generator=gen)
    labels[:, -1] = 1  # eos
    for r in range(rows):
        if r % 2:
            labels[r, -1 - r % 3:] = -100  # shorter targets
    return {"input_ids": ids, "attention_mask": mask, "labels": labels}


MAKERS = {"gpt2": (make_gpt2, data_gpt2), "bert": (make_bert, data_bert), "vit": (make_vit, data_vit),
          "t5": (make_t5, data_t5)}


# ---- losses (float32, mean over the global batch) ----

def token_mean(logits, labels):
    return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), labels.reshape(-1),
                                             ignore_index=-100, reduction="sum") / (labels != -100).sum()


def loss_of(name, model, batch):
    if name == "gpt2":
        logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
        labels = batch["input_ids"].masked_fill(batch["attention_mask"] == 0, -100)
        return token_mean(logits[:, :-1], labels[:, 1:])
    if name == "bert":
        inputs = {k: v for k, v in batch.items() if k != "labels"}
        return token_mean(model(**inputs).logits, batch["labels"])
    if name == "vit":
        logits = model(pixel_values=batch["pixel_values"]).logits
        return torch.nn.functional.cross_entropy(logits.float(), batch["labels"])
    decoder_ids = model._shift_right(batch["labels"])
    logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                   decoder_input_ids=decoder_ids).logits
    return token_mean(logits, batch["labels"])


# ---- training ----

def step_batch(data, step, dtype):
    count = next(iter(data.values())).shape[0]
    rows = [(step * GLOBAL_BATCH + j) % count for j in range(GLOBAL_BATCH)]
    return {k: (v[rows].to(dtype) if v.is_floating_point() else v[rows]) for k, v in data.items()}


class RoundedProducts(torch.overrides.TorchFunctionMode):
    """Matrix products read float32 operands rounded to `dtype` and compute in float32."""

    PRODUCTS = {torch.nn.functional.linear, torch.matmul, torch.Tensor.matmul, torch.Tensor.__matmul__,
                torch.addmm, torch.bmm, torch.baddbmm, torch.mm}

    def __init__(self, dtype):
        super().__init__()
        self.dtype = dtype

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in self.PRODUCTS:
            args = [a.to(self.dtype).float() if isinstance(a, torch.Tensor) and a.is_floating_point() else a
                    for a in args]
        return func(*args, **kwargs)


def optimizer_for(name, model, master):
    if master == "16":
        return torch.optim.SGD(model.parameters(), lr=SGD_LR[name], momentum=SGD_MOMENTUM)
    return torch.optim.AdamW(model.parameters(), lr=ADAMW_LR, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0)


def train(name, initial, data, mode, emulate=False):
    """The per-step losses of STEPS steps in `mode` from a copy of `initial`. Mode "32.32-sgd" is
    float32 with the .16 modes' optimizer; emulate: .32 products through RoundedProducts instead
    of autocast."""
    compute, master = mode.split(".")
    sgd = master == "32-sgd"
    master = "16" if sgd else master
    half = HALF_TYPES.get(compute)
    model = copy.deepcopy(initial)
    if master == "16" and half is not None:
        model = model.to(half)
    opt = optimizer_for(name, model, master)
    scale = LOSS_SCALE if compute == "16" else 1.0
    input_type = half if master == "16" and half is not None else torch.float32
    autocast = master == "32" and half is not None
    losses = []
    for step in range(STEPS):
        batch = step_batch(data, step, input_type)
        if emulate and autocast:
            with RoundedProducts(half):
                loss = loss_of(name, model, batch)
        else:
            with torch.autocast("cpu", dtype=half or torch.bfloat16, enabled=autocast):
                loss = loss_of(name, model, batch)
        opt.zero_grad(set_to_none=True)
        (loss * scale).backward()
        if scale != 1.0:
            for p in model.parameters():
                p.grad.div_(scale)
        torch.nn.utils.clip_grad_norm_(model.parameters(), MAX_GRAD_NORM)
        opt.step()
        losses.append(loss.item())
    return losses


def write_fixture(name, root, seed, emulate):
    make_model, make_data = MAKERS[name]
    torch.manual_seed(MODEL_SEEDS[name] + 1000 * seed)
    model = make_model().to(torch.float32).eval()  # dropout is 0; eval keeps it so regardless
    gen = torch.Generator().manual_seed(MODEL_SEEDS[name] + 1000 * seed + 1)
    data = make_data(gen, model, ROWS[name])
    out = os.path.join(root, f"precision_{name}")
    os.makedirs(out, exist_ok=True)
    model.save_pretrained(out)
    drop_generation_config(out)
    save_file({k: v.contiguous() for k, v in data.items()}, os.path.join(out, "data.safetensors"))
    losses = {mode: train(name, model, data, mode) for mode in MODES + ("32.32-sgd",)}
    expected = {f"loss.{mode}": torch.tensor(v, dtype=torch.float32) for mode, v in losses.items()}
    if emulate:
        for mode in ("16.32", "bf16.32"):
            losses[f"{mode} rounded operands"] = train(name, model, data, mode, emulate=True)
    path = os.path.join(out, "expected.safetensors")
    save_file(expected, path, metadata={**version_metadata(), "settings": json.dumps(settings(), sort_keys=True),
                                        "seed": str(seed)})
    sort_metadata_keys(path)
    return out, losses


def max_rel_distance(a, b):
    a, b = torch.tensor(a, dtype=torch.float64), torch.tensor(b, dtype=torch.float64)
    return ((a - b).abs() / b.abs()).max().item()


def describe(name, out, losses):
    lines = [f"{out}:"]
    for mode, v in losses.items():
        base = mode.split(" ")[0] if " " in mode else "32.32-sgd" if mode.endswith(".16") else "32.32"
        against = f"autocast {base}" if " " in mode else base
        rel = max_rel_distance(v, losses[base]) if mode != base else 0.0
        lines.append(f"  {name} {mode:25s} loss {v[0]:.4f} -> {v[-1]:.4f}, max rel distance from {against} {rel:.2e}")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="tests/fixtures", help="root folder (precision_<model> folders go under it)")
    ap.add_argument("--seed", type=int, default=0, help="draws other models and data (committed: 0)")
    ap.add_argument("--emulate", action="store_true",
                    help="also print autocast's distance from products that only round their operands")
    args = ap.parse_args()
    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    torch.set_num_threads(1)
    for name in MODELS:
        out, losses = write_fixture(name, args.out, args.seed, args.emulate)
        print(describe(name, out, losses))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
