"""Reference fixtures for `brigade pipeline TASK`: random-init tiny models with a committed tokenizer and
what transformers' `pipeline(task, model=..., tokenizer=...)` returns for each case.

Each fixture is one folder under OUT (default tests/fixtures/pipeline):
  config.json, model.safetensors     the model (save_pretrained; float32, eager attention)
  generation_config.json             generation models: their defaults
  tokenizer.json                     a committed fixture tokenizer (tests/fixtures/tokenizers/), vocab = the model's
  tokenizer_config.json              the transformers side of it (special tokens, clean-up, model_max_length)
  cases.json                         {"task", "transformers_version", "tokenizers_version", "cases": [{"name",
                                     "options": {brigade flag: value}, "inputs": [{"text"...}], "expected": [result]}]}

`expected[i]` is the pipeline's result for inputs[i] called alone (pipe(text, **kwargs); QA: pipe(question=...,
context=...)); `options` are the same keyword arguments spelled as brigade's command-line flags.

transformers 5 has no question-answering, summarization, text2text-generation or translation pipeline; those
fixtures come from transformers 4.57.6 run in tools/.venv4 (made by tools/setup_venv4.sh, torch shared with
tools/.venv): run this script with tools/.venv's python and it reruns itself there for them (--legacy).

Random tiny models give near-uniform scores, so every case is also run with the model in float64 and kept only
if the labels, spans and texts are the same and every score agrees to 1e-5: no fixture is decided by a near tie.
A case that fails that check fails the script (pick another seed).

Usage:
  tools/.venv/bin/python tools/pipeline_fixtures.py [--out tests/fixtures/pipeline]
"""

import argparse
import copy
import json
import os
import shutil
import subprocess
import sys

import torch
import transformers

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOKENIZERS = os.path.join(ROOT, "tests", "fixtures", "tokenizers")
LEGACY = transformers.__version__.startswith("4.")
PERTURB_STD = 0.1

# model_input_names as BERT's tokenizer classes have them (the generic class of transformers 5 has no
# token_type_ids, 4.x's has): the model gets the pair's token types.
BERT_SPECIALS = {"unk_token": "[UNK]", "pad_token": "[PAD]", "cls_token": "[CLS]", "sep_token": "[SEP]",
                 "mask_token": "[MASK]", "model_input_names": ["input_ids", "token_type_ids", "attention_mask"]}

TEXTS = ["the quick brown fox jumps over the lazy dog", "coding in the morning is fine", "hello world",
         "a day in paris with anna and berlin", "ωmega signs are unknown here", "don't stop, it's working!"]


def write_json(path, value):
    with open(path, "w") as f:
        json.dump(value, f, indent=1, ensure_ascii=False)
        f.write("\n")


def perturb(model, seed):
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for param in model.parameters():
            param.add_(torch.randn(param.shape, generator=generator, dtype=param.dtype) * PERTURB_STD)


