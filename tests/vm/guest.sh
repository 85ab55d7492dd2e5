#!/bin/sh
# Runs inside the Debian 12 guest of `make test-vm` (started by ect-vm-test.service), then powers
# the guest off. Each scenario writes /results/<label>.json (tests/vm/collect.py); the files are
# also printed on the serial console, base64, one line each, for tests/vm/run.sh to pick up.
set -u
SRC=/opt/ect-src
PY=/opt/ect/bin/python
OUT=/results
mkdir -p "$OUT"; chmod 0777 "$OUT"
log() { echo "ect-vm: $*" > /dev/ttyS0; }
log "kernel $(uname -r), /sys/fs/cgroup is $(stat -fc %T /sys/fs/cgroup), $(bwrap --version)"
cd "$SRC"

log "scenario root"
"$PY" tests/vm/collect.py root "$OUT/root.json" > "$OUT/root.log" 2>&1

log "scenario normal user (no cgroup delegation)"
id ectuser >/dev/null 2>&1 || useradd -m -u 1000 ectuser
runuser -u ectuser -- env HOME=/home/ectuser "$PY" tests/vm/collect.py user "$OUT/user.json" \
    > "$OUT/user.log" 2>&1

log "scenario root in a service's leaf cgroup"
systemd-run --wait --collect --quiet -p WorkingDirectory="$SRC" \
    "$PY" tests/vm/collect.py root-service "$OUT/root-service.json" > "$OUT/root-service.log" 2>&1

log "scenario normal user with a delegated cgroup (a service with User= and Delegate=yes)"
systemd-run --wait --collect --quiet -p User=ectuser -p Delegate=yes \
    -p WorkingDirectory="$SRC" -p Environment=HOME=/home/ectuser \
    "$PY" tests/vm/collect.py user-delegated "$OUT/user-delegated.json" \
    > "$OUT/user-delegated.log" 2>&1

log "done"
for f in "$OUT"/*.json "$OUT"/*.log; do
    echo "ECT-RESULT $(basename "$f") $(base64 -w0 "$f")" > /dev/ttyS0
done
sync
systemctl poweroff
