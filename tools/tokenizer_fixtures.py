#!/usr/bin/env python3
"""Tokenizer fixtures: small tokenizers of every kind brigade implements, trained or built with
the Hugging Face `tokenizers` library (and SentencePiece, for a real precompiled charsmap), plus
what that library returns for a varied set of test strings.

    tools/.venv/bin/python tools/tokenizer_fixtures.py --out tests/fixtures/tokenizers --clean
    tools/.venv/bin/python tools/tokenizer_fixtures.py --out DIR --seed S --live   # fresh, for parity

writes one folder per tokenizer: its files (tokenizer.json, or vocab.txt / vocab.json +
merges.txt for the folder formats) and expected.json:

    {"cases": [{"text", "pair" (or null), "add_special_tokens", "ids", "tokens", "offsets",
                "type_ids", "attention_mask", "special_tokens_mask", "word_ids",
                "decoded", "decoded_skip"}, ...]}

plus "settings_cases" (the same fields under truncation/padding settings, "error": true where
the library refuses) for a few of them. Offsets are Python's (code points). Regenerating gives
identical files for the same library versions: the corpus is seeded, training runs on one
thread, and trainers whose results depend on hash-map order are not used (their vocabularies
are derived from a repeatable BPE training instead)."""
import argparse
import json
import os
import random
import shutil
import sys
import tempfile

