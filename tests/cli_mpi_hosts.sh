#!/usr/bin/env bash
# brigade over two hosts, on one machine: two network namespaces (the test's hosts, each with its
# own address and nothing else), joined by a veth pair. mpirun starts in the first, as one logs in
# to node 1, with a hostfile of the two addresses; its launch agent is a script that runs the
# command in the namespace owning the address it is given (`ip netns exec`) where a cluster would
# ssh. Open MPI may use its TCP transport only, on the veth subnet. GPT-2 trains pipelined,
# replicated and both across the hosts (a rank file too), and the final weights and optimizer
# state are the threads run's byte for byte; each rank's network namespace shows the ranks ran on
# the host mpirun placed them on. The namespaces, their links and whatever runs in them go on every
# exit path, a kill mid-way included (the last check kills a copy of this script and looks).
# Skipped (exit 77) where the test is not root, `ip netns` is refused, or mpirun or a brigade
# built with MPI is missing.
set -uo pipefail
brigade=$1
hold=${2:-} # --hold: set the hosts up, print their names, wait to be killed (the cleanup check)
here=$(cd "$(dirname "$0")" && pwd)
source "$here/shell_util.sh"

skip() {
  echo "skipped: $*"
  exit 77
}
((EUID == 0)) || skip "network namespaces need root (ip netns add)"
command -v ip >/dev/null 2>&1 || skip "no ip (scripts/deps.sh installs iproute2)"
source "$here/mpi_util.sh"
why=$(mpi_missing) && skip "$why"

# ---- the hosts ----
prefix="brigade-host-"
run_id=$prefix$$-$RANDOM
hosts=("$run_id-0" "$run_id-1")
addrs=(10.77.0.1 10.77.0.2)
subnet=10.77.0.0/24
made=()   # the namespaces this run created
job=      # the mpirun running now
cleanup() {
  local ns pid i
  if [[ -n $job ]]; then # timeout passes the TERM to mpirun, which ends its ranks and daemons
    kill -TERM "$job" 2>/dev/null
    for ((i = 0; i < 30; i++)); do kill -0 "$job" 2>/dev/null || break; sleep 0.1; done
  fi
  for ns in "${made[@]}"; do
    for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$pid" 2>/dev/null; done
    ip netns del "$ns" 2>/dev/null # its veth end goes with it, and the peer with that
  done
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 129' HUP
trap 'exit 130' INT
trap 'exit 143' TERM

# Hosts left by a run that was killed outright (SIGKILL leaves no trap to run): their pid is gone.
for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep "^${prefix}[0-9]*-[0-9]*-[01]$"); do
  pid=${ns#"$prefix"}
  pid=${pid%%-*}
  kill -0 "$pid" 2>/dev/null && continue
  for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$pid" 2>/dev/null; done
  ip netns del "$ns" 2>/dev/null
done

made+=("${hosts[0]}") # (listed first: a signal between the two leaves nothing unlisted)
err=$(ip netns add "${hosts[0]}" 2>&1) || skip "ip netns add is refused here: $err"
made+=("${hosts[1]}")
ip netns add "${hosts[1]}" || { bad "ip netns add ${hosts[1]}"; exit 1; }
err=$(ip netns exec "${hosts[0]}" true 2>&1) || skip "ip netns exec is refused here: $err"
# One cable between them, its ends made inside the namespaces (so no name can clash outside).
err=$(ip link add eth0 netns "${hosts[0]}" type veth peer name eth0 netns "${hosts[1]}" 2>&1) ||
  skip "no veth pair here (ip link add ... type veth): $err"
for i in 0 1; do
  ip -n "${hosts[i]}" addr add "${addrs[i]}/24" dev eth0 &&
    ip -n "${hosts[i]}" link set eth0 up && ip -n "${hosts[i]}" link set lo up || { bad "addressing ${hosts[i]}"; exit 1; }
done
net_of() { ip netns exec "$1" readlink /proc/self/ns/net; } # net:[inode], what each rank records

if [[ $hold == --hold ]]; then
  echo "${hosts[*]}"
  while :; do sleep 1 & wait $!; done
fi

# The launch agent: mpirun calls it as it would ssh, "AGENT HOST COMMAND...".
cat >"$tmp/agent" <<EOF
#!/usr/bin/env bash
while [[ \${1:-} == -* ]]; do shift; done # ssh-style options, none of them ours
case \$1 in
${addrs[0]}) ns=${hosts[0]} ;;
${addrs[1]}) ns=${hosts[1]} ;;
*) echo "agent: no test host \$1" >&2; exit 255 ;;
esac
shift
exec ip netns exec "\$ns" /bin/sh -c "\$*"
EOF
# Each rank notes its network namespace, then is brigade.
cat >"$tmp/rank" <<EOF
#!/usr/bin/env bash
readlink /proc/self/ns/net >"$tmp/net.\$OMPI_COMM_WORLD_RANK"
exec "$brigade" "\$@"
EOF
chmod +x "$tmp/agent" "$tmp/rank"
printf '%s slots=2\n' "${addrs[@]}" >"$tmp/hostfile"

