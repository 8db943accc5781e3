# Sourced by gpu_check.sh and device_runs.sh: when $FEDLIB_DATA is unset and .carry/ holds gzipped data
# sets (.carry/<Name>/raw/*.gz, written by `gpu_check.sh --prepare-carry`), unpack them into the folder
# given as $1 and point $FEDLIB_DATA at it.
unpack_carry() {
  [ -z "${FEDLIB_DATA:-}" ] && ls .carry/*/raw/*.gz >/dev/null 2>&1 || return 0
  export FEDLIB_DATA=$1
  local f name out
  for f in .carry/*/raw/*.gz; do
    name=$(basename "$(dirname "$(dirname "$f")")")
    mkdir -p "$FEDLIB_DATA/$name/raw"
    out="$FEDLIB_DATA/$name/raw/$(basename "${f%.gz}")"
    [ -f "$out" ] || gunzip -c "$f" > "$out"
  done
}
