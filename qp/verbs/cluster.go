package verbs

import (
	"bytes"
	"errors"
	"fmt"
	"net/netip"
	"os"

	"github.com/goccy/go-yaml"
)

// Cluster is a cluster topology file: which NICs of which hosts share a
// rail (the leaf switches one NIC index of every host plugs into, in a
// rail-optimized fabric) or a switch. mptx pairs each local NIC with a
// peer NIC on its rail, and ranks crossed-rail pairs after aligned ones
// (ChoosePaths).
//
// The file is YAML (JSON, a subset of YAML, works too); unknown fields
// are errors. Version 1:
//
//	version: 1
//	hosts:
//	  - name: node-a             # the host's name (os.Hostname), unique
//	    addresses: [192.0.2.10]  # optional: addresses that identify the host
//	    nics:
//	      - device: mlx5_0       # the RDMA device on that host, unique per host
//	        rail: r0             # rail label; NICs with equal labels share the rail
//	        switch: leaf-r0-1    # optional: the leaf switch (one hop apart)
//	        address: 10.0.0.1    # optional: the NIC's IP address
//	      - device: mlx5_1
//	        rail: r1
//	  - name: node-b
//	    nics:
//	      - {device: mlx5_0, rail: r0, switch: leaf-r0-1}
//	      - {device: mlx5_1, rail: r1}
type Cluster struct {
	Version int           `yaml:"version"`
	Hosts   []ClusterHost `yaml:"hosts"`
}

// ClusterHost is one host of a Cluster.
type ClusterHost struct {
	Name      string       `yaml:"name"`
	Addresses []string     `yaml:"addresses,omitempty"`
	NICs      []ClusterNIC `yaml:"nics"`
}

// ClusterNIC is one NIC of a ClusterHost.
type ClusterNIC struct {
	Device  string `yaml:"device"`
	Rail    string `yaml:"rail"`
	Switch  string `yaml:"switch,omitempty"`
	Address string `yaml:"address,omitempty"`
}

// ClusterVersion is the file format version this package reads.
const ClusterVersion = 1

// ErrCluster wraps every error about a cluster file's content.
var ErrCluster = errors.New("verbs: bad cluster topology")

// LoadCluster reads and validates the cluster file at path.
func LoadCluster(path string) (*Cluster, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("verbs: cluster topology: %w", err)
	}
	c, err := ParseCluster(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// ParseCluster decodes and validates a cluster file (YAML or JSON).
// Errors name the field ("hosts[1].nics[0].rail") and what is wrong.
func ParseCluster(data []byte) (*Cluster, error) {
	var c Cluster
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, fmt.Errorf("%w: the file is empty (want version: %d and hosts)", ErrCluster, ClusterVersion)
	}
	if err := yaml.UnmarshalWithOptions(data, &c, yaml.DisallowUnknownField()); err != nil {
		return nil, fmt.Errorf("%w: %s", ErrCluster, yaml.FormatError(err, false, true))
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return &c, nil
}

// Validate checks the cluster: the version, at least one host, names and
// devices present and unique, rails present, addresses that parse and
// belong to one host only.
func (c *Cluster) Validate() error {
	bad := func(field, format string, args ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrCluster, field, fmt.Sprintf(format, args...))
	}
	if c.Version != ClusterVersion {
		return bad("version", "%d (valid: %d)", c.Version, ClusterVersion)
	}
	if len(c.Hosts) == 0 {
		return bad("hosts", "empty (want at least one host with its nics)")
	}
	names := map[string]int{}
	addrs := map[netip.Addr]string{}
	addAddr := func(field, s string, host int) error {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return bad(field, "%q is not an IP address", s)
		}
		if prev, ok := addrs[a]; ok {
			return bad(field, "%s is also %s", a, prev)
		}
		addrs[a] = field
		return nil
	}
	for i, h := range c.Hosts {
		f := fmt.Sprintf("hosts[%d]", i)
		if h.Name == "" {
			return bad(f+".name", "empty (want the host's name)")
		}
		if j, ok := names[h.Name]; ok {
			return bad(f+".name", "%q is also hosts[%d].name", h.Name, j)
		}
		names[h.Name] = i
		for k, a := range h.Addresses {
			if err := addAddr(fmt.Sprintf("%s.addresses[%d]", f, k), a, i); err != nil {
				return err
			}
		}
		if len(h.NICs) == 0 {
			return bad(f+".nics", "empty (want the host's RDMA devices with their rails)")
		}
		devs := map[string]int{}
		for k, n := range h.NICs {
			nf := fmt.Sprintf("%s.nics[%d]", f, k)
			if n.Device == "" {
				return bad(nf+".device", "empty (want an RDMA device name, e.g. mlx5_0)")
			}
			if j, ok := devs[n.Device]; ok {
				return bad(nf+".device", "%q is also %s.nics[%d].device", n.Device, f, j)
			}
			devs[n.Device] = k
			if n.Rail == "" {
				return bad(nf+".rail", "empty (want a rail label; NICs with equal labels share a rail)")
			}
			if n.Address != "" {
				if err := addAddr(nf+".address", n.Address, i); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// Host finds a host by name, or by one of its addresses or its NICs'
// (an IP, as a peer's control address shows it).
func (c *Cluster) Host(key string) (*ClusterHost, bool) {
	if c == nil {
		return nil, false
	}
	for i := range c.Hosts {
		if c.Hosts[i].Name == key {
			return &c.Hosts[i], true
		}
	}
	a, err := netip.ParseAddr(key)
	if err != nil {
		return nil, false
	}
	a = a.Unmap()
	for i := range c.Hosts {
		h := &c.Hosts[i]
		for _, s := range h.Addresses {
			if b, err := netip.ParseAddr(s); err == nil && b.Unmap() == a {
				return h, true
			}
		}
		for _, n := range h.NICs {
			if b, err := netip.ParseAddr(n.Address); err == nil && b.Unmap() == a {
				return h, true
			}
		}
	}
	return nil, false
}

// NIC returns the host's entry for device.
func (h *ClusterHost) NIC(device string) (ClusterNIC, bool) {
	if h == nil {
		return ClusterNIC{}, false
	}
	for _, n := range h.NICs {
		if n.Device == device {
			return n, true
		}
	}
	return ClusterNIC{}, false
}
