# Shared by the shell tests (cli_*.sh, bench_report.sh); source it. A scratch folder $tmp that
# goes away on exit, pass/fail counting, and the checks the CLI tests make of a command.

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
passed=0 failed=0

ok() { passed=$((passed + 1)); }
bad() { failed=$((failed + 1)); echo "FAIL: $*" >&2; }

# expect_fail NAME CODE NEEDLE CMD...: exits with CODE (any non-zero status for "any"), and
# stderr is one line that mentions NEEDLE.
expect_fail() {
  local name=$1 code=$2 needle=$3
  shift 3
  local err rc
  err=$("$@" 2>&1 >/dev/null)
  rc=$?
  if [[ $code == any ]] && ((rc == 0)); then bad "$name: exit 0 ($err)"; return; fi
  if [[ $code != any ]] && ((rc != code)); then bad "$name: exit $rc, wanted $code ($err)"; return; fi
  if ! grep -qF -- "$needle" <<<"$err"; then bad "$name: message '$err' lacks '$needle'"; return; fi
  if (($(wc -l <<<"$err") != 1)); then bad "$name: more than one line: $err"; return; fi
  ok
}

# expect_ok NAME CMD...: exit 0; stdout and stderr land in $tmp/out.txt.
expect_ok() {
  local name=$1
  shift
  if "$@" >"$tmp/out.txt" 2>&1; then ok; else bad "$name: $(cat "$tmp/out.txt")"; fi
}

# expect_out NAME NEEDLE CMD...: exit 0 and stdout (kept in $tmp/out.txt) holds NEEDLE.
expect_out() {
  local name=$1 needle=$2
  shift 2
  if ! "$@" >"$tmp/out.txt" 2>"$tmp/err.txt"; then bad "$name: $(cat "$tmp/err.txt")"; return; fi
  if grep -qF -- "$needle" "$tmp/out.txt"; then ok; else bad "$name: output lacks '$needle': $(head -c 600 "$tmp/out.txt")"; fi
}

# The summary line, and the exit status of the test.
finish() {
  echo "$passed passed, $failed failed"
  ((failed == 0))
}
