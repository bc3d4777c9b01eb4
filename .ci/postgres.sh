#!/usr/bin/env bash
# Install (if needed) and start a throwaway PostgreSQL server on 127.0.0.1 for the store tests.
# Prints the SQLAlchemy URL to use on its last line. Usage: url=$(bash .ci/postgres.sh | tail -1)
set -euo pipefail
# A free loopback port unless one is given (another server may hold the usual ones).
port="${PARLEY_PG_PORT:-$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')}"
if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
  export DEBIAN_FRONTEND=noninteractive
  (apt-get update -qq && apt-get install -y -qq postgresql >/dev/null) >&2
fi
bin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
data=$(mktemp -d /tmp/parley-pg.XXXXXX)
chown postgres "$data"
# As root, the server runs as the postgres user, from a directory it may enter.
run() { if [ "$(id -u)" = 0 ]; then su postgres -s /bin/sh -c "cd / && $*"; else sh -c "$*"; fi; }
run "$bin/initdb -D $data -A trust -U postgres" >/dev/null
run "$bin/pg_ctl -D $data -l $data/server.log -w -o '-c listen_addresses=127.0.0.1 -p $port -k $data' start" >&2
run "$bin/createdb -h 127.0.0.1 -p $port -U postgres parley_test"
echo "postgresql+psycopg://postgres@127.0.0.1:$port/parley_test"
