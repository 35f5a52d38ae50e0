#!/usr/bin/env python3
"""Text-dataset fixtures: small data files for every text objective brigade trains on, and the
features transformers' example scripts make of them, through the committed tokenizer fixtures.

    tools/.venv/bin/python tools/text_data_fixtures.py --out tests/fixtures/text_data

writes into OUT:

    config.json          a BertForSequenceClassification config whose label2id names the classes
    cls.jsonl, cls.csv   the same classification examples ({"text", "text_pair"?, "label"}); the CSV
                         is written by Python's csv module (RFC 4180 quoting: commas, quotes and a
                         line break inside fields)
    seq2seq.jsonl        {"source", "target"} pairs
    squad.json           SQuAD v2-style {"data": [{"paragraphs": [{"context", "qas": [...]}]}]}
    squad.jsonl          the same examples flattened as the hub's squad_v2 rows
                         ({"id", "title", "context", "question", "answers": {"text", "answer_start"}})
    expected.json        {"classification": {seq_len, input_ids, attention_mask, token_type_ids, labels},
                          "seq2seq": {prefix, source_length, target_length, input_ids, attention_mask, labels},
                          "qa": {seq_len, doc_stride, input_ids, attention_mask, token_type_ids,
                                 start_positions, end_positions}}

The features are what run_classification.py (padding="max_length", truncation=True),
run_summarization.py (source_prefix, max_target_length, pad -> -100) and run_qa.py's
prepare_train_features (question lstripped, only_second truncation with doc_stride, offsets,
CLS for answers outside the window) compute; the functions below follow those scripts line for
line. Regenerating gives identical files for the same library versions."""
import argparse
import csv
import io
import json
import os

from transformers import PreTrainedTokenizerFast

HERE = os.path.dirname(os.path.abspath(__file__))
TOKENIZERS = os.path.join(HERE, "..", "tests", "fixtures", "tokenizers")

LABELS = ["negative", "positive", "neutral"]

CLASSIFICATION = [
    {"text": "This movie was wonderful, I loved it.", "label": "positive"},
    {"text": "Terrible plot, \"acting\" even worse.", "label": "negative"},
    {"text": "It was fine.", "text_pair": "Nothing special, nothing bad.", "label": 2},
    {"text": "Caf\u00e9 au lait, \u65e5\u672c, and a very long sentence that goes on and on well past "
             "the sixteen tokens a row holds here", "label": "positive"},
    {"text": "Two lines\nin one field", "text_pair": "and a pair, with a comma", "label": "neutral"},
    {"text": "", "label": 0},
]

SEQ2SEQ = [
    {"source": "The quick brown fox jumps over the lazy dog near the river bank.", "target": "A fox jumps."},
    {"source": "Brigade trains transformer models in C.", "target": "Brigade trains models."},
    {"source": "short", "target": "a target that is long enough to be cut at the target length"},
]

# Contexts long enough for several windows at seq_len 24, answers inside the first, the last and
# across window borders, and an unanswerable question (SQuAD v2).
CONTEXT_A = ("Brigade is a C library that trains Hugging Face transformer models split across several "
             "devices as a pipeline. It reads the same IPU configuration that optimum graphcore uses, "
             "and writes models that transformers loads unchanged.")
CONTEXT_B = "The river runs north past the old mill, then turns east toward the sea."
SQUAD = {
    "version": "v2.0",
    "data": [
        {"title": "brigade", "paragraphs": [
            {"context": CONTEXT_A, "qas": [
                {"id": "q1", "question": "  What does brigade train?", "is_impossible": False,
                 "answers": [{"text": "Hugging Face transformer models",
                              "answer_start": CONTEXT_A.index("Hugging Face transformer models")}]},
                {"id": "q2", "question": "Which library loads the models?", "is_impossible": False,
                 "answers": [{"text": "transformers", "answer_start": CONTEXT_A.rindex("transformers")}]},
                {"id": "q3", "question": "Who wrote it?", "is_impossible": True, "answers": []},
            ]},
        ]},
        {"title": "river", "paragraphs": [
            {"context": CONTEXT_B, "qas": [
                {"id": "q4", "question": "Where does the river turn?", "is_impossible": False,
                 "answers": [{"text": "east toward the sea", "answer_start": CONTEXT_B.index("east")}]},
            ]},
        ]},
    ],
}