os.environ.setdefault("RAYON_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers  # noqa: E402
from tokenizers import pre_tokenizers, processors, trainers  # noqa: E402

# ---- text ----------------------------------------------------------------------------------

# The strings every fixture is checked on: accents (composed and decomposed), CJK, emoji with
# ZWJ and flags, whitespace runs and tabs, URLs, numbers, very long words, literal special
# tokens, control and format characters, fullwidth forms and ligatures, other scripts.
TEST_STRINGS = [
    "Hello world",
    "Hello, world! How are you?!?",
    "  leading spaces",
    "a   b",
    "trailing  ",
    "\tTab\tseparated\t\tvalues",
    "line one\nline two\r\nthree",
    "don't I'M we've you'll she'd ’s",
    "12345 3.14159 1,000,000 2024-06-01 0x1F",
    "café naïve résumé Ünïcödé ÀÉÎÕÜ",
    "cafe\u0301 decomposed e\u0301 and n\u0303",
    "中文字符测试，日本語のテキスト。한국어 텍스트",
    "👨\u200d👩\u200d👧\u200d👦 family 🇫🇷 flag 👍🏽 thumbs",
    "http://example.com/path?q=1&b=2#frag user@example.org",
    "supercalifragilisticexpialidocious" * 4,
    "a" * 130,
    "[CLS] literal [SEP] tokens [MASK] and [UNK]",
    "text<|endoftext|>more text <|endoftext|>",
    "<s> starts and </s> ends <mask> masked <pad>",
    "<extra_id_0> sentinel.<extra_id_1>",
    "ctrl\x0bchars\u200bzero\u00adsoft\u2028sep\x7fdel\x1funit",
    "ﬁnancial ﬀ ligatures ＡＢＣ１２３ fullwidth ～ tilde",
    "İstanbul ΣΊΣΥΦΟΣ straße ǅ",
    "$5 + <3> = ^ ` | ~ € © ° §",
    "(parens) [brackets] {braces} hyphen-ated—dash…",
    "नमस्ते मराठी مرحبا بالعالم สวัสดีครับ",
    "mixedCASE CamelCase snake_case kebab-case",
    "",
    " ",
    "ends with punctuation.",
    "   ",
    "x",
]

PAIRS = [
    ("How are you?", "I am fine, thanks."),
    ("Short", "A much longer second sequence with café and 中文"),
]

BASE_CORPUS = [
    "The quick brown fox jumps over the lazy dog.",
    "Hello world, this is a small corpus for training tokenizers.",
    "Tokenizers split text into tokens; models read the token ids.",
    "Numbers like 12345, 3.14159 and 1,000,000 appear in text.",
    "Café, naïve, résumé and Ünïcödé have accents.",
    "中文字符测试。日本語のテキストです。한국어 텍스트입니다.",
    "Emoji 👍 and 👨‍👩‍👧‍👦 and 🇫🇷 are unicode too.",
    "Visit http://example.com/path?q=1 or write to user@example.org.",
    "don't can't won't I'm you're we've they'll she'd",
    "Tabs\tand  multiple   spaces appear in messy text.",
    "supercalifragilisticexpialidocious is a very long word.",
    "İstanbul, straße, ΣΊΣΥΦΟΣ and ǅ are case-mapping tests.",
    "Punctuation: (parens) [brackets] {braces} hyphen-ated—dash… $5 + <3> = ^ ` | ~ € ©",
    "नमस्ते दुनिया, مرحبا بالعالم, สวัสดีครับ",
    "mixedCASE CamelCase snake_case kebab-case identifiers",
    "Training data, evaluation data, and test data for models.",
]

WORDS = ("time person year way day thing man world life hand part child eye woman place work week case point "
         "government company number group problem fact tokenizer model training data text byte piece merge "
         "vocabulary unigram wordpiece encoding decoding normalization sentence language").split()


CORPUS_SEED = 1234  # --seed changes it: `make parity` trains fresh tokenizers each run


def corpus(lines=1200):
    """A pseudo-random corpus around BASE_CORPUS, the same for the same CORPUS_SEED."""
    rng = random.Random(CORPUS_SEED)
    out = list(BASE_CORPUS) * 3
    for _ in range(lines):
        n = rng.randint(3, 14)
        words = [rng.choice(WORDS) for _ in range(n)]
        if rng.random() < 0.3:
            words[0] = words[0].capitalize()
        if rng.random() < 0.2:
            words.append(str(rng.randint(0, 99999)))
        out.append(" ".join(words) + rng.choice([".", "!", "?", ",", ""]))
    return out


# ---- tokenizers -------------------------------------------------------------------------------

def alphabet():
    """Every character of the corpus, sorted: with it the trainers' character ids (and so
    their tie-breaks) no longer depend on hash-map order, which makes training repeatable."""
    return sorted(set("".join(corpus())))


BERT_SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def bert_template(tok):
    cls, sep = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    return processors.TemplateProcessing(single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
                                         special_tokens=[("[CLS]", cls), ("[SEP]", sep)])


def wordpiece_vocab(lowercase, size):
    """A WordPiece vocabulary: the library's WordPieceTrainer depends on hash-map order, so the
    pieces come from a (repeatable) BPE training instead, each also as a "##" continuation."""
    bpe = Tokenizer(models.BPE())
    bpe.normalizer = normalizers.BertNormalizer(lowercase=lowercase, strip_accents=None if lowercase else False)
    bpe.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    trainer = trainers.BpeTrainer(show_progress=False, vocab_size=size, special_tokens=[], initial_alphabet=alphabet())
    bpe.train_from_iterator(corpus(), trainer=trainer)
    pieces = [t for t, _ in sorted(bpe.get_vocab().items(), key=lambda kv: kv[1])]
    vocab = {}
    for t in BERT_SPECIALS + pieces + ["##" + p for p in pieces]:
        vocab.setdefault(t, len(vocab))
    return vocab


def train_wordpiece(normalizer, vocab_size=700, lowercase=True):
    tok = Tokenizer(models.WordPiece(wordpiece_vocab(lowercase, vocab_size), unk_token="[UNK]",
                                     max_input_chars_per_word=100))
    tok.normalizer = normalizer
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece(prefix="##")
    tok.add_special_tokens(BERT_SPECIALS)
    return tok


def bert_uncased():
    tok = train_wordpiece(normalizers.BertNormalizer(lowercase=True))
    tok.post_processor = bert_template(tok)
    return tok


def bert_cased():
    """Cased, accents kept, BertProcessing, added tokens with every matching flag."""
    tok = train_wordpiece(normalizers.BertNormalizer(lowercase=False, strip_accents=False), lowercase=False)
    tok.post_processor = processors.BertProcessing(("[SEP]", tok.token_to_id("[SEP]")),
                                                   ("[CLS]", tok.token_to_id("[CLS]")))
    tok.add_special_tokens([AddedToken("[MASK]", lstrip=True, rstrip=False, normalized=False)])
    tok.add_tokens([AddedToken("ing", single_word=True), AddedToken("Hello", normalized=True),
                    AddedToken("data", rstrip=True), AddedToken("<|endoftext|>", normalized=False)])
    return tok


def byte_level_bpe(add_prefix_space, vocab_size=1000):
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=add_prefix_space)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(show_progress=False, vocab_size=vocab_size, special_tokens=[], min_frequency=1,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(corpus(), trainer=trainer)
    return tok


def gpt2():
    tok = byte_level_bpe(False)
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    tok.add_special_tokens([AddedToken("<|endoftext|>", normalized=True)])
    return tok


def roberta():
    tok = byte_level_bpe(True)
    tok.add_special_tokens([AddedToken("<s>", normalized=False), AddedToken("<pad>", normalized=False),
                            AddedToken("</s>", normalized=False), AddedToken("<unk>", normalized=False),
                            AddedToken("<mask>", lstrip=True, normalized=False)])
    tok.post_processor = processors.RobertaProcessing(("</s>", tok.token_to_id("</s>")),
                                                      ("<s>", tok.token_to_id("<s>")), trim_offsets=True,
                                                      add_prefix_space=True)
    return tok


def bpe_suffix():
    """Classic (non byte-level) BPE: NFKC + lowercase, whitespace/digit/punctuation splitting,
    a continuing-subword prefix "##" and an end-of-word suffix "</w>", unk for unseen chars.
    The trainer is not repeatable with prefix/suffix, so the model is derived from a plain
    BPE training: every merge (a, b) in four forms, (a | ##a) + (##b | ##b</w>)."""
    plain = Tokenizer(models.BPE())
    norm = normalizers.Sequence([normalizers.NFKC(), normalizers.Lowercase()])
    pre = pre_tokenizers.Sequence([pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Digits(individual_digits=True),
                                   pre_tokenizers.Punctuation()])
    plain.normalizer, plain.pre_tokenizer = norm, pre
    letters = [c for c in alphabet() if c.isalnum()][:90]
    trainer = trainers.BpeTrainer(show_progress=False, vocab_size=300, initial_alphabet=letters,
                                  limit_alphabet=len(letters))
    plain.train_from_iterator(corpus(), trainer=trainer)
    model = json.loads(plain.to_str())["model"]
    vocab, merges = {"<unk>": 0}, []
    for t in sorted(model["vocab"], key=model["vocab"].get):
        for form in (t, "##" + t, t + "</w>", "##" + t + "</w>"):
            vocab.setdefault(form, len(vocab))
    for m in model["merges"]:
        a, b = m.split(" ") if isinstance(m, str) else m
        for left in (a, "##" + a):
            for right in ("##" + b, "##" + b + "</w>"):
                merges.append((left, right))
    tok = Tokenizer(models.BPE(vocab, merges, unk_token="<unk>", continuing_subword_prefix="##",
                               end_of_word_suffix="</w>", fuse_unk=True))
    tok.normalizer, tok.pre_tokenizer = norm, pre
    tok.decoder = decoders.BPEDecoder(suffix="</w>")
    return tok


def llama_like():
    """BPE with byte_fallback over Metaspace pieces, decoded with ByteFallback/Fuse/Strip."""
    tok = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    tok.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
    tok.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(),
                                     decoders.Strip(content=" ", left=1, right=0)])
    specials = ["<unk>", "<s>", "</s>"] + ["<0x%02X>" % b for b in range(256)]
    trainer = trainers.BpeTrainer(show_progress=False, vocab_size=900, special_tokens=specials,
                                  initial_alphabet=alphabet())
    tok.train_from_iterator(corpus(), trainer=trainer)
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", pair="<s> $A <s> $B:1",
                                                       special_tokens=[("<s>", tok.token_to_id("<s>"))])
    return tok


