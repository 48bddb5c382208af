#!/usr/bin/env bash
# The servers the store tests run against: Redis, PostgreSQL, MariaDB.
#
#   scripts/services.sh start-system   (CI) checks that the machine's own instances answer on
#                                      their standard ports and starts any that is down.
#   source scripts/services.sh; ensure_services
#                                      (scripts/test.sh) exports LOCK_STORE_REDIS_URL,
#                                      LOCK_STORE_POSTGRES_URL and LOCK_STORE_MYSQL_URL. A URL
#                                      already set is used as it is (and must answer). Otherwise
#                                      the local instance on the standard port is used if it
#                                      answers; if not, a throwaway instance is started on its
#                                      own port with its data under target/services (installing
#                                      Debian's package first if the server is missing), and
#                                      stopped by stop_services. A user's own databases are
#                                      never started, stopped or written outside the tests'
#                                      own namespaces.
#   LOCK_STORE_THROWAWAY=1             always use throwaway instances (to test this script).
# ensure_services also installs Debian's faketime if missing (the fault suite's clock offsets).

SERVICES_DIR="${SERVICES_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/target/services}"
THROWAWAY_STARTED=()

redis_answers() { redis-cli -h 127.0.0.1 -p "$1" ping 2>/dev/null | grep -q PONG; }
postgres_answers() { pg_isready -q -h 127.0.0.1 -p "$1" 2>/dev/null; }
mariadb_answers() { mariadb-admin --protocol=tcp -h 127.0.0.1 -P "$1" -uroot ping >/dev/null 2>&1; }

wait_for() { # wait_for SECONDS COMMAND...
  local deadline=$((SECONDS + $1)); shift
  until "$@"; do
    [ "$SECONDS" -lt "$deadline" ] || return 1
    sleep 0.2
  done
}

as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

install_packages() { # install_packages DEBIAN-PACKAGE... (only when its server is missing)
  echo "services: installing Debian packages: $*"
  as_root apt-get update -qq
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq "$@" >/dev/null
  # Debian starts the services it installs; those are the machine's, not ours: leave them.
}

start_system() {
  if ! redis_answers 6379; then
    echo "services: starting Redis"
    mkdir -p /var/lib/redis /var/log/redis
    redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no \
      --dir /var/lib/redis --logfile /var/log/redis/ci.log
  fi
  if ! postgres_answers 5432; then
    echo "services: starting PostgreSQL"
    pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql)" main start
  fi
  if ! mariadb_answers 3306; then
    echo "services: starting MariaDB"
    start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd
  fi
  wait_for 60 redis_answers 6379 || { echo "services: Redis does not answer on 6379" >&2; return 1; }
  wait_for 60 postgres_answers 5432 || { echo "services: PostgreSQL does not answer on 5432" >&2; return 1; }
  wait_for 60 mariadb_answers 3306 || { echo "services: MariaDB does not answer on 3306" >&2; return 1; }
  echo "services: Redis, PostgreSQL and MariaDB answer"
}

throwaway_redis() {
  command -v redis-server >/dev/null || install_packages redis-server
  local dir="$SERVICES_DIR/redis" port=16379
  mkdir -p "$dir"
  redis_answers "$port" || redis-server --daemonize yes --bind 127.0.0.1 --port "$port" --save "" \
    --appendonly no --dir "$dir" --pidfile "$dir/redis.pid" --logfile "$dir/redis.log"
  wait_for 30 redis_answers "$port" || { echo "services: throwaway Redis did not start" >&2; return 1; }
  THROWAWAY_STARTED+=("redis-cli -p $port shutdown nosave")
  export LOCK_STORE_REDIS_URL="redis://127.0.0.1:$port"
}

