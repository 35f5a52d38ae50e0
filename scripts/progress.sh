# Progress of a long script (make fuzz, make bench), as brigade's commands show theirs: on a
# terminal one bar rewritten in place,
#   [=========>              ] 42/100 s  ETA 0:58  fuzz_tokenizer  1.2M inputs
# elsewhere (a log, a pipe) a plain line at most every BRIGADE_PROGRESS_INTERVAL seconds (10),
#   fuzz_tokenizer: 42/100 s  ETA 0:58  1.2M inputs
# Source it; progress_show LABEL DONE TOTAL UNIT START_EPOCH [EXTRA] prints to stderr,
# progress_end ends a bar's line. START_EPOCH is `date +%s` when the work began.

progress_interval=${BRIGADE_PROGRESS_INTERVAL:-10}
progress_last=0
progress_on_line=0

# H:MM:SS or M:SS.
progress_clock() {
  local s=$1
  if ((s >= 3600)); then printf '%d:%02d:%02d' $((s / 3600)) $((s % 3600 / 60)) $((s % 60))
  else printf '%d:%02d' $((s / 60)) $((s % 60)); fi
}

progress_show() {
  local label=$1 done=$2 total=$3 unit=$4 start=$5 extra=${6:-} now eta="" width=24 fill i bar=""
  now=$(date +%s)
  if ((done > 0 && total > 0 && done < total)); then
    eta=" ETA $(progress_clock $(((now - start) * (total - done) / done)))"
  fi
  if [ -t 2 ]; then
    fill=$((total > 0 ? done * width / total : 0))
    ((fill > width)) && fill=$width
    for ((i = 0; i < width; i++)); do
      if ((i < fill)); then bar+="="; elif ((i == fill)); then bar+=">"; else bar+=" "; fi
    done
    printf '\r[%s] %d/%d %s %s %s%s   ' "$bar" "$done" "$total" "$unit" "$eta" "$label" "${extra:+  $extra}" >&2
    progress_on_line=1
    return
  fi
  ((now - progress_last < progress_interval && done < total)) && return
  progress_last=$now
  printf '%s: %d/%d %s%s%s\n' "$label" "$done" "$total" "$unit" "$eta" "${extra:+  $extra}" >&2
}

progress_end() {
  ((progress_on_line)) && printf '\n' >&2
  progress_on_line=0
  progress_last=0
}
