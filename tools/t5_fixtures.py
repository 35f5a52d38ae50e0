"""Reference fixtures for brigade's T5: random-init T5ForConditionalGeneration and T5EncoderModel
models, their outputs and gradients.

Each fixture is one folder:
  config.json, model.safetensors   written by save_pretrained (a tied lm_head is not stored)
  expected.safetensors             input_ids, [attention_mask], [decoder_input_ids],
                                   [decoder_attention_mask], labels, logits, loss, grad.<name>

`grad.<name>` exists for every tensor in model.safetensors: the gradient of the mean cross-entropy
over the labels (what transformers returns for `labels`) computed by autograd in float32, eval
mode (dropout off), eager attention. `grad.shared.weight` sums every use of the shared embedding
(encoder and decoder inputs and, when tied, the LM head).

Without decoder_input_ids the decoder inputs are the labels shifted right (decoder_start_token_id
first, -100 replaced by pad_token_id), as transformers derives them.

An encoder fixture (t5_encoder*) is a T5EncoderModel: expected.safetensors holds input_ids,
[attention_mask], last_hidden_state, a random cotangent.last_hidden_state and, as the model has no
loss, "loss" = sum(last_hidden_state * cotangent.last_hidden_state) with grad.<name> its gradients.
Its config.json is what save_pretrained writes for T5EncoderModel (is_encoder_decoder false).

An untied fixture is T5 v1.1 style: a separate lm_head.weight in the checkpoint and no rescaling
of the decoder output. transformers 5 always ties at construction, so the head is untied by hand;
its config.json is then rewritten as the hub's v1.1 checkpoints have it (tie_word_embeddings
false, no scale_decoder_outputs), which transformers 5 loads as the same model (both weights
present with different values: not tied; no scaling).

Weights are initialized by transformers and then every parameter, layer norms included, is
perturbed with random noise so every gradient path is exercised. dropout_rate keeps its default.

Usage:
  python tools/t5_fixtures.py --out tests/fixtures                     # the committed set
  python tools/t5_fixtures.py --random 3 --seed S --out DIR            # DIR/random_0 .. random_2
  python tools/t5_fixtures.py --verify DIR [DIR ...]                   # recompute and check
"""

import dataclasses
import json
import os
import random
import sys
import types

import torch
from torch import nn
from transformers import T5Config, T5EncoderModel, T5ForConditionalGeneration
from transformers.models.t5.modeling_t5 import T5LayerNorm
from fixture_common import (perturb_parameters, run_cli, check_probes, saved_tensor_names,
                            drop_generation_config, forward_backward, save_expected, load_checked,
                            recompute_problems, central_difference)

FEED_FORWARD = ("relu", "gated-gelu", "gelu", "gated-relu", "gated-gelu_new")
PERTURB_STD = 0.1
PAD, EOS, START = 0, 1, 0


@dataclasses.dataclass
class FixtureSpec:
    """One fixture: model hyper-parameters, batch shapes, which inputs are given, and seed."""

    name: str
    seed: int
    num_layers: int
    num_decoder_layers: int
    d_model: int
    d_kv: int
    num_heads: int
    d_ff: int
    vocab_size: int
    num_buckets: int
    max_distance: int
    feed_forward_proj: str
    tied: bool
    batch: int
    enc_seq: int
    dec_seq: int
    enc_padding: bool
    give_decoder_inputs: bool
    dec_padding: bool
    layer_norm_epsilon: float = 1e-6
    initializer_factor: float = 1.0
    encoder_only: bool = False  # T5EncoderModel (the decoder fields are then unused)


