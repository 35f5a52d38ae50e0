"""Reference fixtures for brigade's GPT-2: random-init transformers models, their outputs and gradients.

Each fixture is one folder:
  config.json, model.safetensors   written by GPT2LMHeadModel.save_pretrained (tied lm_head not stored)
  expected.safetensors             input_ids, [attention_mask], labels, logits, loss, grad.<name>

`grad.<name>` exists for every tensor in model.safetensors: the gradient of the mean causal-LM loss
(what transformers returns for `labels`) computed by autograd in float32, eval mode (dropout off),
eager attention. For a tied model `grad.transformer.wte.weight` is the sum over both uses
(input embedding and LM head).

Weights are initialized by transformers with a large initializer_range and then every parameter,
LayerNorm weights and biases included, is perturbed with random noise so every gradient path is
exercised. The *_pdrop values keep their defaults in config.json.

Kinds (FixtureSpec.kind): "lm" (GPT2LMHeadModel, above); "base" (GPT2Model: output
last_hidden_state; having no loss, its "loss" is sum(last_hidden_state * cotangent.last_hidden_state)
with the random cotangent stored next to the inputs); "seqcls" (GPT2ForSequenceClassification:
labels int [B] or, with num_labels 1, float [B]; the logits are read at the last token that is not
pad_token_id; rows are padded on the right, one on the left, and a pad id also sits inside a row;
without pad_token_id the batch is one row); "token" (GPT2ForTokenClassification: labels int [B, T],
-100 at padding).

Usage:
  python tools/gpt2_fixtures.py --out tests/fixtures                   # the committed set
  python tools/gpt2_fixtures.py --random 3 --seed S --out DIR          # DIR/random_0 .. random_2
  python tools/gpt2_fixtures.py --verify DIR [DIR ...]                 # recompute and check
"""

import dataclasses
import json
import os
import random
import sys

import torch
import transformers
from transformers import GPT2Config, GPT2LMHeadModel
from fixture_common import (perturb_parameters, run_cli, check_probes, saved_tensor_names,
                            drop_generation_config, forward_backward, save_expected, load_checked,
                            recompute_problems, central_difference)

ACTIVATIONS = ("gelu_new", "gelu", "gelu_pytorch_tanh")
PERTURB_STD = 0.1


@dataclasses.dataclass
class FixtureSpec:
    """One fixture: model hyper-parameters, batch shape, padding, and seed."""

    name: str
    seed: int
    n_layer: int
    n_embd: int
    n_head: int
    vocab_size: int
    n_positions: int
    activation_function: str
    batch: int
    seq: int
    use_mask: bool
    tie_word_embeddings: bool = True
    layer_norm_epsilon: float = 1e-5
    initializer_range: float = 0.15
    kind: str = "lm"
    num_labels: int = 2
    pad_token_id: object = None


def committed_specs():
    """The small fixtures checked into tests/fixtures (each folder stays around 300 KB or less)."""
    return [
        FixtureSpec(name="gpt2_tiny", seed=1001, n_layer=2, n_embd=32, n_head=4, vocab_size=101,
                    n_positions=16, activation_function="gelu_new", batch=2, seq=8,
                    use_mask=False, initializer_range=0.15),
        FixtureSpec(name="gpt2_mask", seed=1002, n_layer=3, n_embd=30, n_head=3, vocab_size=67,
                    n_positions=24, activation_function="gelu", batch=3, seq=11,
                    use_mask=True, layer_norm_epsilon=1e-5, initializer_range=0.2),
        FixtureSpec(name="gpt2_untied", seed=1003, n_layer=1, n_embd=24, n_head=2, vocab_size=50,
                    n_positions=12, activation_function="gelu_pytorch_tanh", batch=2, seq=12,
                    use_mask=False, tie_word_embeddings=False, initializer_range=0.1),
        FixtureSpec(name="gpt2_base", seed=1004, n_layer=2, n_embd=16, n_head=2, vocab_size=31,
                    n_positions=10, activation_function="gelu_new", batch=2, seq=7, use_mask=True,
                    kind="base"),
        FixtureSpec(name="gpt2_seqcls", seed=1005, n_layer=2, n_embd=16, n_head=4, vocab_size=29,
                    n_positions=12, activation_function="gelu", batch=4, seq=8, use_mask=True,
                    kind="seqcls", num_labels=3, pad_token_id=28),
        FixtureSpec(name="gpt2_seqcls_regression", seed=1006, n_layer=1, n_embd=12, n_head=3, vocab_size=23,
                    n_positions=8, activation_function="gelu_pytorch_tanh", batch=1, seq=6, use_mask=False,
                    kind="seqcls", num_labels=1),
        FixtureSpec(name="gpt2_token", seed=1007, n_layer=2, n_embd=12, n_head=2, vocab_size=27,
                    n_positions=10, activation_function="gelu_new", batch=3, seq=7, use_mask=True,
                    kind="token", num_labels=4),
    ]


