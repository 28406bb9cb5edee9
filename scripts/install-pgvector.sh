#!/usr/bin/env bash
# Installs the pgvector extension into the machine's PostgreSQL 15 (needed by the Postgres
# store's semantic search and its tests). Idempotent: exits at once when the local server
# already offers a `vector` extension that passes the smoke test below.
#
# Portable: pgvector's Makefile compiles for the build machine's CPU (`-march=native`) unless
# OPTFLAGS says otherwise; this build passes an empty OPTFLAGS (as Debian's own package does),
# so the library runs on any x86-64 CPU, including virtual machines that report instructions
# (AVX-512, AMX) they do not let a program use. After installing, a smoke test creates the
# extension, builds an HNSW index and runs a nearest-neighbour query; if that fails the
# library is uninstalled again and the script exits non-zero, naming the step.
#
# Debian bookworm has no pgvector binary package, so this builds Debian trixie's *source*
# package against PostgreSQL 15: a temporary `deb-src` entry for trixie (same mirror as the
# machine's own Debian entry), `apt-get source pgvector`, `make` + `make install`, then the
# temporary entry is removed again. Installing postgresql-server-dev-15 may upgrade the server's
# minor version; the cluster is restarted when the running server is older than its binaries.
#
# Connection: PGHOST/PGPORT/PGUSER/PGDATABASE (defaults 127.0.0.1, 5432, postgres, test).
set -euo pipefail

export PGHOST="${PGHOST:-127.0.0.1}"
export PGPORT="${PGPORT:-5432}"
export PGUSER="${PGUSER:-postgres}"
export PGDATABASE="${PGDATABASE:-test}"
PG_MAJOR=15
PG_BIN="/usr/lib/postgresql/$PG_MAJOR/bin"
SRC_ENTRY=/etc/apt/sources.list.d/stategraph-pgvector-trixie-src.sources

psql_q() { psql -X -v ON_ERROR_STOP=1 -Atqc "$1"; }

# Distances and an HNSW index: the compiled code paths the store's search uses.
smoke() {
    local got
    got="$(PGOPTIONS="-c client_min_messages=warning" psql -X -v ON_ERROR_STOP=1 -Atq <<'SQL' 2>&1
CREATE EXTENSION IF NOT EXISTS vector;
CREATE TEMP TABLE stategraph_pgvector_smoke (id int, v vector(3));
INSERT INTO stategraph_pgvector_smoke VALUES (1, '[1,0,0]'), (2, '[0,1,0]'), (3, '[0.9,0.1,0]');
CREATE INDEX ON stategraph_pgvector_smoke USING hnsw (v vector_cosine_ops);
SET enable_seqscan = off;
SELECT string_agg(id::text, ',' ORDER BY v <=> '[1,0,0]') FROM
  (SELECT id, v FROM stategraph_pgvector_smoke ORDER BY v <=> '[1,0,0]' LIMIT 2) nearest;
SQL
)" || { echo "$got" >&2; return 1; }
    [[ "$got" == "1,3" ]] || { echo "install-pgvector: smoke query answered '$got', expected '1,3'" >&2; return 1; }
}

if [[ "$(psql_q "SELECT 1 FROM pg_available_extensions WHERE name='vector'" 2>/dev/null || true)" == 1 ]]; then
    if smoke; then
        exit 0
    fi
    echo "install-pgvector: the installed vector extension fails its smoke test; rebuilding it" >&2
fi

echo "install-pgvector: building pgvector from Debian trixie's source package" >&2
start=$SECONDS
export DEBIAN_FRONTEND=noninteractive
SUDO=()
if [[ $EUID -ne 0 ]]; then SUDO=(sudo); fi
APT=("${SUDO[@]}" apt-get -q -o DPkg::Lock::Timeout=600)