mpi_env # (the hosts talk over TCP only: --mca btl tcp,self below)
# Ranks by node: rank r on host r % 2. In the background, so that a signal reaches the trap at once.
hosts_mpi() { # NP ARGS...
  local np=$1
  shift
  rm -f "$tmp"/net.*
  timeout 60 ip netns exec "${hosts[0]}" mpirun --hostfile "$tmp/hostfile" -np "$np" --map-by node --bind-to none \
    --mca plm_rsh_agent "$tmp/agent" --mca btl tcp,self \
    --mca btl_tcp_if_include "$subnet" --mca oob_tcp_if_include "$subnet" "$tmp/rank" "$@" &
  job=$!
  wait $job
  local rc=$?
  job=
  return $rc
}

# ---- the model, its layouts, and the threads runs ----
"$brigade" init --arch gpt2 --layers 2 --hidden 32 --heads 2 --vocab 256 --positions 16 --seed 2 \
  --output "$tmp/gpt2" >/dev/null || bad "init gpt2"
echo '{"ipus_per_replica": 2, "layers_per_ipu": [-1], "gradient_accumulation_steps": 2}' >"$tmp/pipeline.json"
echo '{"replication_factor": 2, "gradient_accumulation_steps": 2}' >"$tmp/replicas.json"
echo '{"ipus_per_replica": 2, "layers_per_ipu": [-1], "replication_factor": 2, "gradient_accumulation_steps": 3}' \
  >"$tmp/both.json"
printf '# the stage 0s on host 0, the stage 1s on host 1\nrank 0: 0 2\nrank 1: 1 3\n' >"$tmp/stages.ranks"
train_args() { # LAYOUT OUT: the command, in targs
  targs=(train --model "$tmp/gpt2" --ipu-config "$tmp/$1.json" --data builtin:reverse --rows 64 --micro-batch-size 2
    --lr 1e-3 --seed 4 --steps 3 --quiet --output "$2")
}
for layout in pipeline replicas both; do
  train_args "$layout" "$tmp/$layout-threads"
  "$brigade" "${targs[@]}" >/dev/null 2>"$tmp/err" ||
    bad "$layout threads: $(cat "$tmp/err")"
done

on_their_hosts() { # NAME NP: rank r ran in host r % 2's namespace
  local r want got
  for ((r = 0; r < $2; r++)); do
    want=$(net_of "${hosts[r % 2]}")
    got=$(cat "$tmp/net.$r" 2>/dev/null)
    [[ -n $want && $got == "$want" ]] && ok || bad "$1: rank $r ran in $got, not in host $((r % 2))'s $want"
  done
}

across_hosts() { # NAME LAYOUT NP [ARGS...]: trained over the hosts, the threads run's output
  local name=$1 layout=$2 np=$3 f
  shift 3
  local out=$tmp/$layout-np$np
  rm -rf "$out"
  train_args "$layout" "$out"
  if ! hosts_mpi "$np" "${targs[@]}" "$@" >"$tmp/out.txt" 2>&1; then
    bad "$name: mpirun failed: $(tail -5 "$tmp/out.txt")"
    return
  fi
  for f in model.safetensors checkpoint-3/optimizer.safetensors checkpoint-3/trainer_state.json; do
    cmp -s "$tmp/$layout-threads/$f" "$out/$f" && ok || bad "$name: $f differs from the threads run's"
  done
  on_their_hosts "$name" "$np"
}
started=$(date +%s)
across_hosts "2 stages, one per host" pipeline 2
across_hosts "2 replicas, one per host" replicas 2
across_hosts "2 x 2 over 4 ranks, 2 per host" both 4
across_hosts "2 x 2, a rank file: the stage 0s on host 0" both 2 --rank-file "$tmp/stages.ranks"
echo "four runs over the two hosts took $(($(date +%s) - started)) s"
[[ $(net_of "${hosts[0]}") != "$(net_of "${hosts[1]}")" ]] && ok || bad "the two hosts share a network namespace"

# ---- a kill mid-way leaves no host behind ----
bash "$0" "$brigade" --hold >"$tmp/held" 2>&1 &
holder=$!
for _ in $(seq 1 100); do
  [[ -s $tmp/held ]] && break
  sleep 0.05
done
read -r -a held <"$tmp/held"
if ((${#held[@]} != 2)); then
  bad "the held copy set up no hosts: $(cat "$tmp/held")"
  kill -KILL $holder 2>/dev/null
else
  kill -TERM $holder
  wait $holder
  for ns in "${held[@]}"; do
    ip netns list | grep -qw "$ns" && bad "killed, the copy left its host $ns behind" || ok
  done
fi

finish