def unigram_t5(pieces):
    """T5-style Unigram over the SentencePiece pieces (the library's UnigramTrainer is not
    repeatable): Nmt + NFKC + Replace(" {2,}") normalizers, Metaspace, <extra_id_N> tokens."""
    extra = ["<extra_id_%d>" % i for i in range(3)]
    tok = Tokenizer(models.Unigram(pieces + [(e, 0.0) for e in extra], unk_id=2))
    tok.normalizer = normalizers.Sequence([normalizers.Nmt(), normalizers.NFKC(),
                                           normalizers.Replace(Regex(" {2,}"), " ")])
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always")
    tok.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always")
    tok.add_special_tokens(["<pad>", "</s>", "<unk>"] + extra)
    tok.post_processor = processors.TemplateProcessing(single="$A </s>", pair="$A </s> $B </s>",
                                                       special_tokens=[("</s>", 1)])
    return tok


# A small SentencePiece normalization rule set (source code points TAB target code points):
# fullwidth ASCII, ligatures, a two-character key, deletions, odd spaces; small enough that
# the committed charsmap stays a few KB.
def charsmap_rules():
    rules = []
    for c in range(0xFF01, 0xFF5E):  # fullwidth ! .. } -> ASCII (U+FF5E ～ left alone, as T5's map)
        rules.append(([c], [c - 0xFEE0]))
    rules += [([0xFB01], [0x66, 0x69]), ([0xFB00], [0x66, 0x66]), ([0xFB02], [0x66, 0x6C]),
              ([0x65, 0x301], [0xE9]), ([0x6E, 0x303], [0xF1]), ([0x2460], [0x31]), ([0x2122], [0x54, 0x4D]),
              ([0x200B], [0x20]), ([0x3000], [0x20]), ([0xA0], [0x20]), ([0x9], [0x20]), ([0xA], [0x20]),
              ([0xD], [0x20]), ([0xB], []), ([0xAD], []), ([0x2028], [0x20]), ([0x2026], [0x2E, 0x2E, 0x2E])]
    return rules


