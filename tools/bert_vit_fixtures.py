"""Reference fixtures for brigade's BERT and ViT: random-init transformers models, outputs and gradients.

Each fixture is one folder:
  config.json, model.safetensors   written by save_pretrained (tied weights stored once)
  expected.safetensors             the inputs by transformers' keyword names, the outputs, loss and
                                   grad.<name> for every tensor in model.safetensors

Kinds (the committed folder of each):
  bert_mlm         BertForMaskedLM: input_ids, attention_mask, token_type_ids, labels [B, T] (-100 mostly)
  bert_cls         BertForSequenceClassification, single-label: labels int [B]
  bert_regression  BertForSequenceClassification, num_labels 1: labels float [B]
  bert_multilabel  BertForSequenceClassification, multi-label: labels float [B, num_labels] of 0/1
  bert_qa          BertForQuestionAnswering: start_positions, end_positions [B] (one out of range);
                   outputs start_logits and end_logits instead of logits
  bert_base        BertModel (with its pooler): outputs last_hidden_state and pooler_output; having
                   no loss, its "loss" is sum(output * cotangent.<output>) over both outputs, with
                   the random cotangents stored as cotangent.last_hidden_state / .pooler_output
  bert_base_nopool BertModel(add_pooling_layer=False): last_hidden_state only, the same "loss"
  bert_token       BertForTokenClassification: labels int [B, T], -100 at padding and a few others
  bert_choice      BertForMultipleChoice: input_ids, attention_mask, token_type_ids [B, num_choices, T]
                   (num_choices = num_labels here), labels int [B]
  bert_pretraining BertForPreTraining: labels [B, T] as bert_mlm and next_sentence_label int [B];
                   outputs prediction_logits and seq_relationship_logits
  vit_cls          ViTForImageClassification: pixel_values [B, 3, H, W], labels int [B]
  vit_regression   ViTForImageClassification, num_labels 1, qkv_bias false, image_size [h, w]
  vit_base         ViTModel (with its pooler, pooler_output_size != hidden_size): outputs
                   last_hidden_state and pooler_output, the same "loss" as bert_base

Gradients are of the loss transformers returns, computed by autograd in float32, eval mode
(dropout off), eager attention. For the tied masked-LM decoder the word-embedding gradient is the sum
of both uses; the padding row (pad_token_id) gets no gradient from the input lookup, as
nn.Embedding(padding_idx) does. A parameter the loss never reaches (the untied masked-LM head's
cls.predictions.bias) has a zero gradient. Weights are initialised by transformers with a large
initializer_range and then every parameter is perturbed with noise so that every gradient path
(LayerNorm weights and biases included) is exercised.

Usage:
  python tools/bert_vit_fixtures.py --out tests/fixtures                  # the committed set
  python tools/bert_vit_fixtures.py --random 4 --seed S --out DIR         # DIR/random_<i>_<kind>
  python tools/bert_vit_fixtures.py --verify DIR [DIR ...]                # recompute and check
"""

import dataclasses
import json
import os
import random
import sys

import torch
import transformers
from safetensors.torch import load_file
from fixture_common import (run_cli, check_probes, save_expected, load_checked, recompute_problems,
                            central_difference, saved_tensor_names)

PERTURB_STD = 0.1
BERT_KINDS = ("bert_mlm", "bert_cls", "bert_regression", "bert_multilabel", "bert_qa", "bert_base",
              "bert_base_nopool", "bert_token", "bert_choice", "bert_pretraining")
BASE_KINDS = ("bert_base", "bert_base_nopool", "vit_base")
VIT_KINDS = ("vit_cls", "vit_regression", "vit_base")
ACTIVATIONS = ("gelu", "gelu_new", "gelu_pytorch_tanh")


@dataclasses.dataclass
class FixtureSpec:
    """One fixture: which head, model hyper-parameters, batch shape and seed."""

    name: str
    kind: str
    seed: int
    layers: int
    hidden: int
    heads: int
    intermediate: int
    batch: int
    hidden_act: str = "gelu"
    initializer_range: float = 0.15
    layer_norm_eps: float = 1e-12
    num_labels: int = 2
    # BERT
    vocab_size: int = 0
    max_positions: int = 0
    type_vocab_size: int = 2
    seq: int = 0
    use_mask: bool = True
    tie_word_embeddings: bool = True
    # ViT
    image_size: object = 8
    patch_size: int = 4
    num_channels: int = 3
    qkv_bias: bool = True
    pooler_output_size: int = 0  # ViTModel; 0: hidden_size
    pooler_act: str = "tanh"


