# Sourced by the tests that run brigade under mpirun (after shell_util.sh, with $brigade set).

# Why these tests cannot run mpirun here (printed), or nothing (status 1) when they can.
mpi_missing() {
  if ! command -v mpirun >/dev/null 2>&1; then
    echo "no mpirun (scripts/deps.sh installs Open MPI)"
  elif [[ $("$brigade" --version) == *"mpi: none"* ]]; then
    echo "$brigade was built without MPI (pkg-config finds no ompi-c)"
  else
    return 1
  fi
}

# Root needs Open MPI's consent; more ranks than cores need --oversubscribe; the ranks run
# several threads each (--bind-to none), and shared memory without cross-memory attach, which
# containers often forbid. In the sanitizer build, LeakSanitizer would report what Open MPI
# itself keeps at exit (from its dlopen'ed components, which no suppression can name); brigade's
# own leaks are the one-process tests' to find. UBSan and ASan's other checks stay on.
mpi_env() {
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  export OMPI_MCA_btl_vader_single_copy_mechanism=none
  export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
}

# mpi NP ARGS...: brigade ARGS under mpirun with NP ranks, given up after two minutes.
mpi() {
  local np=$1
  shift
  timeout 120 mpirun --oversubscribe --bind-to none -np "$np" "$brigade" "$@"
}

# For a test that is all under mpirun: skipped (exit 77) where it cannot run, else mpi_env.
mpi_require() {
  local why
  if why=$(mpi_missing); then
    echo "skipped: $why"
    exit 77
  fi
  mpi_env
}