def random_spec(rng, name, seed):
    """A random small GPT-2 configuration drawn from `rng`."""
    n_head = rng.randint(1, 4)
    head_dim = rng.randint(4, 16)
    seq = rng.randint(2, 16)
    spec = FixtureSpec(
        name=name,
        seed=seed,
        n_layer=rng.randint(1, 4),
        n_embd=n_head * head_dim,
        n_head=n_head,
        vocab_size=rng.randint(20, 300),
        n_positions=seq + rng.randint(0, 8),
        activation_function=rng.choice(ACTIVATIONS),
        batch=rng.randint(1, 4),
        seq=seq,
        use_mask=rng.random() < 0.5,
        tie_word_embeddings=rng.random() < 0.5,
        layer_norm_epsilon=rng.choice((1e-5, 1e-6)),
        initializer_range=rng.uniform(0.1, 0.2),
    )
    spec.kind = rng.choice(("lm", "lm", "base", "seqcls", "token"))
    if spec.kind == "seqcls":
        spec.num_labels = rng.choice((1, 2, 3))
        spec.pad_token_id = spec.vocab_size - 1 if rng.random() < 0.7 else None
        if spec.pad_token_id is None:
            spec.batch = 1
    elif spec.kind == "token":
        spec.num_labels = rng.randint(2, 5)
    return spec


def random_specs(count, seed):
    """`count` random specs named random_0.. , reproducible from `seed`."""
    rng = random.Random(seed)
    return [random_spec(rng, f"random_{i}", seed * 1000 + i) for i in range(count)]


def make_config(spec):
    """The transformers config for `spec` (eager attention, default dropout probabilities)."""
    last_token = spec.vocab_size - 1
    return GPT2Config(
        n_layer=spec.n_layer,
        n_embd=spec.n_embd,
        n_head=spec.n_head,
        vocab_size=spec.vocab_size,
        n_positions=spec.n_positions,
        activation_function=spec.activation_function,
        layer_norm_epsilon=spec.layer_norm_epsilon,
        initializer_range=spec.initializer_range,
        tie_word_embeddings=spec.tie_word_embeddings,
        bos_token_id=last_token,
        eos_token_id=last_token,
        attn_implementation="eager",
        **({} if spec.kind in ("lm", "base") else {"num_labels": spec.num_labels}),
        **({} if spec.pad_token_id is None else {"pad_token_id": spec.pad_token_id}),
    )


MODEL_CLASSES = {"lm": GPT2LMHeadModel, "base": transformers.GPT2Model,
                 "seqcls": transformers.GPT2ForSequenceClassification,
                 "token": transformers.GPT2ForTokenClassification}


def build_model(spec):
    """A float32 GPT2LMHeadModel, initialized from spec.seed then perturbed, in eval mode."""
    torch.manual_seed(spec.seed)
    model = MODEL_CLASSES[spec.kind](make_config(spec)).to(torch.float32)
    generator = torch.Generator().manual_seed(spec.seed + 1)
    perturb_parameters(model, generator, PERTURB_STD)
    return model.eval()


