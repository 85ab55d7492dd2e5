#!/usr/bin/env bash
# `make test-vm`: the sandbox on Debian 12's stock kernel with cgroup v2, in a VM (opt-in, long;
# not part of .ci/run). docs/sandbox.md "Kernels actually run" shows the last results.
#
#  1. A wheelhouse: this checkout's wheel and its runtime dependencies (+ the view extra) for
#     CPython 3.11 on x86_64, the guest's own interpreter (pip, from the package index).
#  2. A Debian 12 root filesystem from Debian's packages (mmdebstrap): the stock kernel
#     (linux-image-amd64), systemd, python3, bubblewrap; the project installed in /opt/ect with
#     the guest's python3 from the wheelhouse (no index in the guest; the guest has no network);
#     a normal user `ect` (uid 1000) with a lingering systemd user manager (a delegated cgroup,
#     as a login session has); a one-shot unit that runs /opt/ect-vm/guest.py at boot and powers
#     off. The image is cached; this checkout's tests/vm/guest.py is written into a copy of it
#     before every boot.
#  3. An ext4 image of it, booted with qemu: KVM when it works (nested KVM can hang: the boot
#     must reach the guest's first line within VM_KVM_WAIT seconds), else TCG (about 10-20 min).
#  4. The results (/root/ect-vm-results.json in the image, read with debugfs: nothing is
#     mounted) are copied to $VM_DIR/results-<guest kernel>.json and compared with this host's
#     own `ect sandbox probe --json` by tests/vm/compare.py, which exits 1 if a probe, the
#     preflight or the demo failed in any case the docs say must pass.
#
# Environment: VM_DIR (default .vm/ in the checkout; the rootfs and image are cached there and
# rebuilt when the image recipe below or the wheelhouse changes), VM_ACCEL (auto|kvm|tcg),
# VM_MEM (MiB, default 4096), VM_CPUS (default 2), ECT_VM_CASES (comma-separated subset of
# root,root-service,user-session,user-plain), PY (the interpreter that builds the wheelhouse).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
vm=${VM_DIR:-$repo/.vm}
accel=${VM_ACCEL:-auto}
mem=${VM_MEM:-4096}
cpus=${VM_CPUS:-2}
py=${PY:-$repo/.venv/bin/python}
[ "$(uname -m)" = x86_64 ] || { echo "test-vm: x86_64 only (this is $(uname -m))" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "test-vm: mmdebstrap and mke2fs -d need root here" >&2; exit 2; }
for tool in mmdebstrap qemu-system-x86_64 mke2fs debugfs; do
  command -v "$tool" >/dev/null || { echo "test-vm: $tool is missing (make test-vm installs it)" >&2; exit 2; }
