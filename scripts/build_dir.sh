# shellcheck shell=bash
# Sourced by the scripts that build: ensure_build_dir DIR [meson setup options...] configures
# DIR for this tree unless it already is. A build directory copied or moved with its tree
# (`cp -r` of a clone) still names the old tree in every rule, so ninja regenerates it against
# the old paths over and over and fails with a message about neither: such a directory is
# configured again here, saying so. Returns meson's status.
ensure_build_dir() {
  local dir=$1
  shift
  local info="$dir/meson-info/meson-info.json"
  local src
  src=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
  if [ -f "$info" ]; then
    local configured
    configured=$(/usr/bin/python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))["directories"]
print(d["source"] + "\n" + d["build"])' "$info" 2>/dev/null)
    local want_build
    want_build=$(cd "$dir" && pwd -P)
    if [ "$configured" != "$src"$'\n'"$want_build" ]; then
      echo "$dir was configured for another tree ($(echo "$configured" | head -1)): a copied or moved clone; configuring it again for $src" >&2
      rm -rf "$dir"
    fi
  fi
  [ -f "$dir/build.ninja" ] && return 0
  meson setup "$dir" "$src" "$@" >"$dir.setup.log" 2>&1 || { cat "$dir.setup.log" >&2; return 1; }
}