def unigram_precompiled(workdir, rule="tsv"):
    """A real SentencePiece Unigram model (custom charsmap) turned into tokenizer.json as
    transformers' SpmConverter does for T5: Precompiled normalizer, WhitespaceSplit +
    Metaspace, Metaspace decoder, `$A </s>`."""
    import sentencepiece as spm
    from sentencepiece import sentencepiece_model_pb2 as pb

    text = os.path.join(workdir, "corpus.txt")
    with open(text, "w", encoding="utf-8") as f:
        f.write("\n".join(corpus()) + "\n")
    tsv = os.path.join(workdir, "rules.tsv")
    with open(tsv, "w", encoding="utf-8") as f:
        for src, dst in charsmap_rules():
            f.write(" ".join("%X" % c for c in src) + "\t" + " ".join("%X" % c for c in dst) + "\n")
    prefix = os.path.join(workdir, "spm")
    norm = {"normalization_rule_tsv": tsv} if rule == "tsv" else {"normalization_rule_name": rule}
    spm.SentencePieceTrainer.train(input=text, model_prefix=prefix, vocab_size=500, model_type="unigram",
                                   hard_vocab_limit=False, character_coverage=0.9995, num_threads=1, **norm,
                                   pad_id=0, eos_id=1, unk_id=2, bos_id=-1, seed_sentencepiece_size=100000,
                                   minloglevel=2)
    proto = pb.ModelProto()
    with open(prefix + ".model", "rb") as f:
        proto.ParseFromString(f.read())
    vocab = [(p.piece, p.score) for p in proto.pieces]
    tok = Tokenizer(models.Unigram(vocab, unk_id=2))
    tok.normalizer = normalizers.Precompiled(proto.normalizer_spec.precompiled_charsmap)
    tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.WhitespaceSplit(),
                                                 pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always")])
    tok.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always")
    tok.add_special_tokens(["<pad>", "</s>", "<unk>"])
    tok.post_processor = processors.TemplateProcessing(single="$A </s>", pair="$A </s> $B </s>",
                                                       special_tokens=[("</s>", 1)])
    return tok, vocab


