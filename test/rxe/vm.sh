#!/usr/bin/env bash
# vm.sh -- boot a throw-away qemu VM with Debian's stock kernel, load
# Soft-RoCE (rdma_rxe), and run one job script in it against real verbs.
#
#   test/rxe/vm.sh JOB.sh [ARGS...]      (root)
#
# The host kernel here has no RDMA support (and /dev/kvm cannot run a normal
# guest), so the VM runs under TCG. The guest mounts the host's root
# filesystem read-only over virtio-9p, so host-built binaries run unchanged,
# and $SHARE read-write at the same path. The job runs as root in a chroot of
# that root with fresh tmpfs on /tmp /run /var/tmp; its exit status is this
# script's. Pitfalls this design avoids: KVM (kvm_pvm) cannot boot a stock
# kernel; the initramfs needs /dev/console; the guest cannot modprobe (no
# host /lib/modules for its kernel), so every module is insmod-ed from the
# initramfs, crc32_generic included (rxe's ICRC needs it).
#
# Environment (all optional):
#   MPTX_RXE_WORK   scratch dir: kernel, initramfs, console log (/tmp/mptx-rxe)
#   MPTX_RXE_SHARE  host dir shared read-write with the guest ($WORK/share)
#   MPTX_RXE_MEM    guest MiB (2048)        MPTX_RXE_SMP  vCPUs (2)
#   MPTX_RXE_TIMEOUT  seconds for the whole VM (2700: under TCG on a 2-core
#                     host the full job took 623 s at a host load average of
#                     1.7 and 2037 s at 6.4; CI allows 90 min for everything)
#   MPTX_RXE_KERNEL   kernel version to use (default: what linux-image-amd64 names)
#   MPTX_RXE_QEMU_ARGS  extra qemu arguments, word-split (NUMA nodes, NICs:
#                       test/rxe/numa.sh)
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
WORK=${MPTX_RXE_WORK:-/tmp/mptx-rxe}
SHARE=${MPTX_RXE_SHARE:-$WORK/share}
MEM=${MPTX_RXE_MEM:-2048}
SMP=${MPTX_RXE_SMP:-2}
TIMEOUT=${MPTX_RXE_TIMEOUT:-2700}
[ $# -ge 1 ] || { echo "usage: $0 JOB.sh [ARGS...]" >&2; exit 2; }
JOB=$(realpath "$1"); shift

say() { printf '[rxe-vm %s] %s\n' "$(date +%T)" "$*" >&2; }
die() { say "ERROR: $*"; exit 1; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN{printf "%.1f", b-a}'; }

[ "$(id -u)" = 0 ] || die "needs root (9p passthrough of /, apt-get)"
[ -f "$JOB" ] || die "no job script $JOB"
T0=$EPOCHREALTIME
mkdir -p "$WORK" "$SHARE"
SHARE=$(realpath "$SHARE")
[ "$SHARE" != / ] || die "MPTX_RXE_SHARE must not be /"

# ---- host packages (idempotent)
need=()
for p in qemu-system-x86 busybox-static rdma-core ibverbs-providers ibverbs-utils perftest iproute2 kmod cpio gzip xz-utils; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || need+=("$p")
done
apt_updated=
apt_update() { [ -n "$apt_updated" ] || { apt-get update -qq >"$WORK/apt.log" 2>&1 || { cat "$WORK/apt.log" >&2; die "apt-get update failed"; }; apt_updated=1; }; }
if [ ${#need[@]} -gt 0 ]; then
  say "installing ${need[*]}"
  apt_update
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >>"$WORK/apt.log" 2>&1 \
    || { tail -20 "$WORK/apt.log" >&2; die "apt-get install failed"; }
fi

# ---- kernel: download and unpack the .deb (never installed on the host)
KVER=${MPTX_RXE_KERNEL:-}
if [ -z "$KVER" ]; then
  pkg=$(apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-[0-9]/{print $2; exit}')
  [ -n "$pkg" ] || { apt_update; pkg=$(apt-cache depends linux-image-amd64 | awk '/Depends: linux-image-[0-9]/{print $2; exit}'); }
  [ -n "$pkg" ] || die "cannot resolve linux-image-amd64 to a kernel package"
  KVER=${pkg#linux-image-}
fi
KDIR=$WORK/kernel-$KVER
if [ ! -f "$KDIR/lib/modules/$KVER/modules.dep" ]; then
  say "fetching linux-image-$KVER"
  rm -rf "$KDIR" "$WORK/deb"; mkdir -p "$WORK/deb"
  get() { (cd "$WORK/deb" && apt-get download -qq -o APT::Sandbox::User=root "linux-image-$KVER"); }
  get || { apt_update; get; } || die "apt-get download linux-image-$KVER failed"
  dpkg-deb -x "$WORK"/deb/linux-image-"$KVER"_*.deb "$KDIR"
  rm -rf "$WORK/deb"
  depmod -b "$KDIR" "$KVER"
  # qemu boots an ELF vmlinux through its PVH entry point: no BIOS, no
  # in-guest decompression (seconds under TCG). Extract it from the bzImage.
  off=$(LC_ALL=C grep -obUaP '\xfd7zXZ\x00' "$KDIR/boot/vmlinuz-$KVER" | head -1 | cut -d: -f1 || true)
  if [ -n "$off" ]; then
    tail -c +$((off + 1)) "$KDIR/boot/vmlinuz-$KVER" | xz -dc 2>/dev/null >"$KDIR/vmlinux" || true
    head -c 4 "$KDIR/vmlinux" | grep -q ELF || rm -f "$KDIR/vmlinux"
  fi
fi
KIMG=$KDIR/boot/vmlinuz-$KVER
[ -s "$KDIR/vmlinux" ] && KIMG=$KDIR/vmlinux

# ---- initramfs: busybox, our init, the modules in dependency order
IR=$WORK/initramfs
rm -rf "$IR"; mkdir -p "$IR"/{bin,dev,proc,sys,mnt,modules,tmp}
cp /bin/busybox "$IR/bin/busybox"
install -m 0755 "$HERE/init.sh" "$IR/init"
mknod -m 600 "$IR/dev/console" c 5 1
: >"$IR/modules/order"
for m in virtio_pci 9pnet_virtio 9p virtio_net veth rdma_rxe ib_uverbs crc32_generic sch_netem sch_tbf; do
  modprobe -d "$KDIR" -S "$KVER" --show-depends "$m" 2>/dev/null | while read -r verb path _; do
    [ "$verb" = insmod ] || continue
    b=$(basename "$path")
    grep -qxF "$b" "$IR/modules/order" && continue
    cp "$path" "$IR/modules/$b" && echo "$b" >>"$IR/modules/order"
  done
done
grep -q rdma_rxe "$IR/modules/order" || die "rdma_rxe not found in $KVER"
(cd "$IR" && find . | cpio -o -H newc --quiet | gzip -1) >"$WORK/initramfs.gz"

# ---- the job, wrapped so the guest knows where it is
cp "$JOB" "$SHARE/job.sh"
cp "$HERE/lib.sh" "$SHARE/lib.sh"
{ echo '#!/bin/bash'; printf 'cd %q\nexec /bin/bash %q' "$SHARE" "$SHARE/job.sh"; printf ' %q' "$@"; echo; } >"$SHARE/run-job.sh"
rm -f "$SHARE/exit-status"

# ---- boot
LOG=$WORK/console.log
say "kernel $KVER; booting (tcg, ${SMP} vCPU, ${MEM} MiB, limit ${TIMEOUT}s); console: $LOG"
TB=$EPOCHREALTIME
set +e
timeout -k 10 "$TIMEOUT" qemu-system-x86_64 -machine pc -accel tcg,thread=multi -cpu max \
  -smp "$SMP" -m "$MEM" -kernel "$KIMG" -initrd "$WORK/initramfs.gz" \
  -append "console=ttyS0 panic=-1 loglevel=4 mitigations=off mptx.share=$SHARE" \
  -virtfs local,path=/,mount_tag=root9p,security_model=none,readonly=on,multidevs=remap \
  -virtfs "local,path=$SHARE,mount_tag=share9p,security_model=none,multidevs=remap" \
  -nic none -display none -monitor none -serial stdio -no-reboot ${MPTX_RXE_QEMU_ARGS:-} </dev/null 2>&1 \
  | tr -d '\r' | tee "$LOG"
qrc=${PIPESTATUS[0]}
set -e
TE=$EPOCHREALTIME
rc=$(sed -n 's/^MPTX-VM-EXIT \([0-9]*\)$/\1/p' "$LOG" | tail -1)
say "VM ran $(secs "$TB" "$TE")s (whole run $(secs "$T0" "$TE")s)"
echo "vm_seconds=$(secs "$TB" "$TE") total_seconds=$(secs "$T0" "$TE")" >"$SHARE/vm-timing.txt"
[ "$qrc" != 124 ] && [ "$qrc" != 137 ] || die "VM timed out after ${TIMEOUT}s"
[ -n "$rc" ] || die "VM stopped (qemu status $qrc) without a job status; see $LOG"
say "job exit status $rc"
exit "$rc"
