# Sourced by scripts/test and .ci/run.
#
#   step NAME COMMAND...     runs one step, announces it and records its time
#   in_background NAME COMMAND...
#                            starts a long step beside the ones that follow
#                            (its output kept until it is awaited)
#   await_background NAME    waits for it, prints its output, records it as a step
#
# When the script exits, passed or failed, background steps still running are
# stopped and the table of every step's time is printed.

_steps=()
_steps_started=$SECONDS
declare -A _bg_pid _bg_log _bg_started

step() {
  local name=$1 started=$SECONDS status=0
  shift
  echo "== $name"
  "$@" || status=$?
  _record "$name" $((SECONDS - started)) $status
  return $status
}

in_background() {
  local name=$1
  shift
  echo "== $name (started in the background)"
  _bg_log[$name]=$(mktemp)
  _bg_started[$name]=$SECONDS
  # A session of its own, so that stopping it stops everything it started.
  setsid "$@" >"${_bg_log[$name]}" 2>&1 &
  _bg_pid[$name]=$!
}

await_background() {
  local name=$1 status=0
  echo "== $name (awaited)"
  wait "${_bg_pid[$name]}" || status=$?
  cat "${_bg_log[$name]}"
  rm -f "${_bg_log[$name]}"
  unset "_bg_pid[$name]"
  _record "$name (in the background)" $((SECONDS - _bg_started[$name])) $status
  return $status
}

# Free space on the checkout's disk, in GiB: a build that fills the disk fails
# in ways that name no step, so every step records what it left.
_free_gib() {
  df -Pk . | awk 'NR == 2 { printf "%.1f", $4 / 1048576 }'
}

_record() {
  local failed=""
  [ "$3" -eq 0 ] || failed="  (FAILED, exit $3)"
  _steps+=("$(printf '%6ds  %6sG free  %s%s' "$2" "$(_free_gib)" "$1" "$failed")")
}

_finish() {
  local status=$? pid
  for pid in "${_bg_pid[@]}"; do kill -- "-$pid" 2>/dev/null || true; done
  echo
  echo "== step times (${_steps_title:-steps})"
  local line
  for line in "${_steps[@]}"; do echo "$line"; done
  printf '%6ds  %6sG free  total\n' $((SECONDS - _steps_started)) "$(_free_gib)"
  return $status
}
trap _finish EXIT