def committed_specs():
    """The small fixtures checked into tests/fixtures (each folder well under 300 KB)."""
    return [
        FixtureSpec(name="bert_mlm", kind="bert_mlm", seed=2001, layers=2, hidden=32, heads=4, intermediate=48,
                    batch=2, vocab_size=97, max_positions=16, seq=9, hidden_act="gelu"),
        FixtureSpec(name="bert_cls", kind="bert_cls", seed=2002, layers=2, hidden=24, heads=3, intermediate=40,
                    batch=3, vocab_size=61, max_positions=12, type_vocab_size=3, seq=7, num_labels=3,
                    hidden_act="gelu_new"),
        FixtureSpec(name="bert_regression", kind="bert_regression", seed=2003, layers=1, hidden=24, heads=2,
                    intermediate=32, batch=4, vocab_size=53, max_positions=10, seq=6, num_labels=1),
        FixtureSpec(name="bert_multilabel", kind="bert_multilabel", seed=2004, layers=1, hidden=16, heads=2,
                    intermediate=24, batch=3, vocab_size=41, max_positions=10, seq=8, num_labels=4,
                    hidden_act="gelu_pytorch_tanh"),
        FixtureSpec(name="bert_qa", kind="bert_qa", seed=2005, layers=2, hidden=24, heads=4, intermediate=36,
                    batch=3, vocab_size=59, max_positions=14, seq=10),
        FixtureSpec(name="bert_base", kind="bert_base", seed=2008, layers=2, hidden=16, heads=2, intermediate=24,
                    batch=3, vocab_size=37, max_positions=10, seq=7, hidden_act="gelu"),
        FixtureSpec(name="bert_base_nopool", kind="bert_base_nopool", seed=2009, layers=1, hidden=12, heads=3,
                    intermediate=20, batch=2, vocab_size=29, max_positions=8, seq=6, type_vocab_size=1,
                    use_mask=False, hidden_act="gelu_new"),
        FixtureSpec(name="bert_token", kind="bert_token", seed=2010, layers=2, hidden=16, heads=4, intermediate=24,
                    batch=3, vocab_size=41, max_positions=12, seq=8, num_labels=5, hidden_act="gelu_pytorch_tanh"),
        FixtureSpec(name="bert_choice", kind="bert_choice", seed=2011, layers=1, hidden=16, heads=2, intermediate=20,
                    batch=2, vocab_size=31, max_positions=10, seq=6, num_labels=3, hidden_act="gelu"),
        FixtureSpec(name="bert_pretraining", kind="bert_pretraining", seed=2012, layers=1, hidden=16, heads=2,
                    intermediate=24, batch=3, vocab_size=43, max_positions=10, seq=7, hidden_act="gelu_new"),
        FixtureSpec(name="vit_cls", kind="vit_cls", seed=2006, layers=2, hidden=24, heads=3, intermediate=40,
                    batch=3, image_size=8, patch_size=4, num_labels=5),
        FixtureSpec(name="vit_regression", kind="vit_regression", seed=2007, layers=1, hidden=16, heads=2,
                    intermediate=24, batch=2, image_size=[8, 12], patch_size=4, num_labels=1, qkv_bias=False,
                    num_channels=2, hidden_act="gelu_new"),
        FixtureSpec(name="vit_base", kind="vit_base", seed=2013, layers=2, hidden=16, heads=2, intermediate=24,
                    batch=4, image_size=[8, 12], patch_size=4, hidden_act="gelu_pytorch_tanh",
                    pooler_output_size=12),
    ]