def bert_tokenizer():
    return PreTrainedTokenizerFast(tokenizer_file=os.path.join(TOKENIZERS, "bert_uncased", "tokenizer.json"),
                                   unk_token="[UNK]", cls_token="[CLS]", sep_token="[SEP]", pad_token="[PAD]",
                                   mask_token="[MASK]")


def t5_tokenizer():
    return PreTrainedTokenizerFast(tokenizer_file=os.path.join(TOKENIZERS, "unigram_t5", "tokenizer.json"),
                                   unk_token="<unk>", eos_token="</s>", pad_token="<pad>")


def classification(tok, seq_len):
    label2id = {n: i for i, n in enumerate(LABELS)}
    texts = [e["text"] for e in CLASSIFICATION]
    pairs = [e.get("text_pair") for e in CLASSIFICATION]
    out = {"seq_len": seq_len, "input_ids": [], "attention_mask": [], "token_type_ids": [], "labels": []}
    for text, pair, e in zip(texts, pairs, CLASSIFICATION):
        enc = tok(text, pair, padding="max_length", max_length=seq_len, truncation=True, return_token_type_ids=True)
        for k in ("input_ids", "attention_mask", "token_type_ids"):
            out[k].append(enc[k])
        out["labels"].append(label2id[e["label"]] if isinstance(e["label"], str) else e["label"])
    return out


def seq2seq(tok, prefix, source_length, target_length):
    inputs = [prefix + e["source"] for e in SEQ2SEQ]
    targets = [e["target"] for e in SEQ2SEQ]
    model_inputs = tok(inputs, max_length=source_length, padding="max_length", truncation=True)
    labels = tok(text_target=targets, max_length=target_length, padding="max_length", truncation=True)
    labels = [[(t if t != tok.pad_token_id else -100) for t in label] for label in labels["input_ids"]]
    return {"prefix": prefix, "source_length": source_length, "target_length": target_length,
            "input_ids": model_inputs["input_ids"], "attention_mask": model_inputs["attention_mask"],
            "labels": labels}


def squad_examples():
    """The flattened examples datasets' squad_v2 builder makes of the file."""
    rows = []
    for article in SQUAD["data"]:
        for paragraph in article["paragraphs"]:
            for qa in paragraph["qas"]:
                rows.append({"id": qa["id"], "title": article["title"], "question": qa["question"],
                             "context": paragraph["context"],
                             "answers": {"text": [a["text"] for a in qa["answers"]],
                                         "answer_start": [a["answer_start"] for a in qa["answers"]]}})
    return rows