def make_folder(out, name, tokenizer, tokenizer_config):
    d = os.path.join(out, name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    shutil.copy(os.path.join(TOKENIZERS, tokenizer, "tokenizer.json"), d)
    write_json(os.path.join(d, "tokenizer_config.json"), {"tokenizer_class": "PreTrainedTokenizerFast",
                                                          **tokenizer_config})
    import tokenizers
    return d, tokenizers.Tokenizer.from_file(os.path.join(d, "tokenizer.json")).get_vocab_size(with_added_tokens=True)


def plain(value):
    """numpy / torch scalars in a pipeline result -> JSON numbers."""
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if hasattr(value, "item"):
        return value.item()
    return value


def same(a, b, path="result"):
    """Equal results: numbers to 1e-5, everything else exactly; returns a reason or None."""
    if isinstance(a, dict) and isinstance(b, dict):
        if list(a) != list(b):
            return f"{path}: keys {list(a)} vs {list(b)}"
        for k in a:
            r = same(a[k], b[k], f"{path}.{k}")
            if r:
                return r
        return None
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return f"{path}: {len(a)} vs {len(b)} entries"
        for i, (x, y) in enumerate(zip(a, b)):
            r = same(x, y, f"{path}[{i}]")
            if r:
                return r
        return None
    if isinstance(a, float) or isinstance(b, float):
        return None if abs(float(a) - float(b)) <= 1e-5 else f"{path}: {a} vs {b}"
    return None if a == b else f"{path}: {a!r} vs {b!r}"


def call(pipe, task, inp, kwargs):
    if task == "question-answering":
        return pipe(question=inp["question"], context=inp["context"], **kwargs)
    if "text_pair" in inp:
        return pipe({"text": inp["text"], "text_pair": inp["text_pair"]}, **kwargs)
    return pipe(inp["text"], **kwargs)


def run_cases(task, model, tokenizer, cases, pipeline_task=None):
    """Every case in float32 (the fixture) and float64 (the tie check). Each pipeline gets its own copy of the
    model: 4.x pops "prefix" out of config.task_specific_params when it builds one."""
    pipe = transformers.pipeline(pipeline_task or task, model=copy.deepcopy(model), tokenizer=tokenizer, device="cpu")
    pipe64 = transformers.pipeline(pipeline_task or task, model=copy.deepcopy(model).double(), tokenizer=tokenizer,
                                   device="cpu")
    written = []
    for case in cases:
        expected = []
        for inp in case["inputs"]:
            r32 = plain(call(pipe, task, inp, case.get("kwargs", {})))
            r64 = plain(call(pipe64, task, inp, case.get("kwargs", {})))
            reason = same(r32, r64)
            if reason:
                raise SystemExit(f"{task} case {case['name']}: float32 and float64 differ ({reason}): pick another seed")
            expected.append(r32)
        written.append({"name": case["name"], "options": case.get("options", {}), "inputs": case["inputs"],
                        "expected": expected})
    return written


def save_cases(d, task, cases):
    import tokenizers
    write_json(os.path.join(d, "cases.json"), {"task": task, "transformers_version": transformers.__version__,
                                               "tokenizers_version": tokenizers.__version__,
                                               "torch_version": torch.__version__, "cases": cases})


def bert(cls, vocab, seed, init=0.5, **extra):
    cfg = transformers.BertConfig(vocab_size=vocab, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                                  intermediate_size=24, max_position_embeddings=64, initializer_range=init,
                                  attn_implementation="eager", **extra)
    torch.manual_seed(seed)
    model = cls(cfg).eval()
    perturb(model, seed + 1)
    return model


def tokenizer_of(d):
    return transformers.AutoTokenizer.from_pretrained(d)


# ---- transformers 5 tasks ---------------------------------------------------------------------------

def text_classification(out):
    d, vocab = make_folder(out, "text_classification", "bert_uncased", {**BERT_SPECIALS, "model_max_length": 64})
    labels = {0: "negative", 1: "neutral", 2: "positive"}
    model = bert(transformers.BertForSequenceClassification, vocab, 11, num_labels=3, id2label=labels,
                 label2id={v: k for k, v in labels.items()})
    model.save_pretrained(d)
    texts = [{"text": t} for t in TEXTS]
    cases = [
        {"name": "best label", "inputs": texts},
        {"name": "top_k 2", "kwargs": {"top_k": 2}, "options": {"top-k": 2}, "inputs": texts[:3]},
        {"name": "all labels", "kwargs": {"top_k": None}, "options": {"top-k": 0}, "inputs": texts[:2]},
        {"name": "pairs", "inputs": [{"text": "hello world", "text_pair": "the fox is quick"},
                                     {"text": "coding", "text_pair": "in paris with anna"}]},
        {"name": "sigmoid", "kwargs": {"function_to_apply": "sigmoid", "top_k": None},
         "options": {"function-to-apply": "sigmoid", "top-k": 0}, "inputs": texts[2:4]},
    ]
    save_cases(d, "text-classification", run_cases("text-classification", model, tokenizer_of(d), cases))


def token_classification(out):
    d, vocab = make_folder(out, "token_classification", "bert_uncased", {**BERT_SPECIALS, "model_max_length": 64})
    labels = {0: "O", 1: "B-PER", 2: "I-PER", 3: "B-LOC", 4: "I-LOC"}
    model = bert(transformers.BertForTokenClassification, vocab, 21, init=0.8, num_labels=5, id2label=labels,
                 label2id={v: k for k, v in labels.items()})
    model.save_pretrained(d)
    texts = [{"text": t} for t in TEXTS]
    cases = [{"name": "none", "inputs": texts}]
    for how in ["simple", "first", "average", "max"]:
        cases.append({"name": how, "kwargs": {"aggregation_strategy": how},
                      "options": {"aggregation-strategy": how}, "inputs": texts})
    cases.append({"name": "ignore nothing", "kwargs": {"ignore_labels": []}, "options": {"ignore-labels": ""},
                  "inputs": texts[:2]})
    save_cases(d, "token-classification", run_cases("token-classification", model, tokenizer_of(d), cases))


def fill_mask(out):
    d, vocab = make_folder(out, "fill_mask", "bert_uncased",
                           {**BERT_SPECIALS, "clean_up_tokenization_spaces": True})
    model = bert(transformers.BertForMaskedLM, vocab, 31, init=0.8)
    model.save_pretrained(d)
    cases = [
        {"name": "top 5", "inputs": [{"text": "the quick brown [MASK] jumps over the lazy dog"},
                                     {"text": "[MASK] world"}, {"text": "don't stop, it's [MASK]!"}]},
        {"name": "top_k 2", "kwargs": {"top_k": 2}, "options": {"top-k": 2},
         "inputs": [{"text": "hello [MASK] in paris"}]},
        {"name": "two masks", "kwargs": {"top_k": 3}, "options": {"top-k": 3},
         "inputs": [{"text": "the [MASK] fox [MASK] over the dog"}]},
        {"name": "targets", "kwargs": {"targets": ["fox", "dog", "coding"]}, "options": {"targets": "fox,dog,coding"},
         "inputs": [{"text": "the quick brown [MASK] jumps"}]},
    ]
    save_cases(d, "fill-mask", run_cases("fill-mask", model, tokenizer_of(d), cases))


def feature_extraction(out):
    d, vocab = make_folder(out, "feature_extraction", "bert_uncased", dict(BERT_SPECIALS))
    model = bert(transformers.BertModel, vocab, 41, init=0.3)
    model.save_pretrained(d)
    cases = [{"name": "last_hidden_state", "inputs": [{"text": t} for t in TEXTS[:4]]}]
    save_cases(d, "feature-extraction", run_cases("feature-extraction", model, tokenizer_of(d), cases))


def gpt2_lm(out):
    d, vocab = make_folder(out, "text_generation", "gpt2_bpe",
                           {"unk_token": "<|endoftext|>", "bos_token": "<|endoftext|>", "eos_token": "<|endoftext|>"})
    eos = tokenizer_of(d).convert_tokens_to_ids("<|endoftext|>")
    cfg = transformers.GPT2Config(vocab_size=vocab, n_positions=64, n_embd=32, n_layer=2, n_head=4,
                                  bos_token_id=eos, eos_token_id=eos, initializer_range=0.3,
                                  attn_implementation="eager")
    torch.manual_seed(51)
    model = transformers.GPT2LMHeadModel(cfg).eval()
    perturb(model, 52)
    model.generation_config = transformers.GenerationConfig(bos_token_id=eos, eos_token_id=eos, max_new_tokens=6)
    model.save_pretrained(d)
    prompts = [{"text": "Hello world"}, {"text": "The quick brown fox jumps over"}, {"text": "a"},
               {"text": "Numbers 3 4 5 and then"}]
    cases = [
        {"name": "greedy", "kwargs": {"do_sample": False}, "options": {"greedy": True}, "inputs": prompts},
        {"name": "beams", "kwargs": {"do_sample": False, "num_beams": 2, "max_new_tokens": 4},
         "options": {"greedy": True, "num-beams": 2, "max-new-tokens": 4}, "inputs": prompts[:2]},
        {"name": "new text", "kwargs": {"do_sample": False, "return_full_text": False, "repetition_penalty": 1.5},
         "options": {"greedy": True, "no-full-text": True, "repetition-penalty": 1.5}, "inputs": prompts[1:3]},
        {"name": "two sequences", "kwargs": {"do_sample": False, "num_beams": 3, "num_return_sequences": 2,
                                             "max_new_tokens": 3},
         "options": {"greedy": True, "num-beams": 3, "num-return-sequences": 2, "max-new-tokens": 3},
         "inputs": prompts[:1]},
    ]
    save_cases(d, "text-generation", run_cases("text-generation", model, tokenizer_of(d), cases))


# ---- transformers 4.57 tasks --------------------------------------------------------------------------

def question_answering(out):
    d, vocab = make_folder(out, "question_answering", "bert_uncased", dict(BERT_SPECIALS))
    model = bert(transformers.BertForQuestionAnswering, vocab, 61, init=0.8)
    model.save_pretrained(d)
    context = ("the quick brown fox jumps over the lazy dog in paris while anna is coding in the morning "
               "and berlin is far away from the world")
    qa = [{"question": "where is the fox?", "context": context},
          {"question": "who is coding?", "context": "anna is coding in the morning in berlin"},
          {"question": "hello?", "context": "don't stop, it's working! the world is fine"}]
    cases = [
        {"name": "best answer", "inputs": qa},
        {"name": "top_k 3", "kwargs": {"top_k": 3}, "options": {"top-k": 3}, "inputs": qa},
        {"name": "windows", "kwargs": {"max_seq_len": 20, "doc_stride": 5, "top_k": 2},
         "options": {"max-seq-len": 20, "doc-stride": 5, "top-k": 2}, "inputs": qa[:1]},
        {"name": "impossible", "kwargs": {"handle_impossible_answer": True, "max_answer_len": 3},
         "options": {"handle-impossible-answer": True, "max-answer-len": 3}, "inputs": qa[1:]},
        {"name": "token ends", "kwargs": {"align_to_words": False, "top_k": 2},
         "options": {"no-align-to-words": True, "top-k": 2}, "inputs": qa[:2]},
    ]
    save_cases(d, "question-answering", run_cases("question-answering", model, tokenizer_of(d), cases))


def t5(out):
    d, vocab = make_folder(out, "text2text", "unigram_t5",
                           {"eos_token": "</s>", "unk_token": "<unk>", "pad_token": "<pad>"})
    tok = tokenizer_of(d)
    params = {"summarization": {"prefix": "summarize: ", "num_beams": 2, "early_stopping": True, "length_penalty": 2.0,
                                "no_repeat_ngram_size": 3, "min_length": 4},
              "translation_en_to_de": {"prefix": "translate English to German: ", "num_beams": 2,
                                       "early_stopping": True},
              "translation_en_to_fr": {"prefix": "translate English to French: ", "num_beams": 3}}
    cfg = transformers.T5Config(vocab_size=vocab, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_decoder_layers=2,
                                num_heads=4, relative_attention_num_buckets=8, relative_attention_max_distance=16,
                                feed_forward_proj="relu", tie_word_embeddings=True, initializer_factor=1.0,
                                dropout_rate=0.0, pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id,
                                decoder_start_token_id=tok.pad_token_id, task_specific_params=params,
                                attn_implementation="eager")
    torch.manual_seed(71)
    model = transformers.T5ForConditionalGeneration(cfg).eval()
    perturb(model, 72)
    model.generation_config = transformers.GenerationConfig(decoder_start_token_id=tok.pad_token_id,
                                                            eos_token_id=tok.eos_token_id,
                                                            pad_token_id=tok.pad_token_id)
    model.save_pretrained(d)
    texts = [{"text": "Hello world"}, {"text": "The quick brown fox jumps over"}, {"text": "don't stop"}]
    cases = {
        "text2text-generation": [
            {"name": "beams 4 (pipeline default)", "kwargs": {"max_new_tokens": 5}, "options": {"max-new-tokens": 5},
             "inputs": texts},
            {"name": "greedy", "kwargs": {"max_new_tokens": 6, "num_beams": 1}, "options": {"max-new-tokens": 6,
                                                                                          "num-beams": 1},
             "inputs": texts}],
        "summarization": [{"name": "task params", "kwargs": {"max_new_tokens": 6}, "options": {"max-new-tokens": 6},
                           "inputs": texts}],
        "translation_en_to_de": [{"name": "task params", "kwargs": {"max_new_tokens": 5},
                                  "options": {"max-new-tokens": 5}, "inputs": texts}],
        "translation": [{"name": "first translation entry", "kwargs": {"max_new_tokens": 4},
                         "options": {"max-new-tokens": 4}, "inputs": texts[:2]}],
    }
    tasks = {}
    for task, task_cases in cases.items():
        tasks[task] = run_cases(task, model, tok, task_cases)
    for task, written in tasks.items():
        for case in written:
            case["task"] = task
    save_cases(d, "text2text", [c for written in tasks.values() for c in written])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(ROOT, "tests", "fixtures", "pipeline"))
    ap.add_argument("--legacy", action="store_true", help="(internal) the transformers 4.57 fixtures")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    if args.legacy or LEGACY:
        assert LEGACY, "--legacy needs transformers 4.x (tools/.venv4)"
        question_answering(args.out)
        t5(args.out)
        print("wrote question_answering, text2text (transformers", transformers.__version__ + ")")
        return
    text_classification(args.out)
    token_classification(args.out)
    fill_mask(args.out)
    feature_extraction(args.out)
    gpt2_lm(args.out)
    print("wrote text_classification, token_classification, fill_mask, feature_extraction, text_generation "
          "(transformers", transformers.__version__ + ")")
    py4 = subprocess.run(["bash", os.path.join(ROOT, "tools", "setup_venv4.sh"), os.path.dirname(os.path.dirname(
        sys.executable))], check=True, capture_output=True, text=True).stdout.strip().splitlines()[-1]
    subprocess.run([py4, os.path.abspath(__file__), "--legacy", "--out", args.out], check=True)


if __name__ == "__main__":
    main()