# The URI (and keyring) of the machine's existing Debian entry: deb822 `.sources` first, then
# one-line `sources.list` entries; security and update mirrors are skipped.
debian_uri=""
signed_by=""
for f in /etc/apt/sources.list.d/*.sources; do
    [[ -f "$f" && "$f" != "$SRC_ENTRY" ]] || continue
    uri="$(awk '/^URIs:/ { for (i = 2; i <= NF; i++) if ($i ~ /\/debian\/?$/) { print $i; exit } }' "$f")"
    if [[ -n "$uri" ]]; then
        debian_uri="$uri"
        signed_by="$(awk -v u="$uri" '
            /^$/ { inblk = 0; sb = "" }
            /^URIs:/ { for (i = 2; i <= NF; i++) if ($i == u) inblk = 1 }
            /^Signed-By:/ { sb = $2 }
            inblk && sb != "" { print sb; exit }' "$f")"
        break
    fi
done
if [[ -z "$debian_uri" ]]; then
    debian_uri="$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null |
        awk '$1 ~ /^deb(-src)?$/ { for (i = 2; i <= NF; i++) if ($i ~ /^[a-z]+:\/\/.*\/debian\/?$/) { print $i; exit } }')"
fi
if [[ -z "$debian_uri" ]]; then
    echo "install-pgvector: no Debian source entry found in /etc/apt" >&2
    exit 1
fi

workdir="$(mktemp -d)"
cleanup() {
    local rc=$?
    if [[ -f "$SRC_ENTRY" ]]; then
        "${SUDO[@]}" rm -f "$SRC_ENTRY"
        "${APT[@]}" update -qq >/dev/null 2>&1 || true
    fi
    rm -rf "$workdir"
    exit "$rc"
}
trap cleanup EXIT

{
    echo "Types: deb-src"
    echo "URIs: $debian_uri"
    echo "Suites: trixie"
    echo "Components: main"
    if [[ -n "$signed_by" ]]; then echo "Signed-By: $signed_by"; fi
} | "${SUDO[@]}" tee "$SRC_ENTRY" >/dev/null

"${APT[@]}" update -qq
"${APT[@]}" install -y -qq --no-install-recommends dpkg-dev postgresql-server-dev-$PG_MAJOR >/dev/null

(cd "$workdir" && "${APT[@]}" source -qq pgvector >/dev/null 2>&1) ||
    { echo "install-pgvector: step 'source': apt-get source pgvector (Debian trixie) failed" >&2; exit 1; }
srcdir="$(find "$workdir" -mindepth 1 -maxdepth 1 -type d -name 'pgvector-*' | head -n 1)"
# OPTFLAGS empty: no -march=native (see the header).
make -C "$srcdir" -s -j"$(nproc)" PG_CONFIG="$PG_BIN/pg_config" OPTFLAGS="" >/dev/null ||
    { echo "install-pgvector: step 'build': make failed in $srcdir (needs gcc and postgresql-server-dev-$PG_MAJOR)" >&2; exit 1; }
"${SUDO[@]}" make -C "$srcdir" -s PG_CONFIG="$PG_BIN/pg_config" OPTFLAGS="" install >/dev/null

# Removes the temporary entry and refreshes apt's lists now (the trap would too).
"${SUDO[@]}" rm -f "$SRC_ENTRY"
"${APT[@]}" update -qq

# Restart the cluster if the installed server binaries are newer than the running server.
running="$(psql_q 'SHOW server_version' | awk '{ print $1 }')"
installed="$("$PG_BIN/postgres" --version | awk '{ print $3 }')"
if [[ "$running" != "$installed" ]]; then
    echo "install-pgvector: server $running -> $installed, restarting the cluster" >&2
    "${SUDO[@]}" pg_ctlcluster --skip-systemctl-redirect "$PG_MAJOR" main restart
    for _ in $(seq 1 30); do
        "$PG_BIN/pg_isready" -q && break
        sleep 1
    done
fi

if ! smoke; then
    "${SUDO[@]}" make -C "$srcdir" -s PG_CONFIG="$PG_BIN/pg_config" uninstall >/dev/null 2>&1 || true
    echo "install-pgvector: step 'smoke test': the freshly built pgvector failed (output above);" \
        "it was uninstalled again. Remedy: check the PostgreSQL log, then rerun this script." >&2
    exit 1
fi
echo "install-pgvector: pgvector $(psql_q "SELECT extversion FROM pg_extension WHERE extname='vector'") ready ($((SECONDS - start)) s)" >&2
