# Sourced by scripts/with-postgres, scripts/test and scripts/demo: where the PostgreSQL server
# binaries are, and the Debian packages the build, a throwaway cluster and the tests need. As
# root the scripts install what is missing with apt-get; otherwise they print one line naming
# the packages and exit 1.

# The newest /usr/lib/postgresql/*/bin with initdb and pg_ctl (Debian keeps them off the PATH).
find_pg_bin() {
    local dir
    for dir in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
        if [ -x "$dir/initdb" ] && [ -x "$dir/pg_ctl" ]; then echo "$dir"; return 0; fi
    done
    return 1
}

# Installs packages with apt-get, quietly; refreshes the package lists only when the install
# fails without them (a fresh machine has none).
apt_install() {
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -qq "$@" >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq "$@" >/dev/null; }
}

# require_build_packages WHO: makes sure of what `swift build` and a throwaway cluster need:
# the server binaries (postgresql), libpq's header (libpq-dev, found through pkg-config),
# jemalloc, which the `courier` binary allocates through (libjemalloc-dev, found the same way),
# and pkg-config. As root installs the missing ones; otherwise prints one line, prefixed with
# WHO, that names them, and exits 1.
require_build_packages() {
    local who=$1
    local missing=()
    find_pg_bin >/dev/null || missing+=(postgresql)
    pkg-config --exists libpq 2>/dev/null || missing+=(libpq-dev)
    pkg-config --exists jemalloc 2>/dev/null || missing+=(libjemalloc-dev)
    command -v pkg-config >/dev/null || missing+=(pkg-config)
    [ ${#missing[@]} -eq 0 ] && return 0
    if [ "$(id -u)" -ne 0 ]; then
        echo "$who: missing packages: ${missing[*]}; install them (apt-get install -y ${missing[*]}) or run as root" >&2
        exit 1
    fi
    echo "$who: installing ${missing[*]}" >&2
    apt_install "${missing[@]}"
}