def random_spec(rng, name, seed):
    """A random small configuration of a random kind drawn from `rng`."""
    kind = rng.choice(BERT_KINDS + VIT_KINDS)
    heads = rng.randint(1, 4)
    spec = FixtureSpec(name=f"{name}_{kind}", kind=kind, seed=seed, layers=rng.randint(1, 3),
                       hidden=heads * rng.randint(4, 10), heads=heads, intermediate=rng.randint(8, 48),
                       batch=rng.randint(1, 4), hidden_act=rng.choice(ACTIVATIONS),
                       initializer_range=rng.uniform(0.1, 0.2), layer_norm_eps=rng.choice((1e-12, 1e-5)))
    if kind.startswith("bert"):
        spec.seq = rng.randint(2, 12)
        spec.vocab_size = rng.randint(20, 120)
        spec.max_positions = spec.seq + rng.randint(0, 6)
        spec.type_vocab_size = rng.randint(1, 3)
        spec.use_mask = rng.random() < 0.7
        spec.tie_word_embeddings = rng.random() < 0.7
        spec.num_labels = {"bert_cls": rng.randint(2, 5), "bert_regression": 1,
                           "bert_multilabel": rng.randint(2, 5), "bert_qa": 2, "bert_mlm": 2,
                           "bert_base": 2, "bert_base_nopool": 2, "bert_token": rng.randint(2, 5),
                           "bert_choice": rng.randint(2, 4), "bert_pretraining": 2}[kind]
    else:
        spec.patch_size = rng.randint(2, 4)
        spec.image_size = [spec.patch_size * rng.randint(1, 3) + rng.randint(0, 1),
                           spec.patch_size * rng.randint(1, 3)]
        spec.num_channels = rng.randint(1, 3)
        spec.qkv_bias = rng.random() < 0.5
        spec.num_labels = 1 if kind == "vit_regression" else rng.randint(2, 5)
        if kind == "vit_base":
            spec.pooler_output_size = rng.choice((0, rng.randint(4, 20)))
            spec.pooler_act = rng.choice(("tanh", "relu", "gelu", "gelu_new"))
    return spec


def random_specs(count, seed):
    """`count` random specs named random_<i>_<kind>, reproducible from `seed`."""
    rng = random.Random(seed)
    return [random_spec(rng, f"random_{i}", seed * 1000 + i) for i in range(count)]


def make_model(spec):
    """A float32 transformers model for `spec` (eager attention)."""
    if spec.kind.startswith("bert"):
        problem = {"bert_regression": "regression", "bert_multilabel": "multi_label_classification"}.get(spec.kind)
        config = transformers.BertConfig(
            vocab_size=spec.vocab_size, hidden_size=spec.hidden, num_hidden_layers=spec.layers,
            num_attention_heads=spec.heads, intermediate_size=spec.intermediate, hidden_act=spec.hidden_act,
            max_position_embeddings=spec.max_positions, type_vocab_size=spec.type_vocab_size,
            initializer_range=spec.initializer_range, layer_norm_eps=spec.layer_norm_eps,
            tie_word_embeddings=spec.tie_word_embeddings, num_labels=spec.num_labels, problem_type=problem,
            pad_token_id=0, attn_implementation="eager")
        if spec.kind in BASE_KINDS:
            return transformers.BertModel(config, add_pooling_layer=spec.kind == "bert_base").to(torch.float32)
        cls = {"bert_mlm": transformers.BertForMaskedLM, "bert_qa": transformers.BertForQuestionAnswering,
               "bert_token": transformers.BertForTokenClassification,
               "bert_choice": transformers.BertForMultipleChoice,
               "bert_pretraining": transformers.BertForPreTraining}.get(
            spec.kind, transformers.BertForSequenceClassification)
    else:
        config = transformers.ViTConfig(
            hidden_size=spec.hidden, num_hidden_layers=spec.layers, num_attention_heads=spec.heads,
            intermediate_size=spec.intermediate, hidden_act=spec.hidden_act, image_size=spec.image_size,
            patch_size=spec.patch_size, num_channels=spec.num_channels, qkv_bias=spec.qkv_bias,
            initializer_range=spec.initializer_range, layer_norm_eps=spec.layer_norm_eps,
            num_labels=spec.num_labels, pooler_output_size=spec.pooler_output_size or None,
            pooler_act=spec.pooler_act, attn_implementation="eager")
        cls = transformers.ViTModel if spec.kind == "vit_base" else transformers.ViTForImageClassification
    return cls(config).to(torch.float32)


def build_model(spec):
    """The model initialised from spec.seed, every parameter perturbed, in eval mode."""
    torch.manual_seed(spec.seed)
    model = make_model(spec)
    generator = torch.Generator().manual_seed(spec.seed + 1)
    with torch.no_grad():
        for param in model.parameters():
            param.add_(torch.randn(param.shape, generator=generator, dtype=param.dtype) * PERTURB_STD)
    return model.eval()


