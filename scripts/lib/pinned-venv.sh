# Sourced by the check scripts that run a tool from PyPI.
#
# pinned_venv WHO DIR REQUIREMENT...: makes DIR a Python virtual environment holding exactly the
# pinned REQUIREMENTs (name==version), and keeps it when it already holds them all, so only the
# first run on a machine pays for the download. WHO prefixes the error message.
pinned_venv() {
  local who=$1 dir=$2 frozen requirement
  shift 2
  frozen=$("$dir/bin/pip" freeze --disable-pip-version-check 2>/dev/null || true)
  for requirement in "$@"; do
    if ! grep -qFxi -- "$requirement" <<<"$frozen"; then
      if ! python3 -m venv --clear "$dir"; then
        echo "$who: python3 -m venv failed; on Debian install python3-venv (apt-get install python3-venv)" >&2
        exit 2
      fi
      "$dir/bin/pip" install --quiet --disable-pip-version-check "$@"
      return
    fi
  done
}
