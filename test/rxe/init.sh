#!/bin/busybox sh
# init.sh -- PID 1 of the mptx rxe VM (busybox). Loads the modules, mounts
# the host root read-only (9p) with fresh tmpfs for /tmp /run /var/tmp and
# the read-write share, runs the job in a chroot, reports its status on the
# console (MPTX-VM-EXIT n) and powers off.
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
for kv in $(cat /proc/cmdline); do
  case $kv in mptx.share=*) SHARE=${kv#mptx.share=} ;; esac
done
halt() { echo "MPTX-VM-EXIT $1"; sync; poweroff -f; sleep 3; echo o >/proc/sysrq-trigger; }
while read -r m; do
  insmod "/modules/$m" 2>/tmp/e || grep -q 'File exists' /tmp/e || echo "mptx-vm: insmod $m: $(cat /tmp/e)"
done </modules/order
R=/mnt
mount -t 9p -o trans=virtio,version=9p2000.L,ro,cache=loose,msize=512000 root9p $R || { echo "mptx-vm: cannot mount the host root"; halt 98; }
for d in tmp run var/tmp; do mount -t tmpfs -o mode=1777 tmpfs "$R/$d"; done
mount --rbind /proc "$R/proc"; mount --rbind /sys "$R/sys"; mount --rbind /dev "$R/dev"
mkdir -p "$R/dev/shm" "$R/dev/pts"
mount -t tmpfs -o mode=1777 tmpfs "$R/dev/shm"; mount -t devpts devpts "$R/dev/pts"
# A share under /tmp, /run or /var/tmp (a checkout in /tmp, as CI may make)
# lies in the guest's fresh tmpfs: create its mount point there.
mkdir -p "$R$SHARE" 2>/dev/null
mount -t 9p -o trans=virtio,version=9p2000.L,rw,cache=none,msize=512000 share9p "$R$SHARE" || { echo "mptx-vm: cannot mount the share"; halt 97; }
ip link set lo up
echo "mptx-vm: job starts at uptime $(cut -d' ' -f1 /proc/uptime)s"
chroot $R /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  HOME=/tmp TERM=dumb MPTX_RXE_VM=1 MPTX_RXE_SHARE="$SHARE" /bin/bash "$SHARE/run-job.sh"
rc=$?
echo "mptx-vm: job done at uptime $(cut -d' ' -f1 /proc/uptime)s"
sync
umount "$R$SHARE" 2>/dev/null
halt $rc