def components():
    """A hand-built tokenizer.json exercising the remaining components on the uncased BERT
    vocabulary: NFD + StripAccents + Lowercase + Strip, Split with a regex, Whitespace,
    CharDelimiterSplit-free punctuation merging, a WordPiece decoder without cleanup; file
    truncation and padding."""
    tok = train_wordpiece(normalizers.Sequence([normalizers.NFD(), normalizers.StripAccents(),
                                                normalizers.Lowercase(), normalizers.Strip()]), vocab_size=500)
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(r"\d+"), behavior="isolated"),
        pre_tokenizers.Punctuation(behavior="merged_with_previous"),
        pre_tokenizers.Whitespace(),
    ])
    tok.decoder = decoders.WordPiece(prefix="##", cleanup=False)
    tok.post_processor = bert_template(tok)
    # Matched (and decoded) in its normalized form "hello".
    tok.add_tokens([AddedToken("HeLLo", normalized=True)])
    tok.enable_truncation(max_length=24)
    tok.enable_padding(length=28, pad_id=tok.token_to_id("[PAD]"), pad_token="[PAD]")
    return tok


def splits_and_nfkd():
    """Split behaviours and inversions with NFKD/NFC normalizers over a WordLevel-free BPE."""
    tok = Tokenizer(models.BPE(unk_token="[UNK]"))
    tok.normalizer = normalizers.Sequence([normalizers.NFKD(), normalizers.NFC(),
                                           normalizers.Replace("``", '"'), normalizers.Strip(left=True, right=False)])
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(" ", behavior="merged_with_next"),
        pre_tokenizers.Split(Regex(r"[aeiou]"), behavior="contiguous", invert=True),
        pre_tokenizers.Digits(individual_digits=False),
    ])
    trainer = trainers.BpeTrainer(show_progress=False, vocab_size=600, special_tokens=["[UNK]"],
                                  initial_alphabet=alphabet())
    tok.train_from_iterator(corpus(), trainer=trainer)
    return tok


def wordlevel():
    """WordLevel over whole words (lowercased, NFD without marks), split on '-' and whitespace."""
    words = sorted({w for line in corpus() for w in line.lower().replace("-", " ").split()})
    vocab = {"<unk>": 0}
    for w in words[:400]:
        vocab.setdefault(w, len(vocab))
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.normalizer = normalizers.Sequence([normalizers.NFD(), normalizers.StripAccents(), normalizers.Lowercase()])
    tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.CharDelimiterSplit("-"),
                                                 pre_tokenizers.WhitespaceSplit()])
    tok.add_special_tokens(["<unk>"])
    return tok


def ctc_chars():
    """wav2vec2-style characters: FixedLength(1) pieces over a character WordLevel, the CTC
    decoder (repeats collapse, <pad> vanishes, "|" is the word delimiter)."""
    chars = sorted({c for line in corpus() for c in line.lower()} - {" "})
    vocab = {"<pad>": 0, "<unk>": 1, "|": 2}
    for c in chars:
        vocab.setdefault(c, len(vocab))
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.normalizer = normalizers.Sequence([normalizers.Lowercase(), normalizers.Replace(" ", "|")])
    tok.pre_tokenizer = pre_tokenizers.FixedLength(length=1)
    tok.decoder = decoders.CTC(pad_token="<pad>", word_delimiter_token="|", cleanup=True)
    tok.add_special_tokens(["<pad>", "<unk>"])
    return tok


# ---- expected results --------------------------------------------------------------------------

def expected_cases(tok, pairs=True):
    cases = []
    inputs = [(s, None) for s in TEST_STRINGS] + (PAIRS if pairs else [])
    # Without special tokens to add, add_special_tokens=False would repeat every case.
    adds = tok.post_processor is not None and tok.post_processor.num_special_tokens_to_add(True) > 0
    for text, pair in inputs:
        for add in ((True, False) if adds else (True,)):
            enc = tok.encode(text, pair, add_special_tokens=add)
            cases.append({
                "text": text, "pair": pair, "add_special_tokens": add,
                "ids": enc.ids, "tokens": enc.tokens, "offsets": [list(o) for o in enc.offsets],
                "type_ids": enc.type_ids, "attention_mask": enc.attention_mask,
                "special_tokens_mask": enc.special_tokens_mask,
                "word_ids": [-1 if w is None else w for w in enc.word_ids],
                "decoded": tok.decode(enc.ids, skip_special_tokens=False),
                "decoded_skip": tok.decode(enc.ids, skip_special_tokens=True),
            })
    return cases


