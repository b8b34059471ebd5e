#!/usr/bin/env bash
# Make sure PostgreSQL and Redis answer on 127.0.0.1; install (as root) and start them if not.
set -euo pipefail

pg_up() { pg_isready -q -h 127.0.0.1 -p 5432 2>/dev/null; }
redis_up() { redis-cli -h 127.0.0.1 -p 6379 ping 2>/dev/null | grep -q PONG; }

if ! command -v pg_isready >/dev/null || ! command -v redis-server >/dev/null; then
  if [[ $(id -u) == 0 ]]; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql redis-server >/dev/null
  fi
fi
if ! pg_up; then
  echo "starting PostgreSQL"
  version=$(ls /etc/postgresql | sort -V | tail -1)
  pg_ctlcluster --skip-systemctl-redirect "$version" main start
  # Tests connect over TCP as postgres without a password (trust), as on the CI machine.
  hba=/etc/postgresql/$version/main/pg_hba.conf
  if ! grep -q "ibconsole-trust" "$hba"; then
    sed -i '1i host all all 127.0.0.1/32 trust # ibconsole-trust\nhost all all ::1/128 trust # ibconsole-trust' "$hba"
    pg_ctlcluster --skip-systemctl-redirect "$version" main reload
  fi
  for _ in $(seq 30); do pg_up && break; sleep 1; done
fi
if ! redis_up; then
  echo "starting Redis"
  mkdir -p /var/lib/redis /var/log/redis
  redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no \
    --dir /var/lib/redis --logfile /var/log/redis/ci.log
  for _ in $(seq 30); do redis_up && break; sleep 1; done
fi
pg_up || { echo "PostgreSQL is not reachable on 127.0.0.1:5432" >&2; exit 1; }
redis_up || { echo "Redis is not reachable on 127.0.0.1:6379" >&2; exit 1; }
