#!/usr/bin/env bash
# A throwaway PostgreSQL for tests: initdb into a temporary folder, pg_ctl start on a free port,
# trust auth, a database `test`; stop removes the folder again.
#
# Sourced (as .ci/run does), it defines:
#   pg_answers HOST PORT       exit status 0 when a server answers there
#   pg_throwaway_start [PORT]  starts one (on PORT, else a free port) and exports
#                              PG_THROWAWAY_DIR, PG_THROWAWAY_PORT, PG_THROWAWAY_URL
#   pg_throwaway_stop          stops it and removes its folder (safe to call twice)
# Run as a script:
#   scripts/pg_throwaway.sh start [PORT]   prints export lines for the shell to eval
#   scripts/pg_throwaway.sh stop DIR       stops the server whose folder is DIR
#
# initdb refuses to run as root, so as root the server runs as PG_THROWAWAY_USER, else the
# `postgres` user if there is one, else `nobody`; the folder is owned by that user.

_pg_bindir() {
    local initdb
    initdb=$(command -v initdb) || { echo "pg_throwaway: initdb is not on PATH" >&2; return 1; }
    dirname "$(readlink -f "$initdb")"
}

_pg_user() {  # the unprivileged user a root shell runs the server as
    if [ -n "${PG_THROWAWAY_USER:-}" ]; then
        echo "$PG_THROWAWAY_USER"
    elif id -u postgres >/dev/null 2>&1; then
        echo postgres
    else
        echo nobody
    fi
}

_pg_as_owner() {  # runs "$@" as the server's user
    if [ "$(id -u)" -eq 0 ]; then
        (cd / && runuser -u "$(_pg_user)" -- "$@")
    else
        "$@"
    fi
}

pg_answers() {
    local host=$1 port=$2 bindir
    bindir=$(_pg_bindir 2>/dev/null) || bindir=""
    if [ -n "$bindir" ] && [ -x "$bindir/pg_isready" ]; then
        "$bindir/pg_isready" -q -h "$host" -p "$port" -t 3
    elif command -v pg_isready >/dev/null 2>&1; then
        pg_isready -q -h "$host" -p "$port" -t 3
    else
        "${PYTHON:-python3}" - "$host" "$port" <<'EOF'
import socket, sys
try:
    socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=3).close()
except OSError:
    sys.exit(1)
EOF
    fi
}

_pg_free_port() {
    "${PYTHON:-python3}" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

pg_throwaway_start() {
    local port=${1:-} bindir dir
    bindir=$(_pg_bindir) || return 1
    [ -n "$port" ] || port=$(_pg_free_port)
    if pg_answers 127.0.0.1 "$port"; then
        echo "pg_throwaway: port $port is taken" >&2
        return 1
    fi
    dir=$(mktemp -d "${TMPDIR:-/tmp}/pg_throwaway.XXXXXX")
    chmod 755 "$dir"
    if [ "$(id -u)" -eq 0 ]; then
        chown "$(_pg_user)" "$dir"
    fi
    export PG_THROWAWAY_DIR=$dir PG_THROWAWAY_PORT=$port
    export PG_THROWAWAY_URL="postgresql://postgres@127.0.0.1:$port/test"
    if ! _pg_as_owner "$bindir/initdb" -D "$dir/data" -U postgres -A trust -E UTF8 --locale=C --no-sync \
            >"$dir/initdb.log" 2>&1; then
        cat "$dir/initdb.log" >&2
        echo "pg_throwaway: initdb failed (log above)" >&2
        return 1
    fi
    if ! _pg_as_owner "$bindir/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 start \
            -o "-p $port -k $dir -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off" \
            >/dev/null; then
        cat "$dir/server.log" >&2
        echo "pg_throwaway: the server did not start (log above)" >&2
        return 1
    fi
    _pg_as_owner "$bindir/createdb" -h 127.0.0.1 -p "$port" -U postgres test
    echo "pg_throwaway: PostgreSQL on 127.0.0.1:$port, data in $dir" >&2
}

pg_throwaway_stop() {
    local dir=${1:-${PG_THROWAWAY_DIR:-}} bindir
    [ -n "$dir" ] && [ -d "$dir" ] || return 0
    bindir=$(_pg_bindir) || return 1
    if [ -f "$dir/data/postmaster.pid" ]; then
        _pg_as_owner "$bindir/pg_ctl" -D "$dir/data" -m fast -w -t 30 stop >/dev/null || true
    fi
    rm -rf "$dir"
    if [ "${PG_THROWAWAY_DIR:-}" = "$dir" ]; then
        unset PG_THROWAWAY_DIR PG_THROWAWAY_PORT PG_THROWAWAY_URL
    fi
    echo "pg_throwaway: stopped, $dir removed" >&2
    return 0
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
    set -euo pipefail
    case "${1:-}" in
        start)
            pg_throwaway_start "${2:-}"
            printf 'export PG_THROWAWAY_DIR=%q PG_THROWAWAY_PORT=%q PG_THROWAWAY_URL=%q\n' \
                "$PG_THROWAWAY_DIR" "$PG_THROWAWAY_PORT" "$PG_THROWAWAY_URL"
            ;;
        stop)
            pg_throwaway_stop "${2:?usage: $0 stop DIR}"
            ;;
        *)
            echo "usage: $0 start [PORT] | stop DIR" >&2
            exit 2
            ;;
    esac
fi
