#!/usr/bin/env python3
"""Live tokenizer parity: `brigade tokenize` / `brigade detokenize` against the Python
`tokenizers` library on the fixture strings plus random strings, for any tokenizer folders.

    tools/.venv/bin/python tools/tokenizer_parity.py --brigade build/brigade \\
        --model tests/fixtures/tokenizers/* --model /path/to/hub/model --count 300 --seed 7

For every folder, every line's input_ids, tokens, offsets and attention_mask must equal
Python's Encoding (offsets in code points), and detokenize must equal Tokenizer.decode.
Prints "<folder>: N/M lines match" and a closing "N passed, N failed" line; exits non-zero on
any difference."""
import argparse
import json
import os
import random
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tokenizer_fixtures import TEST_STRINGS  # noqa: E402

from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, processors  # noqa: E402

# Characters random strings are drawn from: ASCII, Latin-1 and accents (composed and
# combining), Greek/Cyrillic, CJK, Hangul, kana, Indic and Arabic, emoji with modifiers and
# ZWJ, unusual spaces and format characters, fullwidth forms and ligatures.
POOL = (list("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789") * 4 +
        list(" " * 30) + list("\t\x0b\x0c\u00a0\u2003\u3000\u2028\u0085") +
        list(".,;:!?'\"()[]{}<>-_/\\@#$%^&*+=|~`") * 2 +
        list("éèêëàâäôöûüçñßÉÀÖÜİıσςΣ") + ["e\u0301", "a\u0308", "n\u0303", "\u0301", "\u0327"] +
        list("αβγδλμπΩжзийклмн") + list("中文字符测试日本語한국어のテキスト") +
        list("नमस्तेمرحباสวัสดี") +
        ["👍", "👍🏽", "👨\u200d👩\u200d👧", "🇫🇷", "❤️", "😀"] +
        list("\u200b\u200c\u200d\u00ad\ufeff\ufffd") + list("ﬁﬀＡＢ１２～…™①") +
        ["\x01", "\x1f", "\x7f"])

WORDS = ["hello", "world", "token", "Tokenizer", "data", "ing", "unbelievable", "don't", "I'm", "12345",
         "http://x.org/a?b=1", "café", "naïve", "中文", "supercalifragilisticexpialidocious" * 3,
         "नेपाल", "काठमाडौं", "भाषा", "“quoted”", "‘single’", "२०८०"]


def random_strings(rng, n, specials):
    out = []
    for _ in range(n):
        parts = []
        for _ in range(rng.randint(0, 12)):
            r = rng.random()
            if r < 0.45:
                parts.append(rng.choice(WORDS))
            elif r < 0.55 and specials:
                parts.append(rng.choice(specials))
            else:
                parts.append("".join(rng.choice(POOL) for _ in range(rng.randint(1, 6))))
            parts.append(rng.choice([" ", "", "  ", "\t", " "]))
        out.append("".join(parts))
    return out


def reference(folder):
    """The Python tokenizer brigade must equal for this folder."""
    tj = os.path.join(folder, "tokenizer.json")
    if os.path.isfile(tj):
        return Tokenizer.from_file(tj)
    if os.path.isfile(os.path.join(folder, "vocab.txt")):
        from tokenizers.implementations import BertWordPieceTokenizer
        lower = True
        cfg = os.path.join(folder, "tokenizer_config.json")
        if os.path.isfile(cfg):
            lower = json.load(open(cfg, encoding="utf-8")).get("do_lower_case", True)
        return BertWordPieceTokenizer(os.path.join(folder, "vocab.txt"), lowercase=lower)
    ref = Tokenizer(models.BPE.from_file(os.path.join(folder, "vocab.json"), os.path.join(folder, "merges.txt")))
    ref.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    ref.decoder = decoders.ByteLevel()
    ref.post_processor = processors.ByteLevel(trim_offsets=False)
    ref.add_special_tokens([AddedToken("<|endoftext|>", normalized=True)])
    return ref


def run(cmd, text):
    p = subprocess.run(cmd, input=text.encode("utf-8"), capture_output=True)
    if p.returncode != 0:
        raise RuntimeError("%s failed: %s" % (" ".join(cmd), p.stderr.decode("utf-8", "replace")))
    # split("\n"), not splitlines(): U+2028 and friends may stand raw inside JSON strings.
    return [json.loads(line) for line in p.stdout.decode("utf-8").split("\n") if line]


def check_folder(brigade, folder, lines, show):
    ref = reference(folder)
    text = "".join(line + "\n" for line in lines)
    got = run([brigade, "tokenize", "--model", folder], text)
    ok, bad = 0, []
    ids_lines = []
    for line, g in zip(lines, got):
        e = ref.encode(line)
        want = {"input_ids": e.ids, "tokens": e.tokens, "offsets": [list(o) for o in e.offsets],
                "attention_mask": e.attention_mask}
        ids_lines.append(json.dumps(e.ids))
        if g == want:
            ok += 1
        else:
            bad.append((line, want, g))
    decoded = run([brigade, "detokenize", "--model", folder], "".join(x + "\n" for x in ids_lines))
    for line, d in zip(lines, decoded):
        want = ref.decode(ref.encode(line).ids, skip_special_tokens=False)
        if d["text"] != want:
            bad.append((line, {"text": want}, d))
    total = len(lines) * 2
    if len(got) != len(lines) or len(decoded) != len(lines):
        bad.append(("<line count>", len(lines), (len(got), len(decoded))))
    passed = total - len(bad)
    print("%s: %d/%d checks match" % (folder, passed, total))
    for line, want, g in bad[:show]:
        print("  input %r" % (line,))
        if not isinstance(want, dict):
            print("    want %r, got %r" % (want, g))
            continue
        for key in want:
            if want[key] != g.get(key):
                print("    %s: want %s\n    %s  got  %s" % (key, json.dumps(want[key], ensure_ascii=False),
                                                         " " * len(key), json.dumps(g.get(key), ensure_ascii=False)))
    return passed, len(bad)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--brigade", required=True)
    ap.add_argument("--model", nargs="+", action="extend", required=True)
    ap.add_argument("--count", type=int, default=200)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--show", type=int, default=3)
    args = ap.parse_args()
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1 << 30)
    print("seed %d" % seed)
    specials = ["[CLS]", "[SEP]", "[MASK]", "<|endoftext|>", "<s>", "</s>", "<mask>", "<extra_id_0>", "<unk>"]
    passed = failed = 0
    for folder in args.model:
        rng = random.Random(seed)
        lines = [s for s in TEST_STRINGS if "\n" not in s and "\r" not in s]
        lines += random_strings(rng, args.count, specials)
        p, f = check_folder(args.brigade, folder, lines, args.show)
        passed += p
        failed += f
    print("%d passed, %d failed" % (passed, failed))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
