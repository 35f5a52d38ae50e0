#!/usr/bin/env bash
# Every command's --help: each option line is "  --name[ META]", then at least two spaces, then its
# help text (a flag too long for the column must not run into its text).
set -uo pipefail
brigade=$1
source "$(dirname "$0")/shell_util.sh"

commands=$("$brigade" --help | awk '/^commands:/ { on = 1; next } on && /^  [a-z]/ { print $1 } on && /^$/ { exit }')
[[ -n $commands ]] && ok || bad "brigade --help lists no commands"
for c in $commands; do
  "$brigade" "$c" --help >"$tmp/help" 2>&1 || { bad "$c --help: exit $?"; continue; }
  lines=$(grep -c '^  --' "$tmp/help")
  ((lines > 0)) || [[ $c == config ]] || { bad "$c --help lists no options"; continue; }
  bad_lines=$(grep '^  --' "$tmp/help" | grep -Ev '^  --[a-z0-9-]+( [A-Z]+)?  +[^ ]')
  [[ -z $bad_lines ]] && ok || bad "$c --help: option lines without their column: $bad_lines"
done
grep -q -- '--handle-impossible-answer  question-answering' <("$brigade" pipeline --help) && ok ||
  bad "pipeline --help runs --handle-impossible-answer into its text"
finish
