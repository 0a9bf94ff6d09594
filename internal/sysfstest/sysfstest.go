// Package sysfstest builds directories laid out like sysfs, for tests of
// code that reads device placement (qp/verbs.ReadTopology, mptx devices).
package sysfstest

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
)

// FakeSys builds a directory laid out like the parts of sysfs that
// ReadTopology reads, for tests (here and in cmd/mptx): PCI functions
// under devices/pciDDDD:BB, RDMA devices under class/infiniband linking to
// them, netdevs under class/net, NUMA nodes. Links are relative, as in
// sysfs. Methods panic on I/O errors (test set-up).
type FakeSys struct{ Root string }

func (f FakeSys) mkdir(p string) string {
	if err := os.MkdirAll(p, 0o755); err != nil {
		panic(err)
	}
	return p
}

func (f FakeSys) write(p, s string) {
	f.mkdir(filepath.Dir(p))
	if err := os.WriteFile(p, []byte(s+"\n"), 0o644); err != nil {
		panic(err)
	}
}

func (f FakeSys) link(from, to string) {
	f.mkdir(filepath.Dir(from))
	rel, err := filepath.Rel(filepath.Dir(from), to)
	if err != nil {
		panic(err)
	}
	if err := os.Symlink(rel, from); err != nil {
		panic(err)
	}
}

// PCI creates the PCI functions of path under host bridge hb (each with
// numa_node numa) and returns the directory of the last one.
func (f FakeSys) PCI(hb string, numa int, path ...string) string {
	dir := filepath.Join(f.Root, "devices", hb)
	for _, fn := range path {
		dir = filepath.Join(dir, fn)
		f.write(filepath.Join(dir, "numa_node"), strconv.Itoa(numa))
	}
	f.link(filepath.Join(f.Root, "bus", "pci", "devices", path[len(path)-1]), dir)
	return dir
}

// Netdev creates netdev name under the device directory dev ("" for a
// virtual one, like veth); sub, if set, is a child device between them
// (virtio0 for virtio-net).
func (f FakeSys) Netdev(name, dev, sub string) {
	parent := dev
	if dev == "" {
		parent = filepath.Join(f.Root, "devices", "virtual")
	} else if sub != "" {
		parent = filepath.Join(dev, sub)
	}
	dir := f.mkdir(filepath.Join(parent, "net", name))
	if dev != "" {
		target := dev
		if sub != "" {
			target = parent
		}
		f.link(filepath.Join(dir, "device"), target)
	}
	f.link(filepath.Join(f.Root, "class", "net", name), dir)
}

// RDMA creates RDMA device name on the PCI function dir ("" for a soft
// device) whose port 1 GID table names netdevs.
func (f FakeSys) RDMA(name, dev string, netdevs ...string) {
	parent := dev
	if dev == "" {
		parent = filepath.Join(f.Root, "devices", "virtual")
	}
	dir := f.mkdir(filepath.Join(parent, "infiniband", name))
	if dev != "" {
		f.link(filepath.Join(dir, "device"), dev)
	}
	for i, nd := range netdevs {
		f.write(filepath.Join(dir, "ports", "1", "gid_attrs", "ndevs", strconv.Itoa(i)), nd)
	}
	// An unused GID entry reads empty (sysfs: EINVAL or "").
	f.write(filepath.Join(dir, "ports", "1", "gid_attrs", "ndevs", strconv.Itoa(len(netdevs))), "")
	f.link(filepath.Join(f.Root, "class", "infiniband", name), dir)
}

// Node creates NUMA node id with its CPU list.
func (f FakeSys) Node(id int, cpus string) {
	f.write(filepath.Join(f.Root, "devices", "system", "node", fmt.Sprintf("node%d", id), "cpulist"), cpus)
}

// GPU is the PCI address of the GPU in TwoSocket's tree.
const GPU = "0000:04:00.0"

// TwoSocket builds a two-socket host at root:
//
//	node0 (cpus 0-15), host bridge pci0000:00
//	  root port 0000:00:01.0 - switch 0000:01:00.0
//	    - 0000:02:00.0 - mlx5_0 0000:03:00.0 (ens1f0)
//	    - 0000:02:08.0 - GPU    0000:04:00.0
//	  root port 0000:00:02.0 - mlx5_1 0000:05:00.0 (ens2f0)
//	  virtio-net 0000:00:03.0 (eth0) - rxe0, Soft-RoCE on eth0
//	node1 (cpus 16-31), host bridge pci0000:80
//	  root port 0000:80:01.0 - mlx5_2 0000:81:00.0 (ens3f0)
//	                         - mlx5_3 0000:81:00.1 (ens3f1)
//	rxe1, Soft-RoCE on veth0 (no PCI function)
func TwoSocket(root string) FakeSys {
	f := FakeSys{Root: root}
	f.Node(0, "0-15")
	f.Node(1, "16-31")
	nic0 := f.PCI("pci0000:00", 0, "0000:00:01.0", "0000:01:00.0", "0000:02:00.0", "0000:03:00.0")
	f.PCI("pci0000:00", 0, "0000:00:01.0", "0000:01:00.0", "0000:02:08.0", GPU)
	nic1 := f.PCI("pci0000:00", 0, "0000:00:02.0", "0000:05:00.0")
	virtio := f.PCI("pci0000:00", 0, "0000:00:03.0")
	nic2 := f.PCI("pci0000:80", 1, "0000:80:01.0", "0000:81:00.0")
	nic3 := f.PCI("pci0000:80", 1, "0000:80:01.0", "0000:81:00.1")
	for _, n := range []struct{ dev, nd, pci string }{{"mlx5_0", "ens1f0", nic0}, {"mlx5_1", "ens2f0", nic1}, {"mlx5_2", "ens3f0", nic2}, {"mlx5_3", "ens3f1", nic3}} {
		f.Netdev(n.nd, n.pci, "")
		f.RDMA(n.dev, n.pci, n.nd)
	}
	f.Netdev("eth0", virtio, "virtio0")
	f.RDMA("rxe0", "", "eth0")
	f.Netdev("veth0", "", "")
	f.RDMA("rxe1", "", "veth0")
	return f
}
