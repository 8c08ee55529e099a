package cluster

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestSnapshotDiff(t *testing.T) {
	before := &Snapshot{
		Links:    []string{"eth0", "lo"},
		Mounts:   []string{"/ ext4"},
		Nftables: "table inet filter {\n}\n",
		Sysctls:  map[string]string{"kernel/panic": "0"},
		Paths:    map[string]bool{"/run/netns": false},
	}
	same := &Snapshot{
		Links:    []string{"eth0", "lo"},
		Mounts:   []string{"/ ext4"},
		Nftables: "table inet filter {\n}\n",
		Sysctls:  map[string]string{"kernel/panic": "0"},
		Paths:    map[string]bool{"/run/netns": false},
	}
	if d := before.Diff(same); len(d) != 0 {
		t.Errorf("identical snapshots differ: %v", d)
	}
	dirty := &Snapshot{
		Processes: []string{"containerd-shim (42)"},
		Links:     []string{"elasti-host", "eth0", "lo"},
		Mounts:    []string{"/ ext4", "/run/netns tmpfs"},
		Nftables:  "table inet filter {\n}\ntable inet elasti_guard {\n}\n",
		Cgroups:   []string{"/sys/fs/cgroup/memory/elasti-cluster"},
		Sysctls:   map[string]string{"kernel/panic": "10"},
		Paths:     map[string]bool{"/run/netns": true},
	}
	want := []string{
		"process: + containerd-shim (42)",
		"link: + elasti-host",
		"nftables: + table inet elasti_guard {",
		"mount: + /run/netns tmpfs",
		"cgroup: + /sys/fs/cgroup/memory/elasti-cluster",
		`sysctl: kernel/panic was "0", now "10"`,
		"path: /run/netns existed=false, now true",
	}
	if diff := cmp.Diff(want, before.Diff(dirty)); diff != "" {
		t.Errorf("Diff (-want +got):\n%s", diff)
	}
}