throwaway_postgres() {
  ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || install_packages postgresql
  local bin dir="$SERVICES_DIR/postgres" port=15432 run=()
  bin="$(dirname "$(ls /usr/lib/postgresql/*/bin/initdb | sort -V | tail -1)")"
  mkdir -p "$dir"
  if [ "$(id -u)" -eq 0 ]; then
    # PostgreSQL refuses to run as root: its files belong to the postgres user.
    chown -R postgres "$dir"
    run=(runuser -u postgres --)
  fi
  [ -f "$dir/data/PG_VERSION" ] || "${run[@]}" "$bin/initdb" -D "$dir/data" -A trust -U postgres >"$dir/initdb.log" 2>&1
  postgres_answers "$port" || "${run[@]}" "$bin/pg_ctl" -s -D "$dir/data" -l "$dir/postgres.log" \
    -o "-p $port -k $dir -c listen_addresses=127.0.0.1" start
  wait_for 30 postgres_answers "$port" || { echo "services: throwaway PostgreSQL did not start" >&2; return 1; }
  psql -h 127.0.0.1 -p "$port" -U postgres -Atc "SELECT 1 FROM pg_database WHERE datname = 'test'" | grep -q 1 ||
    psql -h 127.0.0.1 -p "$port" -U postgres -qc "CREATE DATABASE test"
  THROWAWAY_STARTED+=("${run[*]} $bin/pg_ctl -s -D $dir/data -m fast stop")
  export LOCK_STORE_POSTGRES_URL="postgres://postgres@127.0.0.1:$port/test"
}

throwaway_mariadb() {
  command -v mariadbd >/dev/null || [ -x /usr/sbin/mariadbd ] || install_packages mariadb-server
  local dir="$SERVICES_DIR/mariadb" port=13306 user
  user="$(id -un)"
  mkdir -p "$dir"
  [ -d "$dir/data/mysql" ] || mariadb-install-db --no-defaults --datadir="$dir/data" --user="$user" \
    --auth-root-authentication-method=normal >"$dir/install.log" 2>&1
  if ! mariadb_answers "$port"; then
    /usr/sbin/mariadbd --no-defaults --datadir="$dir/data" --port="$port" --bind-address=127.0.0.1 \
      --socket="$dir/mariadb.sock" --pid-file="$dir/mariadb.pid" --user="$user" \
      --log-error="$dir/mariadb.log" >/dev/null 2>&1 &
  fi
  wait_for 60 mariadb_answers "$port" || { echo "services: throwaway MariaDB did not start" >&2; return 1; }
  mariadb --protocol=tcp -h 127.0.0.1 -P "$port" -uroot -e "CREATE DATABASE IF NOT EXISTS test"
  THROWAWAY_STARTED+=("mariadb-admin --protocol=tcp -h 127.0.0.1 -P $port -uroot shutdown")
  export LOCK_STORE_MYSQL_URL="mysql://root@127.0.0.1:$port/test"
}

# Exports the three URLs (see the top of this file).
ensure_services() {
  local throwaway="${LOCK_STORE_THROWAWAY:-0}"
  # The fault suite runs a standby whose clock is off this machine's (tests/jepsen.rs).
  command -v faketime >/dev/null || install_packages faketime
  if [ -z "${LOCK_STORE_REDIS_URL:-}" ]; then
    if [ "$throwaway" != 1 ] && redis_answers 6379; then
      export LOCK_STORE_REDIS_URL="redis://127.0.0.1:6379"
    else
      throwaway_redis
    fi
  fi
  if [ -z "${LOCK_STORE_POSTGRES_URL:-}" ]; then
    if [ "$throwaway" != 1 ] && postgres_answers 5432; then
      export LOCK_STORE_POSTGRES_URL="postgres://postgres@127.0.0.1:5432/test"
    else
      throwaway_postgres
    fi
  fi
  if [ -z "${LOCK_STORE_MYSQL_URL:-}" ]; then
    if [ "$throwaway" != 1 ] && mariadb_answers 3306; then
      export LOCK_STORE_MYSQL_URL="mysql://root@127.0.0.1:3306/test"
    else
      throwaway_mariadb
    fi
  fi
  echo "services: $LOCK_STORE_REDIS_URL $LOCK_STORE_POSTGRES_URL $LOCK_STORE_MYSQL_URL"
}

# Stops the throwaway instances this shell started (never a machine's own).
stop_services() {
  local stop
  for stop in "${THROWAWAY_STARTED[@]}"; do
    eval "$stop" >/dev/null 2>&1 || true
  done
  THROWAWAY_STARTED=()
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  set -euo pipefail
  case "${1:-}" in
    start-system) start_system ;;
    *) echo "usage: scripts/services.sh start-system   (or source it and call ensure_services)" >&2; exit 2 ;;
  esac
fi
