"""Reference fixtures for brigade's generation: transformers' `generate` on random-init models with a
tokenizer, token for token.

Each fixture is one folder:
  config.json, model.safetensors   the model (save_pretrained; float32, eager attention)
  generation_config.json           its generation defaults (save_pretrained), read by brigade
  tokenizer.json                   the tokenizer the prompts go through (vocab = the model's)
  cases.json                       {"transformers_version", "torch_version", "cases": [...]}, each case
                                   {"name", "prompts": [text], "prompt_ids": [[id]], "kwargs": {...},
                                   "sequences": [[id]], "sequences_scores": [float] (beam search)}

`kwargs` are the keyword arguments given to generate() besides input_ids and attention_mask, named as
in generation_config.json; `sequences` is what generate() returned: for GPT-2 the left-padded prompts
(pad = eos, the tokenizer's pad token) then the new tokens, shorter rows filled; for T5 the decoder
tokens from decoder_start_token_id on. Prompts are a batch: GPT-2 pads on the left, T5 on the right.

Random tiny models often give logits whose top two differ by float noise; every case is run again
with the model in float64 and kept only if the tokens are the same, so a fixture does not depend on
rounding (the committed set is checked that way and fails to write otherwise).

Usage:
  python tools/generate_fixtures.py --out tests/fixtures                 # the committed set
  python tools/generate_fixtures.py --random 3 --seed S --out DIR        # DIR/random_0 .. random_2
  python tools/generate_fixtures.py --verify DIR [DIR ...]               # recompute and compare
"""

import argparse
import copy
import json
import os
import random
import shutil
import sys

import torch
import transformers
from transformers import (GenerationConfig, GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast,
                          T5Config, T5ForConditionalGeneration)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GPT2_TOKENIZER = os.path.join(ROOT, "tests/fixtures/tokenizers/gpt2_bpe/tokenizer.json")
T5_TOKENIZER = os.path.join(ROOT, "tests/fixtures/tokenizers/unigram_t5/tokenizer.json")
PERTURB_STD = 0.1

PROMPTS = ["Hello world", "The quick brown fox jumps over", "a", "Line 12 of the story: once upon a time",
           "don't stop", "Numbers 3 4 5 and then"]
WORDS = ["the", "a", "story", "Hello", "world", "time", "of", "and", "12", "fox", "jumps", "over", "quick",
         "brown", "once", "upon", "line", "stop", "don't", "5", "numbers", "then", "is", "it"]


def tokenizer_for(kind):
    if kind == "gpt2":
        return PreTrainedTokenizerFast(tokenizer_file=GPT2_TOKENIZER, eos_token="<|endoftext|>",
                                       pad_token="<|endoftext|>", padding_side="left")
    return PreTrainedTokenizerFast(tokenizer_file=T5_TOKENIZER, eos_token="</s>", pad_token="<pad>",
                                   unk_token="<unk>", padding_side="right")


def perturb(model, seed):
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for param in model.parameters():
            param.add_(torch.randn(param.shape, generator=generator, dtype=param.dtype) * PERTURB_STD)


def build_gpt2(seed, n_layer=2, n_embd=32, n_head=4, n_positions=64, init=0.3, activation="gelu_new"):
    tok = tokenizer_for("gpt2")
    vocab = len(tok)
    eos = tok.convert_tokens_to_ids("<|endoftext|>")
    config = GPT2Config(vocab_size=vocab, n_positions=n_positions, n_embd=n_embd, n_layer=n_layer, n_head=n_head,
                        bos_token_id=eos, eos_token_id=eos, initializer_range=init,
                        activation_function=activation, attn_implementation="eager")
    torch.manual_seed(seed)
    model = GPT2LMHeadModel(config).eval()
    perturb(model, seed + 1)
    model.generation_config = GenerationConfig(bos_token_id=eos, eos_token_id=eos, max_new_tokens=8)
    return model, tok


def build_t5(seed, layers=2, d_model=32, heads=4, d_kv=8, d_ff=64, ffp="relu", tied=True, init=1.0):
    tok = tokenizer_for("t5")
    vocab = len(tok)
    config = T5Config(vocab_size=vocab, d_model=d_model, d_kv=d_kv, d_ff=d_ff, num_layers=layers,
                      num_decoder_layers=layers, num_heads=heads, relative_attention_num_buckets=8,
                      relative_attention_max_distance=16, feed_forward_proj=ffp, tie_word_embeddings=tied,
                      initializer_factor=init, dropout_rate=0.0, pad_token_id=tok.pad_token_id,
                      eos_token_id=tok.eos_token_id, decoder_start_token_id=tok.pad_token_id,
                      attn_implementation="eager")
    torch.manual_seed(seed)
    model = T5ForConditionalGeneration(config).eval()
    perturb(model, seed + 1)
    model.generation_config = GenerationConfig(decoder_start_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id,
                                               pad_token_id=tok.pad_token_id, max_new_tokens=8)
    return model, tok