def committed_specs():
    """The small fixtures checked into tests/fixtures (each folder well under 300 KB)."""
    return [
        FixtureSpec(name="t5_relu_tied", seed=2001, num_layers=2, num_decoder_layers=2, d_model=16, d_kv=6,
                    num_heads=3, d_ff=32, vocab_size=40, num_buckets=8, max_distance=12,
                    feed_forward_proj="relu", tied=True, batch=3, enc_seq=13, dec_seq=9,
                    enc_padding=True, give_decoder_inputs=False, dec_padding=False),
        FixtureSpec(name="t5_gated_untied", seed=2002, num_layers=2, num_decoder_layers=2, d_model=20, d_kv=4,
                    num_heads=4, d_ff=24, vocab_size=36, num_buckets=10, max_distance=9,
                    feed_forward_proj="gated-gelu", tied=False, batch=2, enc_seq=11, dec_seq=12,
                    enc_padding=False, give_decoder_inputs=True, dec_padding=True, layer_norm_epsilon=1e-5),
        FixtureSpec(name="t5_encoder", seed=2003, num_layers=2, num_decoder_layers=2, d_model=16, d_kv=4,
                    num_heads=3, d_ff=24, vocab_size=33, num_buckets=8, max_distance=10,
                    feed_forward_proj="relu", tied=True, batch=4, enc_seq=9, dec_seq=1,
                    enc_padding=True, give_decoder_inputs=False, dec_padding=False, encoder_only=True),
        FixtureSpec(name="t5_encoder_gated", seed=2004, num_layers=3, num_decoder_layers=1, d_model=12, d_kv=4,
                    num_heads=2, d_ff=20, vocab_size=29, num_buckets=6, max_distance=7,
                    feed_forward_proj="gated-gelu", tied=True, batch=2, enc_seq=10, dec_seq=1,
                    enc_padding=False, give_decoder_inputs=False, dec_padding=False, layer_norm_epsilon=1e-5,
                    encoder_only=True),
    ]


def random_spec(rng, name, seed):
    """A random small T5 configuration drawn from `rng`."""
    num_buckets = rng.randint(4, 16)
    return FixtureSpec(
        name=name,
        seed=seed,
        num_layers=rng.randint(1, 3),
        num_decoder_layers=rng.randint(1, 3),
        d_model=rng.randint(4, 24),
        d_kv=rng.randint(2, 8),
        num_heads=rng.randint(1, 4),
        d_ff=rng.randint(4, 40),
        vocab_size=rng.randint(8, 120),
        num_buckets=num_buckets,
        max_distance=num_buckets // 2 + rng.randint(1, 20),
        feed_forward_proj=rng.choice(FEED_FORWARD),
        tied=rng.random() < 0.5,
        batch=rng.randint(1, 4),
        enc_seq=rng.randint(1, 16),
        dec_seq=rng.randint(1, 16),
        enc_padding=rng.random() < 0.5,
        give_decoder_inputs=rng.random() < 0.5,
        dec_padding=rng.random() < 0.5,
        layer_norm_epsilon=rng.choice((1e-6, 1e-5)),
        encoder_only=rng.random() < 0.3,
    )


def random_specs(count, seed):
    """`count` random specs named random_0.. , reproducible from `seed`."""
    rng = random.Random(seed)
    return [random_spec(rng, f"random_{i}", seed * 1000 + i) for i in range(count)]


def make_config(spec):
    """The transformers config for `spec` (eager attention, default dropout_rate)."""
    return T5Config(
        vocab_size=spec.vocab_size,
        d_model=spec.d_model,
        d_kv=spec.d_kv,
        d_ff=spec.d_ff,
        num_layers=spec.num_layers,
        num_decoder_layers=spec.num_decoder_layers,
        num_heads=spec.num_heads,
        relative_attention_num_buckets=spec.num_buckets,
        relative_attention_max_distance=spec.max_distance,
        feed_forward_proj=spec.feed_forward_proj,
        layer_norm_epsilon=spec.layer_norm_epsilon,
        initializer_factor=spec.initializer_factor,
        tie_word_embeddings=spec.tied,
        pad_token_id=PAD,
        eos_token_id=EOS,
        decoder_start_token_id=START,
        attn_implementation="eager",
    )


def untie_head(model):
    """Give the LM head its own weight, and make save_pretrained store it."""
    model.lm_head.weight = nn.Parameter(model.shared.weight.detach().clone())
    model.all_tied_weights_keys.pop("lm_head.weight", None)