def bert_text_inputs(spec, generator):
    """input_ids (padding = pad token 0 at the end of shorter rows), attention_mask, token_type_ids."""
    ids = torch.randint(1, spec.vocab_size, (spec.batch, spec.seq), generator=generator)
    lengths = [spec.seq] + [int(torch.randint(max(1, spec.seq // 2), spec.seq + 1, (1,), generator=generator))
                            for _ in range(spec.batch - 1)]
    valid = torch.arange(spec.seq).unsqueeze(0) < torch.tensor(lengths).unsqueeze(1)
    if not spec.use_mask:
        valid[:] = True
    ids[~valid] = 0
    if spec.seq > 2:
        ids[0, 1] = 0  # the pad token inside a sequence still gets no embedding gradient
    types = torch.zeros_like(ids)
    for row, length in enumerate(lengths):
        types[row, length // 2:] = torch.randint(0, spec.type_vocab_size, (1,), generator=generator).item()
    inputs = {"input_ids": ids, "token_type_ids": types}
    if spec.use_mask:
        inputs["attention_mask"] = valid.to(torch.int64)
    return inputs, valid


def mlm_labels(ids, valid, generator):
    """-100 except at roughly a third of the unpadded positions (at least two)."""
    labels = torch.full_like(ids, -100)
    positions = valid.nonzero().tolist()
    order = torch.randperm(len(positions), generator=generator).tolist()
    for idx in order[:max(2, len(positions) // 3)]:
        row, col = positions[idx]
        labels[row, col] = ids[row, col]
    return labels


def qa_positions(spec, generator):
    """Start/end positions with one start past the sequence (ignored) and one negative end
    (clamped to 0), as transformers handles them."""
    start = torch.randint(0, spec.seq, (spec.batch,), generator=generator)
    end = torch.randint(0, spec.seq, (spec.batch,), generator=generator)
    if spec.batch > 1:
        start[-1] = spec.seq + 2
        end[0] = -1
    return start, end


def make_inputs(spec, generator):
    """The forward's keyword arguments for the fixture (all integer tensors int64)."""
    if spec.kind.startswith("vit"):
        size = spec.image_size if isinstance(spec.image_size, list) else [spec.image_size] * 2
        pixels = torch.randn((spec.batch, spec.num_channels, *size), generator=generator)
        if spec.kind == "vit_base":
            return {"pixel_values": pixels}
        if spec.kind == "vit_regression":
            labels = torch.randn((spec.batch,), generator=generator)
        else:
            labels = torch.randint(0, spec.num_labels, (spec.batch,), generator=generator)
        return {"pixel_values": pixels, "labels": labels}
    if spec.kind == "bert_choice":
        return choice_inputs(spec, generator)
    inputs, valid = bert_text_inputs(spec, generator)
    if spec.kind in ("bert_mlm", "bert_pretraining"):
        inputs["labels"] = mlm_labels(inputs["input_ids"], valid, generator)
    if spec.kind == "bert_pretraining":
        inputs["next_sentence_label"] = torch.randint(0, 2, (spec.batch,), generator=generator)
    elif spec.kind == "bert_cls":
        inputs["labels"] = torch.randint(0, spec.num_labels, (spec.batch,), generator=generator)
    elif spec.kind == "bert_regression":
        inputs["labels"] = torch.randn((spec.batch,), generator=generator)
    elif spec.kind == "bert_multilabel":
        inputs["labels"] = (torch.rand((spec.batch, spec.num_labels), generator=generator) < 0.5).float()
    elif spec.kind == "bert_token":
        labels = torch.randint(0, spec.num_labels, (spec.batch, spec.seq), generator=generator)
        labels[~valid] = -100
        labels[0, -1] = -100
        inputs["labels"] = labels
    elif spec.kind == "bert_qa":
        inputs["start_positions"], inputs["end_positions"] = qa_positions(spec, generator)
    return inputs


def choice_inputs(spec, generator):
    """num_choices (= spec.num_labels) padded text inputs per example, [B, num_choices, T], and the
    right choice of each example."""
    rows = dataclasses.replace(spec, batch=spec.batch * spec.num_labels)
    inputs, _ = bert_text_inputs(rows, generator)
    shaped = {k: v.reshape(spec.batch, spec.num_labels, spec.seq) for k, v in inputs.items()}
    shaped["labels"] = torch.randint(0, spec.num_labels, (spec.batch,), generator=generator)
    return shaped


def add_cotangents(model, inputs, generator):
    """A base model has no loss: random cotangents of its outputs (stored with the inputs) make one."""
    with torch.no_grad():
        out = model(**inputs)
    for name, value in outputs_of(out).items():
        inputs[f"cotangent.{name}"] = torch.randn(value.shape, generator=generator)


def saved_to_parameter(model, model_dir):
    """{saved name: in-memory parameter name}. transformers may rename tensors when saving (ViT's
    attention is q_proj in memory, attention.attention.query on disk), so tensors are matched by
    value; the perturbed random weights make every match unique."""
    saved = load_file(os.path.join(model_dir, "model.safetensors"))
    params = list(model.named_parameters())
    mapping = {}
    for name, tensor in saved.items():
        hits = [n for n, p in params if p.shape == tensor.shape and torch.equal(p.detach(), tensor)]
        if len(hits) != 1:
            raise RuntimeError(f"{model_dir}: {name} matches parameters {hits}")
        mapping[name] = hits[0]
    return mapping


def outputs_of(out):
    """{name: tensor} of the forward's outputs."""
    if hasattr(out, "last_hidden_state"):
        found = {"last_hidden_state": out.last_hidden_state}
        if getattr(out, "pooler_output", None) is not None:
            found["pooler_output"] = out.pooler_output
        return found
    if hasattr(out, "seq_relationship_logits"):
        return {"prediction_logits": out.prediction_logits, "seq_relationship_logits": out.seq_relationship_logits}
    if hasattr(out, "start_logits"):
        return {"start_logits": out.start_logits, "end_logits": out.end_logits}
    return {"logits": out.logits}


def model_loss(out, cotangents):
    """The model's loss, or for a base model sum(output * cotangent) over its outputs."""
    if not cotangents:
        return out.loss
    outputs = outputs_of(out)
    return sum((outputs[name] * c.to(outputs[name].dtype)).sum() for name, c in cotangents.items())


def split_inputs(inputs):
    """(forward keyword arguments, cotangents by output name)."""
    features = {k: v for k, v in inputs.items() if not k.startswith("cotangent.")}
    cotangents = {k[len("cotangent."):]: v for k, v in inputs.items() if k.startswith("cotangent.")}
    return features, cotangents


def forward_backward(model, inputs, mapping):
    """Run the model with labels and backpropagate; return outputs, loss and grads by saved name."""
    model.zero_grad(set_to_none=True)
    features, cotangents = split_inputs(inputs)
    out = model(**features)
    loss = model_loss(out, cotangents)
    loss.backward()
    grads = {}
    for saved, name in mapping.items():
        grad = model.get_parameter(name).grad
        if grad is None:
            if saved != "cls.predictions.bias":
                raise RuntimeError(f"no gradient for {saved}")
            grad = torch.zeros_like(model.get_parameter(name))
        grads[saved] = grad.detach().clone()
    outputs = {k: v.detach().clone().contiguous() for k, v in outputs_of(out).items()}
    return outputs, loss.detach().clone(), grads


def write_fixture(spec, out_root):
    """Build, save and run one fixture into out_root/spec.name; return the folder path."""
    out_dir = os.path.join(out_root, spec.name)
    model = build_model(spec)
    model.save_pretrained(out_dir)
    mapping = saved_to_parameter(model, out_dir)
    inputs = make_inputs(spec, torch.Generator().manual_seed(spec.seed + 2))
    if spec.kind in BASE_KINDS:
        add_cotangents(model, inputs, torch.Generator().manual_seed(spec.seed + 3))
    outputs, loss, grads = forward_backward(model, inputs, mapping)
    save_expected(out_dir, inputs, outputs, loss, grads, {"seed": str(spec.seed), "kind": spec.kind})
    return out_dir


# ---- verification -------------------------------------------------------------------------

INPUT_NAMES = ("input_ids", "attention_mask", "token_type_ids", "pixel_values", "labels", "start_positions",
               "end_positions", "next_sentence_label")


def load_fixture_model(model_dir, dtype, attention="eager"):
    """Reload a fixture with transformers, failing on missing or unexpected tensors (a BertModel
    without pooler is built with add_pooling_layer=False, as its checkpoint says)."""
    with open(os.path.join(model_dir, "config.json")) as f:
        arch = json.load(f)["architectures"][0]
    if arch == "BertModel" and "pooler.dense.weight" not in saved_tensor_names(model_dir):
        model, info = transformers.BertModel.from_pretrained(
            model_dir, add_pooling_layer=False, attn_implementation=attention, dtype=dtype, output_loading_info=True)
        if any(v for k, v in info.items()):
            raise RuntimeError(f"{model_dir}: loading problems: {info}")
        return model.eval()
    return load_checked(getattr(transformers, arch), model_dir, dtype, attention)


def check_recompute(model_dir, expected):
    """Recompute in float32 from the saved folder; return a list of problems."""
    model = load_fixture_model(model_dir, torch.float32)
    inputs = {k: expected[k] for k in expected if k in INPUT_NAMES or k.startswith("cotangent.")}
    outputs, loss, grads = forward_backward(model, inputs, saved_to_parameter(model, model_dir))
    top = max(v.abs().max().item() for k, v in expected.items() if k.startswith("grad."))
    # Gradients that are zero in exact arithmetic (key biases; the multiple-choice bias, which
    # every choice shares under the softmax) hold float32 rounding noise on both sides.
    kept = {n: g for n, g in grads.items() if expected[f"grad.{n}"].abs().max().item() > 1e-5 * top}
    return recompute_problems(model_dir, expected, outputs, loss, kept)


def probe_entries(expected, mapping):
    """(name, index) pairs to check numerically: a LayerNorm weight, the embedding row of a token in
    the input, the head, and ViT's patch projection and [CLS] token. (The pad token's row is not
    probed: its stored gradient leaves out the input lookup, as nn.Embedding(padding_idx) does, so
    it is not the derivative.)"""
    probes = [(n, (1,)) for n in sorted(mapping) if "LayerNorm.weight" in n or "layernorm_before.bias" in n][:1]
    if "input_ids" in expected:
        word = next(n for n in mapping if n.endswith("embeddings.word_embeddings.weight"))
        probes.append((word, (int(expected["input_ids"].flatten()[0]), 1)))
    for name in ("classifier.weight", "qa_outputs.weight", "cls.predictions.transform.dense.weight",
                 "pooler.dense.weight"):
        if name in mapping:
            probes.append((name, (0, 2)))
    if "pixel_values" in expected:
        prefix = "" if "embeddings.cls_token" in mapping else "vit."  # ViTModel's names have none
        probes += [(prefix + "embeddings.patch_embeddings.projection.weight", (1, 0, 1, 1)),
                   (prefix + "embeddings.cls_token", (0, 0, 1))]
    return probes


def check_finite_differences(model_dir, expected):
    """Stored float32 gradients against float64 central differences of a few entries. ViT's eager
    attention takes its softmax in float32 even for a float64 model, so its check runs SDPA (the
    same computation, in float64)."""
    attention = "sdpa" if "pixel_values" in expected else "eager"
    model = load_fixture_model(model_dir, torch.float64, attention)
    inputs = {k: (v.double() if v.is_floating_point() else v) for k, v in expected.items()
              if k in INPUT_NAMES or k.startswith("cotangent.")}
    features, cotangents = split_inputs(inputs)
    mapping = saved_to_parameter(model, model_dir)

    return check_probes(expected, probe_entries(expected, mapping), lambda name, index: central_difference(
        model.get_parameter(mapping[name]), index, lambda: model_loss(model(**features), cotangents).item(), 1e-6))


def describe(spec, model_dir):
    """A one-line summary of a written fixture."""
    size = sum(os.path.getsize(os.path.join(model_dir, n)) for n in os.listdir(model_dir))
    shape = f"T={spec.seq} vocab={spec.vocab_size}" if spec.kind.startswith("bert") else \
        f"image={spec.image_size} patch={spec.patch_size} channels={spec.num_channels}"
    return (f"{model_dir}: {spec.kind} layers={spec.layers} hidden={spec.hidden} heads={spec.heads} "
            f"act={spec.hidden_act} labels={spec.num_labels} B={spec.batch} {shape} size={size / 1024:.0f}KiB")


def main(argv=None):
    return run_cli(__doc__.splitlines()[0], argv, committed_specs, random_specs, write_fixture, describe,
                   (check_recompute, check_finite_differences))


if __name__ == "__main__":
    sys.exit(main())