def run_case(model, tok, prompts, kwargs):
    inputs = tok(prompts, return_tensors="pt", padding=True)
    beam = kwargs.get("num_beams", model.generation_config.num_beams or 1) > 1
    with torch.no_grad():
        out = model.generate(input_ids=inputs["input_ids"], attention_mask=inputs["attention_mask"],
                             return_dict_in_generate=True, output_scores=beam, **kwargs)
    result = {"sequences": out.sequences.tolist()}
    if beam:
        result["sequences_scores"] = [float(x) for x in out.sequences_scores.tolist()]
    return inputs["input_ids"].tolist(), inputs["attention_mask"].tolist(), result


def unpadded(ids, mask):
    return [[t for t, m in zip(row, mrow) if m] for row, mrow in zip(ids, mask)]


def make_case(model, model64, tok, name, prompts, kwargs):
    """The case, or None when float64 gives other tokens (a near tie decides it)."""
    ids, mask, result = run_case(model, tok, prompts, kwargs)
    _, _, result64 = run_case(model64, tok, prompts, kwargs)
    if result64["sequences"] != result["sequences"]:
        return None
    return {"name": name, "prompts": prompts, "prompt_ids": unpadded(ids, mask), "kwargs": kwargs, **result}


def steady_tokens(model, tok, prompts, n):
    """Tokens greedy search emits early on (to use as eos so that rows stop at different steps)."""
    inputs = tok(prompts, return_tensors="pt", padding=True)
    with torch.no_grad():
        out = model.generate(**inputs, max_new_tokens=n, do_sample=False, eos_token_id=None, pad_token_id=0)
    width = inputs["input_ids"].shape[1]
    return [row[width:] for row in out.tolist()]


def gpt2_cases(model, tok, rng, random_mode):
    """(name, prompts, kwargs) for GPT-2."""
    batch = PROMPTS[:3] if not random_mode else [" ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 7)))
                                                  for _ in range(3)]
    gen = steady_tokens(model, tok, batch, 8)
    eos_a = gen[0][3]                     # the first prompt stops after 4 tokens
    eos_b = gen[1][5] if gen[1][5] != eos_a else gen[1][2]
    cases = [
        ("greedy_one", batch[1:2], {"max_new_tokens": 12}),
        ("greedy_batch", batch, {"max_new_tokens": 10}),
        ("greedy_defaults", batch[:2], {}),   # generation_config.json: max_new_tokens 8, eos 1000
        ("greedy_eos", batch, {"max_new_tokens": 10, "eos_token_id": eos_a}),
        ("greedy_eos_list", batch, {"max_new_tokens": 10, "eos_token_id": [eos_b, eos_a]}),
        ("greedy_min_new_tokens", batch, {"max_new_tokens": 10, "eos_token_id": eos_a, "min_new_tokens": 6}),
        ("greedy_max_length", batch, {"max_length": 12}),
        ("greedy_repetition_penalty", batch, {"max_new_tokens": 12, "repetition_penalty": 1.5}),
        ("greedy_no_repeat_ngram", batch, {"max_new_tokens": 14, "no_repeat_ngram_size": 2}),
        ("beam4_lp1", batch, {"max_new_tokens": 10, "num_beams": 4, "length_penalty": 1.0, "eos_token_id": eos_a}),
        ("beam4_lp06", batch, {"max_new_tokens": 10, "num_beams": 4, "length_penalty": 0.6, "eos_token_id": eos_a,
                               "num_return_sequences": 2}),
        ("beam4_early_true", batch, {"max_new_tokens": 10, "num_beams": 4, "early_stopping": True,
                                     "eos_token_id": [eos_a, eos_b]}),
        ("beam4_never", batch, {"max_new_tokens": 8, "num_beams": 4, "early_stopping": "never",
                                "length_penalty": 0.6, "eos_token_id": eos_b, "num_return_sequences": 4}),
        ("beam3_no_eos", batch[:2], {"max_new_tokens": 6, "num_beams": 3, "eos_token_id": None,
                                     "num_return_sequences": 3}),
        ("beam4_processors", batch, {"max_new_tokens": 10, "num_beams": 4, "repetition_penalty": 1.3,
                                     "no_repeat_ngram_size": 2, "min_new_tokens": 3, "eos_token_id": eos_a}),
    ]
    return cases


def t5_cases(model, tok, rng, random_mode):
    batch = PROMPTS[1:4] if not random_mode else [" ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 7)))
                                                   for _ in range(3)]
    inputs = tok(batch, return_tensors="pt", padding=True)
    with torch.no_grad():
        out = model.generate(**inputs, max_new_tokens=8, eos_token_id=None)
    gen = [row[1:] for row in out.tolist()]
    eos_a = gen[0][3]
    eos_b = gen[1][4] if gen[1][4] != eos_a else gen[1][2]
    eos = tok.eos_token_id
    return [
        ("greedy_batch", batch, {"max_new_tokens": 10}),
        ("greedy_defaults", batch[:2], {}),
        ("greedy_eos_list", batch, {"max_new_tokens": 10, "eos_token_id": [eos, eos_a]}),
        ("greedy_min_new_tokens", batch, {"max_new_tokens": 10, "eos_token_id": eos_a, "min_new_tokens": 5}),
        ("greedy_processors", batch, {"max_new_tokens": 12, "repetition_penalty": 1.4, "no_repeat_ngram_size": 2}),
        ("beam4_lp1", batch, {"max_new_tokens": 10, "num_beams": 4, "length_penalty": 1.0, "eos_token_id": eos_a}),
        ("beam4_lp06", batch, {"max_new_tokens": 10, "num_beams": 4, "length_penalty": 0.6,
                               "eos_token_id": [eos_a, eos_b], "num_return_sequences": 2}),
        ("beam4_never", batch[:2], {"max_new_tokens": 8, "num_beams": 4, "early_stopping": "never",
                                    "eos_token_id": eos_b, "num_return_sequences": 4}),
    ]


