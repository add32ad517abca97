#!/bin/sh
# Start the PostgreSQL and Redis servers the test suite and benchmarks use (127.0.0.1:5432 and
# 127.0.0.1:6379), if they are installed and not running. Never fails: without them, their tests
# skip with a reason (or fail under CI=true, where they must be up).

if command -v pg_ctlcluster >/dev/null 2>&1 && [ -d /etc/postgresql ]; then
    if ! (command -v pg_isready >/dev/null 2>&1 && pg_isready -q -h 127.0.0.1 -p 5432); then
        for version in $(ls /etc/postgresql); do
            pg_ctlcluster --skip-systemctl-redirect "$version" main start 2>&1 \
                || echo "services: could not start PostgreSQL $version"
        done
    fi
fi

if command -v redis-server >/dev/null 2>&1; then
    if ! redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1; then
        mkdir -p /var/lib/redis /var/log/redis 2>/dev/null
        redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" \
            --appendonly no --dir /var/lib/redis --logfile /var/log/redis/ci.log \
            || echo "services: could not start Redis"
    fi
fi
exit 0