def build_model(spec):
    """A float32 T5ForConditionalGeneration (T5EncoderModel for encoder_only), initialized from
    spec.seed then perturbed, in eval mode."""
    torch.manual_seed(spec.seed)
    cls = T5EncoderModel if spec.encoder_only else T5ForConditionalGeneration
    model = cls(make_config(spec)).to(torch.float32)
    if not spec.tied and not spec.encoder_only:
        untie_head(model)
    generator = torch.Generator().manual_seed(spec.seed + 1)
    perturb_parameters(model, generator, PERTURB_STD)
    return model.eval()


def row_lengths(batch, seq, padded, generator):
    """Unpadded length of each row: one row full, the others shorter when `padded`."""
    if not padded or seq < 2:
        return [seq] * batch
    lengths = [seq] + [int(torch.randint(max(1, seq // 3), seq, (1,), generator=generator)) for _ in range(batch - 1)]
    perm = torch.randperm(batch, generator=generator).tolist()
    return [lengths[p] for p in perm]


def valid_positions(batch, seq, padded, generator):
    """[batch, seq] bool: True where a right-padded row has a token."""
    lengths = torch.tensor(row_lengths(batch, seq, padded, generator))
    return torch.arange(seq).unsqueeze(0) < lengths.unsqueeze(1)


def random_ids(shape, vocab, generator):
    """Token ids avoiding pad and eos where the vocabulary allows."""
    low = 2 if vocab > 3 else 0
    return torch.randint(low, vocab, shape, generator=generator)


def make_labels(ids, valid, generator):
    """ids with -100 at padding and at a few random extra positions (keeping >= 2 targets)."""
    labels = ids.clone()
    labels[~valid] = -100
    positions = valid.nonzero().tolist()
    extra = max(1, len(positions) // 6)
    if len(positions) - extra < 2:
        extra = max(0, len(positions) - 2)
    order = torch.randperm(len(positions), generator=generator).tolist()
    for idx in order[:extra]:
        row, col = positions[idx]
        labels[row, col] = -100
    return labels


def make_inputs(spec, generator):
    """The forward's keyword inputs, all int64."""
    enc_valid = valid_positions(spec.batch, spec.enc_seq, spec.enc_padding, generator)
    input_ids = random_ids((spec.batch, spec.enc_seq), spec.vocab_size, generator)
    input_ids[~enc_valid] = PAD
    inputs = {"input_ids": input_ids}
    if spec.enc_padding:
        inputs["attention_mask"] = enc_valid.to(torch.int64)
    if spec.encoder_only:
        return {k: v.to(torch.int64) for k, v in inputs.items()}
    dec_valid = valid_positions(spec.batch, spec.dec_seq, spec.dec_padding, generator)
    targets = random_ids((spec.batch, spec.dec_seq), spec.vocab_size, generator)
    if spec.give_decoder_inputs:
        decoder_ids = random_ids((spec.batch, spec.dec_seq), spec.vocab_size, generator)
        decoder_ids[~dec_valid] = PAD
        inputs["decoder_input_ids"] = decoder_ids
        if spec.dec_padding:
            inputs["decoder_attention_mask"] = dec_valid.to(torch.int64)
    inputs["labels"] = make_labels(targets, dec_valid, generator)
    return {k: v.to(torch.int64) for k, v in inputs.items()}


def hub_v1_1_config(model_dir):
    """Rewrite config.json the way the hub's T5 v1.1 checkpoints have it."""
    path = os.path.join(model_dir, "config.json")
    with open(path) as f:
        config = json.load(f)
    config["tie_word_embeddings"] = False
    config.pop("scale_decoder_outputs", None)
    with open(path, "w") as f:
        json.dump(config, f, indent=2, sort_keys=True)
        f.write("\n")


def encoder_forward_backward(model, inputs, cotangent, names):
    """T5EncoderModel's last_hidden_state, sum(last_hidden_state * cotangent) and its gradients."""
    model.zero_grad(set_to_none=True)
    hidden = model(**inputs).last_hidden_state
    loss = (hidden * cotangent.to(hidden.dtype)).sum()
    loss.backward()
    grads = {name: model.get_parameter(name).grad.detach().clone() for name in names}
    return hidden.detach().clone(), loss.detach().clone(), grads


def write_encoder_fixture(spec, model, out_dir):
    """An encoder fixture's expected.safetensors (see the module docstring)."""
    inputs = make_inputs(spec, torch.Generator().manual_seed(spec.seed + 2))
    generator = torch.Generator().manual_seed(spec.seed + 3)
    cotangent = torch.randn((spec.batch, spec.enc_seq, spec.d_model), generator=generator)
    hidden, loss, grads = encoder_forward_backward(model, inputs, cotangent, saved_tensor_names(out_dir))
    inputs["cotangent.last_hidden_state"] = cotangent
    save_expected(out_dir, inputs, {"last_hidden_state": hidden}, loss, grads, {"seed": str(spec.seed)})
    return out_dir


def write_fixture(spec, out_root):
    """Build, save and run one fixture into out_root/spec.name; return the folder path."""
    out_dir = os.path.join(out_root, spec.name)
    model = build_model(spec)
    model.save_pretrained(out_dir)
    drop_generation_config(out_dir)
    if spec.encoder_only:
        return write_encoder_fixture(spec, model, out_dir)
    if not spec.tied:
        hub_v1_1_config(out_dir)
    inputs = make_inputs(spec, torch.Generator().manual_seed(spec.seed + 2))
    logits, loss, grads = forward_backward(model, inputs, saved_tensor_names(out_dir))
    save_expected(out_dir, inputs, {"logits": logits}, loss, grads, {"seed": str(spec.seed)})
    return out_dir


def is_encoder_fixture(model_dir):
    """Whether the folder holds a T5EncoderModel."""
    with open(os.path.join(model_dir, "config.json")) as f:
        return json.load(f)["architectures"][0] == "T5EncoderModel"


def load_fixture_model(model_dir, dtype):
    """Reload a fixture model with transformers, failing on missing or unexpected tensors."""
    cls = T5EncoderModel if is_encoder_fixture(model_dir) else T5ForConditionalGeneration
    return load_checked(cls, model_dir, dtype)


INPUT_NAMES = ("input_ids", "attention_mask", "decoder_input_ids", "decoder_attention_mask", "labels")


def fixture_inputs(expected):
    """The model inputs stored in an expected.safetensors dict."""
    return {k: expected[k] for k in INPUT_NAMES if k in expected}


def seq2seq_loss(logits, labels):
    """Mean cross-entropy of logits against labels, ignoring -100, in logits' dtype."""
    return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1),
                                             ignore_index=-100)


def encoder_inputs(expected):
    """An encoder fixture's model inputs."""
    return {k: expected[k] for k in ("input_ids", "attention_mask") if k in expected}


def check_recompute(model_dir, expected):
    """Recompute in float32 from the saved folder; return a list of problems."""
    model = load_fixture_model(model_dir, torch.float32)
    names = saved_tensor_names(model_dir)
    if is_encoder_fixture(model_dir):
        hidden, loss, grads = encoder_forward_backward(model, encoder_inputs(expected),
                                                       expected["cotangent.last_hidden_state"], names)
        return recompute_problems(model_dir, expected, {"last_hidden_state": hidden}, loss, grads)
    logits, loss, grads = forward_backward(model, fixture_inputs(expected), names)
    problems = recompute_problems(model_dir, expected, {"logits": logits}, loss, grads)
    own = seq2seq_loss(expected["logits"].double(), expected["labels"]).item()
    if abs(own - expected["loss"].item()) > 1e-5:
        problems.append(f"stored loss {expected['loss'].item()} is not the mean CE {own}")
    return problems


def seq2seq_loss_of(model, inputs):
    """seq2seq_loss of the model's logits for `inputs` (decoder inputs from the labels when the
    fixture has none), in the model's dtype."""
    features = {k: v for k, v in inputs.items() if k != "labels"}
    if "decoder_input_ids" not in features:
        features["decoder_input_ids"] = model._shift_right(inputs["labels"])
    return seq2seq_loss(model(**features).logits, inputs["labels"]).item()


def probe_entries(expected, names):
    """(name, index) pairs to check numerically: the shared embedding at an input token and at
    one that no input uses, the LM head (when untied), both relative position biases, a cross-
    attention weight and the encoder's final norm."""
    token = int(expected["input_ids"][0, 0])
    vocab = expected["logits"].shape[-1]
    used = set(expected["input_ids"].flatten().tolist())
    if "decoder_input_ids" in expected:
        used |= set(expected["decoder_input_ids"].flatten().tolist())
    unused = sorted(set(range(vocab)) - used)
    probes = [("shared.weight", (token, 1))]
    if unused:
        probes.append(("shared.weight", (unused[0], 0)))
    if "lm_head.weight" in names:
        probes.append(("lm_head.weight", (token, 0)))
    probes.append(("encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight", (1, 0)))
    probes.append(("decoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight", (0, 0)))
    probes.append(("decoder.block.0.layer.1.EncDecAttention.k.weight", (0, 1)))
    probes.append(("encoder.final_layer_norm.weight", (2,)))
    return probes


def rms_norm_in_input_dtype(self, hidden_states):
    """T5LayerNorm.forward without its float32 upcast of the variance."""
    variance = hidden_states.pow(2).mean(-1, keepdim=True)
    return self.weight * (hidden_states * torch.rsqrt(variance + self.variance_epsilon))


def float64_model(model_dir):
    """The fixture model computing in float64 throughout. T5 keeps its `wo` projections in
    float32 whatever dtype is asked for, and T5LayerNorm computes the variance in float32: either
    would round every central difference to float32 noise."""
    model = load_fixture_model(model_dir, torch.float64).to(torch.float64)
    for module in model.modules():
        if isinstance(module, T5LayerNorm):
            module.forward = types.MethodType(rms_norm_in_input_dtype, module)
    return model


def encoder_probe_entries(expected):
    """An encoder fixture's probes: the shared embedding at an input token, the relative position
    bias, a feed-forward weight and the final norm."""
    ff = "wi_0" if "grad.encoder.block.0.layer.1.DenseReluDense.wi_0.weight" in expected else "wi"
    return [("shared.weight", (int(expected["input_ids"][0, 0]), 1)),
            ("encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight", (1, 0)),
            (f"encoder.block.0.layer.1.DenseReluDense.{ff}.weight", (0, 1)),
            ("encoder.final_layer_norm.weight", (2,))]


def check_finite_differences(model_dir, expected):
    """Compare stored float32 gradients with float64 central differences; return problems."""
    model = float64_model(model_dir)
    if is_encoder_fixture(model_dir):
        inputs, cotangent = encoder_inputs(expected), expected["cotangent.last_hidden_state"].double()
        return check_probes(expected, encoder_probe_entries(expected), lambda name, index: central_difference(
            model.get_parameter(name), index,
            lambda: (model(**inputs).last_hidden_state * cotangent).sum().item(), 1e-6))
    inputs = fixture_inputs(expected)
    probes = probe_entries(expected, saved_tensor_names(model_dir))
    return check_probes(expected, probes, lambda name, index: central_difference(
        model.get_parameter(name), index, lambda: seq2seq_loss_of(model, inputs), 1e-6))


def describe(spec, model_dir):
    """A one-line summary of a written fixture."""
    size = sum(os.path.getsize(os.path.join(model_dir, n)) for n in os.listdir(model_dir))
    return (f"{model_dir}: layers={spec.num_layers}+{spec.num_decoder_layers} d_model={spec.d_model} "
            f"heads={spec.num_heads}x{spec.d_kv} d_ff={spec.d_ff} vocab={spec.vocab_size} "
            f"buckets={spec.num_buckets}/{spec.max_distance} ff={spec.feed_forward_proj} tied={spec.tied} "
            f"B={spec.batch} Te={spec.enc_seq} Td={spec.dec_seq} enc_pad={spec.enc_padding} "
            f"dec_inputs={spec.give_decoder_inputs} dec_pad={spec.dec_padding} size={size / 1024:.0f}KiB")


def main(argv=None):
    return run_cli(__doc__.splitlines()[0], argv, committed_specs, random_specs, write_fixture, describe,
                   (check_recompute, check_finite_differences))


if __name__ == "__main__":
    sys.exit(main())
