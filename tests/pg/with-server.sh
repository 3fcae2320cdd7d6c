#!/usr/bin/env bash
# Runs a command with a PostgreSQL server answering at INBOXLOG_TEST_PG.
#
#   tests/pg/with-server.sh COMMAND [ARG...]
#
# When a server already answers at INBOXLOG_TEST_PG (default
# postgresql://postgres@127.0.0.1:5432/test), COMMAND just runs. Otherwise (a fresh
# machine): Debian's postgresql package is installed with apt-get when this runs as root
# and it is missing, a throwaway cluster is made with initdb in a temp dir (trust auth,
# a free port on 127.0.0.1, run as the `postgres` user, or `nobody`, when root: initdb
# refuses root), COMMAND runs with INBOXLOG_TEST_PG pointing at it and
# INBOXLOG_TEST_PG_RESTART set to the command that restarts it, and the cluster is
# stopped and removed afterwards, whatever COMMAND's outcome (which is this script's).
set -euo pipefail

url="${INBOXLOG_TEST_PG:-postgresql://postgres@127.0.0.1:5432/test}"

# host and port of the URL (IPv4/name only; a socket URL is taken as answering).
read -r host port < <(python3 - "$url" <<'PY'
import sys, urllib.parse
u = urllib.parse.urlsplit(sys.argv[1])
print(u.hostname or "localhost", u.port or 5432)
PY
)

answers() {
    if command -v pg_isready >/dev/null; then
        pg_isready -q -h "$1" -p "$2" -t 2
    else
        timeout 2 bash -c "exec 3<>/dev/tcp/$1/$2" 2>/dev/null
    fi
}

if answers "$host" "$port"; then
    export INBOXLOG_TEST_PG="$url"
    exec "$@"
fi

echo "with-server: nothing answers at $host:$port; starting a throwaway PostgreSQL cluster" >&2

bindir() { ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1; }
if [ -z "$(bindir)" ] || [ ! -x "$(bindir)/initdb" ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        echo "with-server: installing Debian's postgresql package" >&2
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
    fi
fi
bin="$(bindir)"
if [ -z "$bin" ] || [ ! -x "$bin/initdb" ]; then
    echo "with-server: no PostgreSQL server binaries (install the postgresql package)" >&2
    exit 1
fi

as_owner=()
owner="$(id -un)"
if [ "$(id -u)" = 0 ]; then
    owner=postgres
    id postgres >/dev/null 2>&1 || owner=nobody
    as_owner=(runuser -u "$owner" --)
fi

work="$(mktemp -d /tmp/inboxlog-pg.XXXXXX)"
chmod 755 "$work"
mkdir "$work/data"
chown "$owner" "$work/data" 2>/dev/null || true
free_port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
opts="-p $free_port -k $work/data -c listen_addresses=127.0.0.1 -c fsync=on"

stop() {
    "${as_owner[@]}" "$bin/pg_ctl" -D "$work/data" -m immediate -w stop >/dev/null 2>&1 || true
    rm -rf "$work"
}
trap stop EXIT

"${as_owner[@]}" "$bin/initdb" -D "$work/data" -A trust -U postgres -E UTF8 --no-sync >/dev/null
"${as_owner[@]}" "$bin/pg_ctl" -D "$work/data" -o "$opts" -l "$work/data/server.log" -w start >/dev/null
"${as_owner[@]}" "$bin/createdb" -h 127.0.0.1 -p "$free_port" -U postgres test

export INBOXLOG_TEST_PG="postgresql://postgres@127.0.0.1:$free_port/test"
export INBOXLOG_TEST_PG_RESTART="${as_owner[*]} $bin/pg_ctl -D $work/data -o '$opts' -l $work/data/server.log -w restart"
export PATH="$bin:$PATH"
echo "with-server: INBOXLOG_TEST_PG=$INBOXLOG_TEST_PG" >&2
set +e
"$@"
status=$?
exit "$status"
