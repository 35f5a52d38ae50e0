#!/usr/bin/env bash
# The transformers 4.x side of tools/pipeline_fixtures.py: transformers v5 dropped the
# question-answering, summarization, text2text-generation and translation pipelines, and brigade
# follows the last 4.x release for them. This makes VENV4 (default tools/.venv4, git-ignored)
# holding transformers 4.57.6 with the huggingface-hub and tokenizers it requires (tokenizers
# 0.22: before 0.23's change to overflowing windows, which question answering's doc stride uses),
# and borrows torch, numpy and safetensors from the main venv VENV (default tools/.venv, made by
# `make parity` / tools/parity.sh) through a .pth file instead of installing torch twice.
#
#   tools/setup_venv4.sh [VENV [VENV4]]
#
# Prints the python of VENV4 last. Nothing is installed into VENV.
set -eu

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VENV=${1:-$ROOT/tools/.venv}
VENV4=${2:-$ROOT/tools/.venv4}
PINS=(transformers==4.57.6 huggingface-hub==0.36.2 tokenizers==0.22.2
      requests==2.32.5 urllib3==2.5.0 idna==3.10 certifi==2025.8.3 charset-normalizer==3.4.3)

if [ ! -x "$VENV/bin/python" ]; then
    echo "setup_venv4: $VENV/bin/python not found: create the main venv first (make parity, or" \
         "python3 -m venv $VENV && $VENV/bin/pip install -r tools/requirements.txt)" >&2
    exit 1
fi
if [ ! -x "$VENV4/bin/python" ]; then
    python3 -m venv "$VENV4"
fi
base_site=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
site4=$("$VENV4/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
# After VENV4's own packages on sys.path: what VENV4 installs wins over VENV's copies.
echo "$base_site" >"$site4/zz_brigade_main_venv.pth"
if ! "$VENV4/bin/python" -c 'import transformers, tokenizers, sys
sys.exit(transformers.__version__ != "4.57.6" or not tokenizers.__version__.startswith("0.22"))' 2>/dev/null; then
    # --no-deps: pip must not touch VENV's packages (it would uninstall its tokenizers 0.23).
    "$VENV4/bin/pip" install --disable-pip-version-check -q --no-deps "${PINS[@]}" >&2
fi
"$VENV4/bin/python" -c 'import torch, transformers, tokenizers
print("setup_venv4: transformers", transformers.__version__, "tokenizers", tokenizers.__version__,
      "torch", torch.__version__)' >&2
echo "$VENV4/bin/python"
