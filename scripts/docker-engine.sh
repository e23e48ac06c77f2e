#!/usr/bin/env bash
# Make sure a Docker engine answers, installing and starting one if needed (CI, fresh machines).
#
#   scripts/docker-engine.sh        used by `make test`; safe to run again (no-op when up)
#
# On a machine without an engine it installs Debian's docker.io (and busybox-static, which the
# tests' local base image needs), then starts dockerd with no bridge and no iptables (the
# containers we run use --network none). It tries the overlay2 storage driver and falls back to
# vfs when overlay2 cannot run a container here. With COLLECTBOT_REQUIRE_DOCKER=1 (set by
# .ci/run) a failure is fatal; otherwise it warns and the Docker tests skip.
set -uo pipefail

LOG=${COLLECTBOT_DOCKERD_LOG:-/tmp/collectbot-dockerd.log}
PIDFILE=/var/run/collectbot-dockerd.pid
REQUIRE=${COLLECTBOT_REQUIRE_DOCKER:-0}

fail() {
    echo "docker-engine: $*" >&2
    if [ "$REQUIRE" = 1 ]; then exit 1; fi
    echo "docker-engine: continuing without an engine (the Docker tests will skip)" >&2
    exit 0
}

SUDO=""
if [ "$(id -u)" != 0 ]; then
    if command -v sudo >/dev/null && sudo -n true 2>/dev/null; then SUDO="sudo -n"; fi
fi

engine_up() { $SUDO docker info >/dev/null 2>&1; }

# The tests copy a static busybox into their base image as its /bin/sh.
need_busybox() { [ ! -x /bin/busybox ] || ldd /bin/busybox >/dev/null 2>&1; }

if engine_up && ! need_busybox; then exit 0; fi
if [ "$(id -u)" != 0 ] && [ -z "$SUDO" ]; then
    engine_up && exit 0
    fail "no engine, and neither root nor password-less sudo to install one"
fi

if ! command -v dockerd >/dev/null || need_busybox; then
    echo "docker-engine: installing docker.io busybox-static (apt)" >&2
    $SUDO apt-get update -qq >/dev/null || fail "apt-get update failed"
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        docker.io busybox-static >/dev/null || fail "apt-get install docker.io failed"
fi
engine_up && exit 0

smoke() {
    # Import a one-file image and run it with no network: what the tests do, in miniature.
    local dir
    dir=$(mktemp -d)
    mkdir -p "$dir/bin" && cp /bin/busybox "$dir/bin/busybox" && ln -s busybox "$dir/bin/true"
    tar -C "$dir" -c . | $SUDO docker import - collectbot-engine-smoke:1 >/dev/null 2>&1 &&
        $SUDO docker run --rm --network none collectbot-engine-smoke:1 /bin/true >/dev/null 2>&1
    local rc=$?
    rm -rf "$dir"
    $SUDO docker rmi collectbot-engine-smoke:1 >/dev/null 2>&1
    return $rc
}

for driver in overlay2 vfs; do
    echo "docker-engine: starting dockerd (storage driver $driver, log $LOG)" >&2
    $SUDO sh -c "nohup dockerd --storage-driver=$driver --iptables=false --bridge=none \
        --pidfile '$PIDFILE' >>'$LOG' 2>&1 &"
    for _ in $(seq 1 60); do engine_up && break; sleep 0.5; done
    if engine_up && smoke; then
        echo "docker-engine: up ($driver)" >&2
        exit 0
    fi
    echo "docker-engine: dockerd with $driver did not work; see $LOG" >&2
    pid=$($SUDO cat "$PIDFILE" 2>/dev/null)
    if [ -n "$pid" ]; then
        $SUDO kill "$pid" 2>/dev/null
        for _ in $(seq 1 40); do $SUDO kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
    fi
done
fail "could not start dockerd (see $LOG)"