def prepare_train_features(tok, examples, max_seq_length, doc_stride):
    """run_qa.py's prepare_train_features, padding to max_seq_length."""
    pad_on_right = tok.padding_side == "right"
    questions = [q.lstrip() for q in examples["question"]]
    tokenized = tok(questions if pad_on_right else examples["context"],
                    examples["context"] if pad_on_right else questions,
                    truncation="only_second" if pad_on_right else "only_first", max_length=max_seq_length,
                    stride=doc_stride, return_overflowing_tokens=True, return_offsets_mapping=True,
                    padding="max_length", return_token_type_ids=True)
    sample_mapping = tokenized.pop("overflow_to_sample_mapping")
    offset_mapping = tokenized.pop("offset_mapping")
    tokenized["start_positions"] = []
    tokenized["end_positions"] = []
    for i, offsets in enumerate(offset_mapping):
        input_ids = tokenized["input_ids"][i]
        if tok.cls_token_id in input_ids:
            cls_index = input_ids.index(tok.cls_token_id)
        elif tok.bos_token_id in input_ids:
            cls_index = input_ids.index(tok.bos_token_id)
        else:
            cls_index = 0
        sequence_ids = tokenized.sequence_ids(i)
        answers = examples["answers"][sample_mapping[i]]
        if len(answers["answer_start"]) == 0:
            tokenized["start_positions"].append(cls_index)
            tokenized["end_positions"].append(cls_index)
            continue
        start_char = answers["answer_start"][0]
        end_char = start_char + len(answers["text"][0])
        token_start_index = 0
        while sequence_ids[token_start_index] != (1 if pad_on_right else 0):
            token_start_index += 1
        token_end_index = len(input_ids) - 1
        while sequence_ids[token_end_index] != (1 if pad_on_right else 0):
            token_end_index -= 1
        if not (offsets[token_start_index][0] <= start_char and offsets[token_end_index][1] >= end_char):
            tokenized["start_positions"].append(cls_index)
            tokenized["end_positions"].append(cls_index)
        else:
            while token_start_index < len(offsets) and offsets[token_start_index][0] <= start_char:
                token_start_index += 1
            tokenized["start_positions"].append(token_start_index - 1)
            while offsets[token_end_index][1] >= end_char:
                token_end_index -= 1
            tokenized["end_positions"].append(token_end_index + 1)
    return tokenized


def qa(tok, seq_len, doc_stride):
    rows = squad_examples()
    batch = {k: [r[k] for r in rows] for k in ("question", "context", "answers")}
    f = prepare_train_features(tok, batch, seq_len, doc_stride)
    return {"seq_len": seq_len, "doc_stride": doc_stride, "input_ids": f["input_ids"],
            "attention_mask": f["attention_mask"], "token_type_ids": f["token_type_ids"],
            "start_positions": f["start_positions"], "end_positions": f["end_positions"]}


def write_csv(path):
    buf = io.StringIO(newline="")
    w = csv.DictWriter(buf, fieldnames=["text", "text_pair", "label"], lineterminator="\r\n")
    w.writeheader()
    for e in CLASSIFICATION:
        w.writerow({"text": e["text"], "text_pair": e.get("text_pair", ""), "label": e["label"]})
    with open(path, "w", encoding="utf-8", newline="") as f:
        f.write(buf.getvalue())


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    bert, t5 = bert_tokenizer(), t5_tokenizer()
    config = {"architectures": ["BertForSequenceClassification"], "model_type": "bert",
              "id2label": {str(i): n for i, n in enumerate(LABELS)}, "label2id": {n: i for i, n in enumerate(LABELS)}}
    with open(os.path.join(args.out, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
        f.write("\n")
    with open(os.path.join(args.out, "cls.jsonl"), "w", encoding="utf-8") as f:
        for e in CLASSIFICATION:
            f.write(json.dumps(e, ensure_ascii=False) + "\n")
    write_csv(os.path.join(args.out, "cls.csv"))
    with open(os.path.join(args.out, "seq2seq.jsonl"), "w", encoding="utf-8") as f:
        for e in SEQ2SEQ:
            f.write(json.dumps(e, ensure_ascii=False) + "\n")
    with open(os.path.join(args.out, "squad.json"), "w", encoding="utf-8") as f:
        json.dump(SQUAD, f, ensure_ascii=False, indent=1)
        f.write("\n")
    with open(os.path.join(args.out, "squad.jsonl"), "w", encoding="utf-8") as f:
        for row in squad_examples():
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    # CSV rows have "" where the JSON lines have no text_pair: brigade reads an empty pair as none,
    # as datasets reads an empty CSV cell as a missing value, so both files make the same rows.
    expected = {"classification": classification(bert, 16),
                "seq2seq": seq2seq(t5, "summarize: ", 20, 6),
                "qa": qa(bert, 40, 8)}
    with open(os.path.join(args.out, "expected.json"), "w") as f:
        json.dump(expected, f)
        f.write("\n")


if __name__ == "__main__":
    main()