def row_lengths(spec, generator):
    """Unpadded length of each row: one row full, the others shorter (distinct when possible)."""
    if not spec.use_mask:
        return [spec.seq] * spec.batch
    shorter = list(range(max(1, spec.seq // 3), spec.seq))
    order = torch.randperm(len(shorter), generator=generator).tolist()
    lengths = [spec.seq]
    for i in range(spec.batch - 1):
        lengths.append(shorter[order[i % len(order)]] if shorter else spec.seq)
    perm = torch.randperm(spec.batch, generator=generator).tolist()
    return [lengths[p] for p in perm]


def make_labels(input_ids, valid, generator):
    """input_ids with -100 at padding and at a few random extra positions (keeping >= 2 targets
    where the shape allows)."""
    labels = input_ids.clone()
    labels[~valid] = -100
    candidates = valid.clone()
    candidates[:, 0] = False  # position 0 is never a target after the causal shift
    positions = candidates.nonzero().tolist()
    extra = max(1, len(positions) // 8)
    if len(positions) - extra < 2:
        extra = max(0, len(positions) - 2)
    order = torch.randperm(len(positions), generator=generator).tolist()
    for idx in order[:extra]:
        row, col = positions[idx]
        labels[row, col] = -100
    return labels


def make_inputs(spec, generator):
    """input_ids, labels and (when spec.use_mask) a right-padding attention_mask, all int64."""
    input_ids = torch.randint(0, spec.vocab_size, (spec.batch, spec.seq), generator=generator)
    lengths = row_lengths(spec, generator)
    positions = torch.arange(spec.seq).unsqueeze(0)
    valid = positions < torch.tensor(lengths).unsqueeze(1)
    input_ids[~valid] = spec.vocab_size - 1
    inputs = {"input_ids": input_ids.to(torch.int64)}
    if spec.use_mask:
        inputs["attention_mask"] = valid.to(torch.int64)
    if spec.kind == "lm":
        inputs["labels"] = make_labels(input_ids, valid, generator).to(torch.int64)
    elif spec.kind == "seqcls":
        seqcls_padding(spec, input_ids, inputs, generator)
        if spec.num_labels == 1:
            inputs["labels"] = torch.randn((spec.batch,), generator=generator)
        else:
            inputs["labels"] = torch.randint(0, spec.num_labels, (spec.batch,), generator=generator)
    elif spec.kind == "token":
        labels = torch.randint(0, spec.num_labels, (spec.batch, spec.seq), generator=generator)
        labels[~valid] = -100
        inputs["labels"] = labels
    return inputs


def seqcls_padding(spec, input_ids, inputs, generator):
    """Padding as pad_token_id: right padding from row_lengths, the last row left-padded instead,
    and the pad id inside the first row (the head reads the rightmost non-pad token)."""
    if spec.pad_token_id is None:
        input_ids[input_ids == spec.vocab_size - 1] = 0
        return
    pad = spec.pad_token_id
    input_ids[input_ids == pad] = 0
    valid = inputs["attention_mask"].bool() if "attention_mask" in inputs else torch.ones_like(input_ids).bool()
    input_ids[~valid] = pad
    if spec.batch > 1 and spec.seq > 2:
        row = spec.batch - 1
        length = int(valid[row].sum())
        input_ids[row] = torch.cat([torch.full((spec.seq - length,), pad), input_ids[row, :length]])
        valid[row] = input_ids[row] != pad
        input_ids[0, 1] = pad
        if "attention_mask" in inputs:
            inputs["attention_mask"] = valid.to(torch.int64)


def outputs_and_loss(model, inputs):
    """The forward's named outputs and its loss (a base model's: sum(output * cotangent))."""
    features = {k: v for k, v in inputs.items() if not k.startswith("cotangent.")}
    out = model(**features)
    if hasattr(out, "last_hidden_state"):
        hidden = out.last_hidden_state
        return {"last_hidden_state": hidden}, (hidden * inputs["cotangent.last_hidden_state"].to(hidden.dtype)).sum()
    return {"logits": out.logits}, out.loss


def run_backward(model, inputs, names):
    """outputs, loss and the gradients of `names` (bare or transformer.-prefixed)."""
    model.zero_grad(set_to_none=True)
    outputs, loss = outputs_and_loss(model, inputs)
    loss.backward()
    grads = {}
    for name in names:
        grad = model.get_parameter(name).grad
        if grad is None:
            raise RuntimeError(f"no gradient for {name}")
        grads[name] = grad.detach().clone()
    return {k: v.detach().clone() for k, v in outputs.items()}, loss.detach().clone(), grads


def write_fixture(spec, out_root):
    """Build, save and run one fixture into out_root/spec.name; return the folder path."""
    out_dir = os.path.join(out_root, spec.name)
    model = build_model(spec)
    model.save_pretrained(out_dir)
    drop_generation_config(out_dir)
    inputs = make_inputs(spec, torch.Generator().manual_seed(spec.seed + 2))
    if spec.kind == "lm":
        logits, loss, grads = forward_backward(model, inputs, saved_tensor_names(out_dir))
        save_expected(out_dir, inputs, {"logits": logits}, loss, grads, {"seed": str(spec.seed)})
        return out_dir
    if spec.kind == "base":
        with torch.no_grad():
            shape = model(**inputs).last_hidden_state.shape
        inputs["cotangent.last_hidden_state"] = torch.randn(shape, generator=torch.Generator().manual_seed(spec.seed + 3))
    outputs, loss, grads = run_backward(model, inputs, saved_tensor_names(out_dir))
    save_expected(out_dir, inputs, outputs, loss, grads, {"seed": str(spec.seed), "kind": spec.kind})
    return out_dir


def load_fixture_model(model_dir, dtype):
    """Reload a fixture model with transformers, failing on missing or unexpected tensors."""
    with open(os.path.join(model_dir, "config.json")) as f:
        arch = json.load(f)["architectures"][0]
    return load_checked(getattr(transformers, arch), model_dir, dtype)


def fixture_inputs(expected):
    """The model inputs stored in an expected.safetensors dict."""
    return {k: expected[k] for k in expected
            if k in ("input_ids", "attention_mask", "labels") or k.startswith("cotangent.")}


def check_recompute(model_dir, expected):
    """Recompute in float32 from the saved folder; return a list of problems."""
    model = load_fixture_model(model_dir, torch.float32)
    names = saved_tensor_names(model_dir)
    if "logits" not in expected or expected["logits"].dim() != 3 or "labels" not in expected or \
            not isinstance(model, GPT2LMHeadModel):
        outputs, loss, grads = run_backward(model, fixture_inputs(expected), names)
        return recompute_problems(model_dir, expected, outputs, loss, grads)
    logits, loss, grads = forward_backward(model, fixture_inputs(expected), names)
    problems = recompute_problems(model_dir, expected, {"logits": logits}, loss, grads)
    own = causal_lm_loss(expected["logits"].double(), expected["labels"]).item()
    if abs(own - expected["loss"].item()) > 1e-5:
        problems.append(f"stored loss {expected['loss'].item()} is not the shifted mean CE {own}")
    return problems


def causal_lm_loss(logits, labels):
    """Mean cross-entropy of logits[:, t] against labels[:, t + 1], ignoring -100, in logits' dtype.

    (transformers upcasts to float32 only, which is too coarse for float64 finite differences.)
    """
    vocab = logits.shape[-1]
    shifted = labels[:, 1:].reshape(-1)
    return torch.nn.functional.cross_entropy(
        logits[:, :-1].reshape(-1, vocab), shifted, ignore_index=-100)


def lm_loss(model, inputs):
    """causal_lm_loss of the model's logits for `inputs`, in the model's dtype."""
    features = {k: v for k, v in inputs.items() if k != "labels"}
    return causal_lm_loss(model(**features).logits, inputs["labels"]).item()


def probe_entries(expected, names):
    if "transformer.wte.weight" not in names or "lm_head.weight" not in names and "score.weight" in names \
            or "classifier.weight" in names:
        return head_probe_entries(expected, names)
    """(name, index) pairs to check numerically: embedding rows of a token that is in the input
    and of one that is not (for a tied model, both uses versus the LM head alone), the LM head
    (when untied), a LayerNorm weight and an attention bias."""
    token = int(expected["input_ids"][0, 0])
    vocab = expected["logits"].shape[-1]
    unused = sorted(set(range(vocab)) - set(expected["input_ids"].flatten().tolist()))
    probes = [("transformer.wte.weight", (token, 1))]
    if unused:
        probes.append(("transformer.wte.weight", (unused[0], 3)))
    if "lm_head.weight" in names:
        probes.append(("lm_head.weight", (token, 0)))
    probes.append(("transformer.h.0.ln_1.weight", (2,)))
    probes.append(("transformer.h.0.attn.c_attn.bias", (1,)))
    return probes


def head_probe_entries(expected, names):
    """Probes for the base model and the classification heads: a token's embedding row, a
    LayerNorm weight, and the head's weight."""
    prefix = "transformer." if "transformer.wte.weight" in names else ""
    probes = [(f"{prefix}wte.weight", (int(expected["input_ids"][0, 0]), 1)), (f"{prefix}h.0.ln_1.weight", (2,))]
    for name in ("score.weight", "classifier.weight"):
        if name in names:
            probes.append((name, (0, 1)))
    return probes


def float64_loss(model, inputs):
    """The fixture's loss recomputed in the model's dtype (float64 for finite differences)."""
    if isinstance(model, GPT2LMHeadModel):
        return lm_loss(model, inputs)
    cast = {k: (v.double() if v.is_floating_point() else v) for k, v in inputs.items()}
    return outputs_and_loss(model, cast)[1].item()


def check_finite_differences(model_dir, expected):
    """Compare stored float32 gradients with float64 central differences; return problems."""
    model = load_fixture_model(model_dir, torch.float64)
    inputs = fixture_inputs(expected)
    probes = probe_entries(expected, saved_tensor_names(model_dir))
    return check_probes(expected, probes, lambda name, index: central_difference(
        model.get_parameter(name), index, lambda: float64_loss(model, inputs), 1e-6))


def describe(spec, model_dir):
    """A one-line summary of a written fixture."""
    size = sum(os.path.getsize(os.path.join(model_dir, n)) for n in os.listdir(model_dir))
    return (f"{model_dir}: layers={spec.n_layer} embd={spec.n_embd} heads={spec.n_head} "
            f"vocab={spec.vocab_size} positions={spec.n_positions} "
            f"act={spec.activation_function} tied={spec.tie_word_embeddings} "
            f"B={spec.batch} T={spec.seq} mask={spec.use_mask} kind={spec.kind} labels={spec.num_labels} "
            f"pad={spec.pad_token_id} size={size / 1024:.0f}KiB")


def main(argv=None):
    return run_cli(__doc__.splitlines()[0], argv, committed_specs, random_specs, write_fixture, describe,
                   (check_recompute, check_finite_differences))


if __name__ == "__main__":
    sys.exit(main())