def write_fixture(out_dir, kind, model, tok, cases, rng, random_mode, strict):
    model64 = copy.deepcopy(model).double()
    written = []
    for name, prompts, kwargs in cases:
        case = make_case(model, model64, tok, name, prompts, kwargs)
        if case is None:
            if strict:
                raise RuntimeError(f"{out_dir}: case {name} depends on rounding (float64 differs); pick other seeds")
            print(f"  {name}: dropped (float64 gives other tokens)")
            continue
        written.append(case)
    if os.path.isdir(out_dir):
        shutil.rmtree(out_dir)
    model.save_pretrained(out_dir)
    shutil.copy(GPT2_TOKENIZER if kind == "gpt2" else T5_TOKENIZER, os.path.join(out_dir, "tokenizer.json"))
    for name in os.listdir(out_dir):
        os.chmod(os.path.join(out_dir, name), 0o644)
    doc = {"transformers_version": transformers.__version__, "torch_version": torch.__version__, "cases": written}
    with open(os.path.join(out_dir, "cases.json"), "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    return written


def committed(out_root):
    rng = random.Random(0)
    model, tok = build_gpt2(seed=2024)
    cases = write_fixture(os.path.join(out_root, "generate_gpt2"), "gpt2", model, tok,
                          gpt2_cases(model, tok, rng, False), rng, False, True)
    print(f"generate_gpt2: {len(cases)} cases")
    model, tok = build_t5(seed=2025)
    cases = write_fixture(os.path.join(out_root, "generate_t5"), "t5", model, tok,
                          t5_cases(model, tok, rng, False), rng, False, True)
    print(f"generate_t5: {len(cases)} cases")


def random_fixtures(count, seed, out_root):
    rng = random.Random(seed)
    for i in range(count):
        s = rng.randrange(1 << 30)
        if i % 2 == 0:
            heads = rng.choice([1, 2, 4])
            model, tok = build_gpt2(seed=s, n_layer=rng.randint(1, 3), n_embd=heads * rng.choice([4, 8, 12]),
                                    n_head=heads, n_positions=rng.choice([48, 64, 96]), init=rng.choice([0.2, 0.3, 0.5]),
                                    activation=rng.choice(["gelu_new", "gelu", "gelu_pytorch_tanh"]))
            kind, cases = "gpt2", gpt2_cases(model, tok, rng, True)
        else:
            heads = rng.choice([2, 4])
            model, tok = build_t5(seed=s, layers=rng.randint(1, 3), d_model=heads * 8, heads=heads, d_kv=8,
                                  d_ff=rng.choice([32, 64]), ffp=rng.choice(["relu", "gated-gelu"]),
                                  tied=rng.choice([True, False]))
            kind, cases = "t5", t5_cases(model, tok, rng, True)
        written = write_fixture(os.path.join(out_root, f"random_{i}"), kind, model, tok, cases, rng, True, False)
        print(f"random_{i}: {kind}, seed {s}, {len(written)} cases")


def verify(dirs):
    failed = 0
    for d in dirs:
        with open(os.path.join(d, "cases.json")) as f:
            doc = json.load(f)
        with open(os.path.join(d, "config.json")) as f:
            kind = json.load(f)["model_type"]
        cls = GPT2LMHeadModel if kind == "gpt2" else T5ForConditionalGeneration
        model = cls.from_pretrained(d, attn_implementation="eager").eval()
        tok = tokenizer_for(kind)
        for case in doc["cases"]:
            _, _, result = run_case(model, tok, case["prompts"], case["kwargs"])
            if result["sequences"] != case["sequences"]:
                print(f"FAIL {d} {case['name']}: {result['sequences']} != {case['sequences']}")
                failed += 1
    print(f"{'ok' if not failed else f'{failed} failed'}")
    return 1 if failed else 0


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out")
    parser.add_argument("--random", type=int, metavar="N")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--verify", nargs="+", metavar="DIR")
    args = parser.parse_args(argv)
    transformers.utils.logging.set_verbosity_error()
    torch.set_num_threads(1)
    if args.verify:
        return verify(args.verify)
    if not args.out:
        parser.error("--out is required unless --verify is given")
    os.makedirs(args.out, exist_ok=True)
    if args.random:
        random_fixtures(args.random, args.seed, args.out)
    else:
        committed(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