# Truncation and padding settings (each case sets both, null = off), applied as
# enable_truncation / enable_padding would; "error" is true when `tokenizers` refuses.
SETTINGS = [
    ({"max_length": 6, "strategy": "longest_first", "direction": "right"}, None),
    ({"max_length": 9, "strategy": "longest_first", "direction": "left"}, None),
    ({"max_length": 8, "strategy": "only_first", "direction": "right"}, None),
    ({"max_length": 8, "strategy": "only_second", "direction": "right"}, None),
    ({"max_length": 3, "strategy": "only_first", "direction": "right"}, None),
    (None, {"length": 24, "direction": "right", "pad_to_multiple_of": None}),
    (None, {"length": None, "direction": "left", "pad_to_multiple_of": 8}),
    ({"max_length": 7, "strategy": "longest_first", "direction": "right"},
     {"length": 10, "direction": "left", "pad_to_multiple_of": None}),
]


def settings_cases(tok, pad_token, pad_id):
    cases = []
    inputs = [("Hello, world! How are you?!?", None), ("Tokenizers split text.", "A second, longer sequence here.")]
    inputs += PAIRS
    for trunc, pad in SETTINGS:
        for text, pair in inputs:
            tok.no_truncation()
            tok.no_padding()
            if trunc:
                tok.enable_truncation(trunc["max_length"], stride=0, strategy=trunc["strategy"],
                                      direction=trunc["direction"])
            if pad:
                tok.enable_padding(direction=pad["direction"], pad_id=pad_id, pad_type_id=0, pad_token=pad_token,
                                   length=pad["length"], pad_to_multiple_of=pad["pad_to_multiple_of"])
            padding = dict(pad, pad_token=pad_token, pad_id=pad_id) if pad else None
            case = {"text": text, "pair": pair, "add_special_tokens": True, "truncation": trunc, "padding": padding}
            try:
                enc = tok.encode(text, pair)
                case.update({"ids": enc.ids, "tokens": enc.tokens, "offsets": [list(o) for o in enc.offsets],
                             "type_ids": enc.type_ids, "attention_mask": enc.attention_mask,
                             "special_tokens_mask": enc.special_tokens_mask,
                             "word_ids": [-1 if w is None else w for w in enc.word_ids]})
            except Exception:  # noqa: BLE001 - the library's refusal is the expectation
                case["error"] = True
            cases.append(case)
    tok.no_truncation()
    tok.no_padding()
    # encode_special_tokens (transformers' split_special_tokens): special tokens typed in the
    # text are tokenized as text.
    tok.encode_special_tokens = True
    for text in [s for s in TEST_STRINGS if "[" in s or "<" in s]:
        enc = tok.encode(text)
        cases.append({"text": text, "pair": None, "add_special_tokens": True, "truncation": None, "padding": None,
                      "encode_special_tokens": True, "ids": enc.ids, "tokens": enc.tokens,
                      "offsets": [list(o) for o in enc.offsets], "type_ids": enc.type_ids,
                      "attention_mask": enc.attention_mask, "special_tokens_mask": enc.special_tokens_mask,
                      "word_ids": [-1 if w is None else w for w in enc.word_ids]})
    tok.encode_special_tokens = False
    return cases


def write_json(path, obj):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f, ensure_ascii=False, indent=None, separators=(",", ":"))
        f.write("\n")


def save(out, name, tok, pairs=True, pad=None, string_merges=False):
    """pad: (pad_token, pad_id) to also write truncation/padding cases. string_merges: write BPE
    merges in the older "a b" form (files from tokenizers < 0.20) instead of ["a", "b"] pairs;
    the expectations then come from the file as reloaded."""
    d = os.path.join(out, name)
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, "tokenizer.json")
    tok.save(path, pretty=False)
    if string_merges:
        with open(path, encoding="utf-8") as f:
            j = json.load(f)
        j["model"]["merges"] = [" ".join(m) for m in j["model"]["merges"]]
        with open(path, "w", encoding="utf-8") as f:
            json.dump(j, f, ensure_ascii=False, separators=(",", ":"))
        tok = Tokenizer.from_file(path)
    expected = {"cases": expected_cases(tok, pairs)}
    if pad:
        expected["settings_cases"] = settings_cases(tok, *pad)
    write_json(os.path.join(d, "expected.json"), expected)
    return d


