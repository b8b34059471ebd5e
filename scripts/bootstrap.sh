#!/usr/bin/env bash
# Idempotent setup: Debian packages (when root), the virtualenv, Python and npm dependencies, and
# the frontend build. Re-running it only does what changed. `--test` adds what the tests need.
set -euo pipefail
cd "$(dirname "$0")/.."

want_test=0
[[ "${1:-}" == "--test" ]] && want_test=1

say() { printf '\033[1m==> %s\033[0m\n' "$*"; }

# --- Debian packages ------------------------------------------------------------------------
debs=(opensm ibsim-utils infiniband-diags ipmitool)  # ipmitool: the IPMI BMC driver (console.power.drivers.ipmi)
python3 -c 'import ensurepip, venv' 2>/dev/null || debs+=(python3-venv)
command -v cc >/dev/null || debs+=(gcc libc6-dev)  # the MAD helper's C loop (madpipe.c)
debs+=(libldap2-dev libsasl2-dev)  # the ldap extra (sign-in through a directory) builds python-ldap against them
# browser tests; a real Prometheus; a real slurmctld (munge: Debian's Slurm default auth); a real LDAP server
(( want_test )) && debs+=(chromium prometheus slurmctld slurm-client munge slapd ldap-utils)
missing=()
for pkg in "${debs[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if (( ${#missing[@]} )); then
  if [[ $(id -u) == 0 ]]; then
    say "installing Debian packages: ${missing[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  else
    echo "NOTE: the lab fabric needs Debian packages this user cannot install. Run:"
    echo "    sudo apt-get install -y ${missing[*]}"
    echo "The console still starts; lab features stay unavailable until then."
  fi
fi

# --- Python ---------------------------------------------------------------------------------
if [[ ! -x .venv/bin/python ]]; then
  say "creating .venv"
  python3 -m venv .venv
fi
stamp=.venv/.installed
extras=dev
# the ldap extra needs libldap2-dev and libsasl2-dev to build; without them the console runs
# with local accounts only
dpkg-query -W -f='${Status}' libldap2-dev 2>/dev/null | grep -q "install ok installed" && extras=dev,ldap
want=$( (cat pyproject.toml constraints.txt; echo "$extras") | sha256sum | cut -c1-16)
if [[ ! -f $stamp || $(cat $stamp) != "$want" ]]; then
  say "installing Python dependencies (pinned by constraints.txt)"
  .venv/bin/python -m pip install -q --upgrade pip
  .venv/bin/python -m pip install -q -c constraints.txt -e ".[$extras]"
  # Test-only: networking_mlnx_baremetal.ufmclient, a real UFM client (tests/ufm). Its declared
  # dependencies are neutron's whole stack; the client module needs only requests, six and pbr.
  .venv/bin/python -m pip install -q --no-deps -c constraints.txt networking-mlnx-baremetal
  echo "$want" > $stamp
fi

# --- frontend -------------------------------------------------------------------------------
source scripts/node.sh
ensure_node
if [[ ! -d frontend/node_modules || frontend/package-lock.json -nt frontend/node_modules/.package-lock.json ]]; then
  say "installing npm dependencies"
  (cd frontend && npm ci --no-audit --no-fund --loglevel=error)
fi
# The build generates the API types (frontend/src/generated/) from docs/openapi.yaml first: the
# schema is an input, the generated file (rewritten by every type check) is not.
frontend_inputs=(frontend/src frontend/index.html frontend/vite.config.ts frontend/tsconfig.json frontend/package.json
                 frontend/package-lock.json docs/openapi.yaml)
if [[ ! -f console/web/dist/manifest.json ]] || [[ -n $(find "${frontend_inputs[@]}" -newer console/web/dist/manifest.json \
      -not -path 'frontend/src/generated/*' 2>/dev/null | head -1) ]]; then
  say "building the frontend"
  (cd frontend && npm run --silent build >/dev/null)
fi
# --- the MAD helper's C loop ---------------------------------------------------------------
# (optional: without it the helper runs the same loop in Python, about 40 % more CPU per MAD)
madpipe=console/fabric/diags/madpipe.c
madpipe_so=console/fabric/diags/_madpipe.so
if [[ ! -f $madpipe_so || $madpipe -nt $madpipe_so ]]; then
  if command -v cc >/dev/null; then
    say "building the MAD helper's C loop"
    cc -O2 -Wall -shared -fPIC -o "$madpipe_so" "$madpipe"
  else
    echo "NOTE: no C compiler: the MAD helper runs its Python loop (apt-get install gcc libc6-dev)."
  fi
fi
mkdir -p var