done
mkdir -p "$vm"
log() { printf '[test-vm %s] %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }

# 1. wheelhouse
wh="$vm/wheelhouse"
rm -rf "$wh" && mkdir -p "$wh"
log "building the wheel and fetching its dependencies for CPython 3.11 x86_64"
"$py" -m pip wheel --quiet --no-deps --no-build-isolation -w "$wh" "$repo" >&2
whl=$(ls "$wh"/ect_runner-*.whl)
"$py" -m pip download --quiet --dest "$wh" --only-binary=:all: --python-version 3.11 \
  --implementation cp --abi cp311 --abi abi3 --abi none \
  --platform manylinux_2_36_x86_64 --platform manylinux_2_35_x86_64 \
  --platform manylinux_2_34_x86_64 --platform manylinux_2_31_x86_64 \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
  --platform manylinux_2_24_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 --platform manylinux1_x86_64 --platform any \
  "$whl[view]" >&2

# 2-3. root filesystem and image, cached by the inputs' digest
key=$( (sed -n "/^# 2-3/,/^# 4/p" "$0"; ls -l "$wh" | awk '{print $5, $9}'; sha256sum "$wh"/*.whl) | sha256sum | cut -c1-16)
img="$vm/debian12-$key.img"
if [ ! -s "$img" ]; then
  rm -f "$vm"/debian12-*.img
  root="$vm/rootfs"
  rm -rf "$root"
  log "building a Debian 12 root filesystem with mmdebstrap (Debian's packages)"
  mmdebstrap --quiet --variant=minbase --mode=root \
    --include=linux-image-amd64,systemd-sysv,udev,dbus,dbus-user-session,libpam-systemd,systemd-container,python3,python3-venv,bubblewrap,procps,util-linux,kmod,e2fsprogs \
    --customize-hook="mkdir -p \"\$1/opt/wheelhouse\" \"\$1/opt/ect-vm\"" \
    --customize-hook="copy-in $wh/. /opt/wheelhouse" \
    --customize-hook='chroot "$1" python3 -m venv /opt/ect' \
    --customize-hook='chroot "$1" /opt/ect/bin/pip install --quiet --no-index --find-links /opt/wheelhouse "ect-runner[view]"' \
    --customize-hook='rm -rf "$1/opt/wheelhouse"' \
    --customize-hook='chroot "$1" useradd --create-home --uid 1000 --shell /bin/bash ect' \
    --customize-hook='mkdir -p "$1/var/lib/systemd/linger" && touch "$1/var/lib/systemd/linger/ect"' \
    --customize-hook='echo ect-vm > "$1/etc/hostname"' \
    --customize-hook='echo "/dev/vda / ext4 rw,errors=remount-ro 0 1" > "$1/etc/fstab"' \
    --customize-hook='printf "%s\n" "[Unit]" "Description=ect-runner sandbox checks" "After=multi-user.target user@1000.service" "Wants=user@1000.service" "[Service]" "Type=oneshot" "ExecStart=/usr/bin/python3 /opt/ect-vm/guest.py" "ExecStopPost=/usr/bin/systemctl poweroff --no-block" "StandardOutput=journal" "StandardError=journal" "TimeoutStartSec=infinity" "[Install]" "WantedBy=multi-user.target" > "$1/etc/systemd/system/ect-vm-test.service"' \
    --customize-hook='chroot "$1" systemctl enable ect-vm-test.service' \
    --customize-hook='chroot "$1" systemctl mask getty@tty1.service serial-getty@ttyS0.service' \
    bookworm "$root" >&2
  cp "$root"/boot/vmlinuz-* "$vm/vmlinuz"
  cp "$root"/boot/initrd.img-* "$vm/initrd.img"
  log "making the ext4 image"
  mke2fs -q -t ext4 -L root -d "$root" "$img.tmp" 8G
  mv "$img.tmp" "$img"
  rm -rf "$root"
fi

# 4. boot (a copy of the image, so the cached one stays clean)
run_img="$vm/run.img"
fresh_image() {  # the cached image plus this checkout's guest.py (written with debugfs)
  cp --sparse=always "$img" "$run_img"
  printf '%s\n' "${ECT_VM_CASES:-}" > "$vm/cases"
  printf 'cd /opt/ect-vm\nrm guest.py\nwrite %s guest.py\nrm cases\nwrite %s cases\n' \
    "$here/guest.py" "$vm/cases" | debugfs -w -f - "$run_img" >/dev/null 2>&1
  debugfs -R "stat /opt/ect-vm/guest.py" "$run_img" >/dev/null 2>&1 ||
    { echo "test-vm: could not write guest.py into the image" >&2; exit 1; }
}
fresh_image
console="$vm/console.log"
boot() {  # $1 = kvm|tcg
  local a=(-accel tcg,thread=multi -cpu max)
  [ "$1" = kvm ] && a=(-accel kvm -cpu host)
  : > "$console"
  qemu-system-x86_64 "${a[@]}" -machine q35 -m "$mem" -smp "$cpus" -nographic -no-reboot \
    -kernel "$vm/vmlinuz" -initrd "$vm/initrd.img" \
    -append "root=/dev/vda rw console=ttyS0 systemd.show_status=0 quiet" \
    -drive "file=$run_img,format=raw,if=virtio" -nic none \
    -serial "file:$console" -monitor none </dev/null >/dev/null 2>"$vm/qemu.err" &
  qpid=$!
}
wait_first_line() {  # the guest's first line within $1 s, or fail
  local until=$((SECONDS + $1))
  while [ $SECONDS -lt $until ]; do
    grep -q '\[ect-vm ' "$console" 2>/dev/null && return 0
    kill -0 "$qpid" 2>/dev/null || return 1
    sleep 2
  done
  return 1
}
used=tcg
if [ "$accel" != tcg ] && [ -w /dev/kvm ]; then
  log "booting with KVM (falls back to TCG if the guest has not started in ${VM_KVM_WAIT:-90} s)"
  boot kvm
  if wait_first_line "${VM_KVM_WAIT:-90}"; then used=kvm; else
    kill "$qpid" 2>/dev/null || true; wait "$qpid" 2>/dev/null || true
    [ "$accel" = kvm ] && { echo "test-vm: KVM did not boot the guest" >&2; exit 1; }
    log "KVM did not boot the guest; using TCG (software emulation)"
    fresh_image
  fi
fi
[ "$used" = tcg ] && { log "booting with TCG (software emulation: slow)"; boot tcg; }
seen=0
while kill -0 "$qpid" 2>/dev/null; do  # progress: the guest's own lines
  n=$(grep -c '\[ect-vm ' "$console" 2>/dev/null || true)
  if [ "${n:-0}" -gt "$seen" ]; then grep '\[ect-vm ' "$console" | sed -n "$((seen + 1)),${n}p" >&2; seen=$n; fi
  sleep 5
done
wait "$qpid" || true
grep '\[ect-vm ' "$console" | sed -n "$((seen + 1)),\$p" >&2 || true
raw="$vm/results.raw.json"
debugfs -R "cat /root/ect-vm-results.json" "$run_img" > "$raw" 2>/dev/null || true
[ -s "$raw" ] || { echo "test-vm: the guest left no results (console: $console)" >&2; exit 1; }
log "guest finished (accelerator: $used); comparing with this host"
exec "$py" "$here/compare.py" --guest "$raw" --accel "$used" --out-dir "$vm"