def save_bert_folder(out, name, bert):
    """vocab.txt only (+ tokenizer_config.json), checked against tokenizers' BERT built from it."""
    from tokenizers.implementations import BertWordPieceTokenizer
    d = os.path.join(out, name)
    os.makedirs(d, exist_ok=True)
    vocab = sorted(bert.get_vocab().items(), key=lambda kv: kv[1])
    with open(os.path.join(d, "vocab.txt"), "w", encoding="utf-8") as f:
        f.write("".join(t + "\n" for t, _ in vocab))
    write_json(os.path.join(d, "tokenizer_config.json"), {"do_lower_case": True})
    ref = BertWordPieceTokenizer(os.path.join(d, "vocab.txt"), lowercase=True)
    write_json(os.path.join(d, "expected.json"), {"cases": expected_cases(ref)})


def save_gpt2_folder(out, name, bpe_tok):
    """vocab.json + merges.txt only, checked against GPT2Converter's pipeline built in Python."""
    d = os.path.join(out, name)
    os.makedirs(d, exist_ok=True)
    model = json.loads(bpe_tok.to_str())["model"]
    write_json(os.path.join(d, "vocab.json"), model["vocab"])
    with open(os.path.join(d, "merges.txt"), "w", encoding="utf-8") as f:
        f.write("#version: 0.2\n")
        for m in model["merges"]:
            f.write((m if isinstance(m, str) else " ".join(m)) + "\n")
    ref = Tokenizer(models.BPE.from_file(os.path.join(d, "vocab.json"), os.path.join(d, "merges.txt")))
    ref.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    ref.decoder = decoders.ByteLevel()
    ref.post_processor = processors.ByteLevel(trim_offsets=False)
    ref.add_special_tokens([AddedToken("<|endoftext|>", normalized=True)])
    write_json(os.path.join(d, "expected.json"), {"cases": expected_cases(ref)})


def generate(out, live=False):
    """live: also SentencePiece's full nmt_nfkc charsmap (T5's rules; ~300 KB, not committed)."""
    os.makedirs(out, exist_ok=True)
    bert = bert_uncased()
    save(out, "bert_uncased", bert, pad=("[PAD]", bert.token_to_id("[PAD]")))
    save(out, "bert_cased", bert_cased())
    save(out, "components", components())
    save_bert_folder(out, "bert_vocab_txt", bert)
    g = gpt2()
    save(out, "gpt2_bpe", g)
    save_gpt2_folder(out, "gpt2_files", g)
    rob = roberta()
    save(out, "roberta_bpe", rob, pad=("<pad>", rob.token_to_id("<pad>")), string_merges=True)
    save(out, "bpe_suffix", bpe_suffix())
    save(out, "llama_bytefallback", llama_like())
    save(out, "splits_nfkd", splits_and_nfkd())
    save(out, "wordlevel", wordlevel())
    save(out, "ctc_chars", ctc_chars())
    with tempfile.TemporaryDirectory() as work:
        spm_tok, pieces = unigram_precompiled(work)
    save(out, "unigram_precompiled", spm_tok)
    t5 = unigram_t5(pieces)
    save(out, "unigram_t5", t5, pad=("<pad>", 0))
    if live:
        with tempfile.TemporaryDirectory() as work:
            save(out, "unigram_nmt_nfkc", unigram_precompiled(work, rule="nmt_nfkc")[0])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True, help="folder for the fixture folders")
    ap.add_argument("--clean", action="store_true", help="remove --out first")
    ap.add_argument("--seed", type=int, default=None, help="corpus seed (default: the committed set's)")
    ap.add_argument("--live", action="store_true", help="add the (large) nmt_nfkc charsmap tokenizer")
    args = ap.parse_args()
    global CORPUS_SEED
    if args.seed is not None:
        CORPUS_SEED = args.seed
    if args.clean and os.path.isdir(args.out):
        shutil.rmtree(args.out)
    generate(args.out, live=args.live)
    print("wrote", args.out, file=sys.stderr)


if __name__ == "__main__":
    main()
