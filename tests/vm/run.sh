#!/bin/bash
# `make test-vm`: the sandbox on Debian 12's stock kernel with cgroup v2, as root, as root in a
# service's leaf cgroup, as a normal user and as a user with a delegated cgroup, compared with
# this host (docs/sandbox.md "Proven on a stock kernel").
#
# 1. wheels of the project and its dependencies (pip, from the package index or pip's cache);
# 2. a Debian 12 root filesystem from Debian's packages (mmdebstrap: the stock kernel
#    linux-image-amd64, systemd, bubblewrap, the distribution's Python 3.11), the project copied
#    to /opt/ect-src and its dependencies installed into a venv of the guest's own Python;
# 3. boots it under qemu (KVM when it answers within ECT_VM_KVM_WAIT seconds, else TCG:
#    software emulation, about 10x slower), runs tests/vm/guest.sh, which runs
#    tests/vm/collect.py per scenario and powers off;
# 4. collects the guest's results and this host's (collect.py here) into $ECT_VM_DIR/results
#    and prints the comparison (tests/vm/compare.py), also written to results/summary.txt.
#
# Needs root (mmdebstrap, chroot, mke2fs -d), mmdebstrap and qemu-system-x86 (apt-get install
# mmdebstrap qemu-system-x86). Reuses the wheels and root filesystem of an earlier run
# ($ECT_VM_DIR, default out/vm); delete it to rebuild. Opt-in: not part of .ci/run.
set -euo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
WORK=${ECT_VM_DIR:-$REPO/out/vm}
VPY=${VPY:-$REPO/.venv/bin/python}
MIRROR=${ECT_VM_MIRROR:-http://deb.debian.org/debian}
KVM_WAIT=${ECT_VM_KVM_WAIT:-90}
GUEST_TIMEOUT=${ECT_VM_TIMEOUT:-5400}
PKGS=linux-image-amd64,systemd-sysv,udev,dbus,libpam-systemd,bubblewrap,python3,python3-venv,util-linux,procps,kmod
say() { echo "test-vm: $*"; }
[ "$(id -u)" = 0 ] || { echo "test-vm: needs root (mmdebstrap, chroot, mke2fs -d)" >&2; exit 2; }
for tool in mmdebstrap qemu-system-x86_64 mke2fs; do
    command -v "$tool" >/dev/null || { echo "test-vm: $tool is missing (apt-get install mmdebstrap qemu-system-x86 e2fsprogs)" >&2; exit 2; }
done
mkdir -p "$WORK/results"

if [ ! -f "$WORK/wheels/.done" ]; then
    say "wheels of the project and its dependencies"
    mkdir -p "$WORK/wheels"
    "$VPY" -m pip wheel -q -w "$WORK/wheels" "$REPO"
    touch "$WORK/wheels/.done"
fi
if [ ! -f "$WORK/rootfs.tar" ]; then
    say "Debian 12 root filesystem (mmdebstrap, $MIRROR)"
    mmdebstrap --variant=minbase --include="$PKGS" bookworm "$WORK/rootfs.tmp.tar" "$MIRROR"
    mv "$WORK/rootfs.tmp.tar" "$WORK/rootfs.tar"
fi

say "guest image"
ROOT="$WORK/root"
rm -rf "$ROOT"; mkdir -p "$ROOT"
tar -C "$ROOT" -xf "$WORK/rootfs.tar"
mkdir -p "$ROOT/opt/ect-src"
tar -C "$REPO" --exclude=./.venv --exclude=./.git --exclude=./out --exclude='*.egg-info' \
    --exclude=__pycache__ --exclude=./stores/'*.db' -cf - . | tar -C "$ROOT/opt/ect-src" -xf -
cp -r "$WORK/wheels" "$ROOT/opt/wheels"
mount -t proc proc "$ROOT/proc"
trap 'umount "$ROOT/proc" 2>/dev/null || true' EXIT
chroot "$ROOT" /usr/bin/python3 -m venv /opt/ect
chroot "$ROOT" /opt/ect/bin/pip install -q --no-index --find-links /opt/wheels ect-runner
umount "$ROOT/proc"; trap - EXIT
cat > "$ROOT/etc/systemd/system/ect-vm-test.service" <<'UNIT'
[Unit]
Description=ect-runner sandbox test (make test-vm)
After=multi-user.target
[Service]
Type=oneshot
ExecStart=/opt/ect-src/tests/vm/guest.sh
UNIT
mkdir -p "$ROOT/etc/systemd/system/multi-user.target.wants"
ln -sf /etc/systemd/system/ect-vm-test.service "$ROOT/etc/systemd/system/multi-user.target.wants/"
echo "/dev/vda / ext4 rw 0 1" > "$ROOT/etc/fstab"
echo ect-vm > "$ROOT/etc/hostname"
KERNEL=$(ls "$ROOT"/boot/vmlinuz-* | head -1)
INITRD=$(ls "$ROOT"/boot/initrd.img-* | head -1)
cp "$KERNEL" "$WORK/vmlinuz"; cp "$INITRD" "$WORK/initrd.img"
rm -f "$WORK/disk.img"
mke2fs -q -t ext4 -d "$ROOT" -L ect-vm "$WORK/disk.img" 6G
rm -rf "$ROOT"

boot() {  # $1: accelerator; the console goes to $WORK/console-$1.log
    qemu-system-x86_64 -accel "$1" -cpu max -m 3072 -smp 2 -nographic -no-reboot \
        -kernel "$WORK/vmlinuz" -initrd "$WORK/initrd.img" \
        -append "root=/dev/vda rw console=ttyS0 systemd.unified_cgroup_hierarchy=1 quiet" \
        -drive "file=$WORK/disk.img,format=raw,if=virtio" > "$WORK/console-$1.log" 2>&1 &
    QEMU=$!
}
ACCEL=tcg
if [ -w /dev/kvm ] && [ "$KVM_WAIT" != 0 ]; then
    say "booting with KVM (falls back to TCG if the guest says nothing within $KVM_WAIT s)"
    boot kvm
    for _ in $(seq "$KVM_WAIT"); do
        grep -q "ect-vm: kernel" "$WORK/console-kvm.log" 2>/dev/null && { ACCEL=kvm; break; }
        kill -0 "$QEMU" 2>/dev/null || break
        sleep 1
    done
    if [ "$ACCEL" != kvm ]; then kill "$QEMU" 2>/dev/null || true; wait "$QEMU" 2>/dev/null || true; fi
fi
if [ "$ACCEL" = tcg ]; then
    say "booting with TCG (software emulation)"
    boot tcg
fi
START=$(date +%s)
while kill -0 "$QEMU" 2>/dev/null; do
    if [ $(( $(date +%s) - START )) -gt "$GUEST_TIMEOUT" ]; then
        say "the guest did not finish within $GUEST_TIMEOUT s"; kill "$QEMU"; break
    fi
    sleep 5
done
wait "$QEMU" 2>/dev/null || true
{ grep "^ECT-RESULT " "$WORK/console-$ACCEL.log" || true; } | tr -d '\r' | while read -r _ name data; do
    echo "$data" | base64 -d > "$WORK/results/$name"
done
echo "$ACCEL" > "$WORK/results/accelerator"
say "this host, for comparison"
(cd "$REPO" && "$VPY" tests/vm/collect.py host "$WORK/results/host.json")
"$VPY" "$REPO/tests/vm/compare.py" "$WORK/results" | tee "$WORK/results/summary.txt"
