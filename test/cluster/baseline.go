package cluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// hostSysctls are the machine-wide settings a component may change: the
// kubelet sets these six at start. Everything network-related the cluster
// sets lives in the node's namespace and dies with it.
var hostSysctls = []string{
	"vm/overcommit_memory", "vm/panic_on_oom", "kernel/panic", "kernel/panic_on_oops",
	"kernel/keys/root_maxkeys", "kernel/keys/root_maxbytes",
}

// outsidePaths are paths outside the state directory that containerd, the
// CNI plugins, `ip netns` or the kubelet create whatever their configuration
// says. Down removes those that did not exist before Up.
var outsidePaths = []string{
	"/run/netns", "/run/containerd", "/var/lib/cni", "/var/log/containers", "/var/log/pods",
	"/var/lib/kubelet", "/usr/libexec/kubernetes", "/opt/containerd",
}

// baseline is what Up records before it changes anything, so that Down can
// put it back.
type baseline struct {
	Sysctls map[string]string `json:"sysctls"`
	Existed map[string]bool   `json:"existed"`
	Mounts  []string          `json:"mounts"`
}

func (c Config) baselinePath() string { return c.path("baseline.json") }

// recordBaseline writes the baseline unless one is already there (a retried
// Up must not take its own leftovers for the machine's state).
func (c Config) recordBaseline() error {
	if fileExists(c.baselinePath()) {
		return nil
	}
	b := baseline{Sysctls: map[string]string{}, Existed: map[string]bool{}}
	for _, k := range hostSysctls {
		v, err := readSysctl(k)
		if err != nil {
			return err
		}
		b.Sysctls[k] = v
	}
	for _, p := range outsidePaths {
		b.Existed[p] = fileExists(p)
	}
	mounts, err := readMounts()
	if err != nil {
		return err
	}
	for _, m := range mounts {
		b.Mounts = append(b.Mounts, m.point)
	}
	data, err := json.MarshalIndent(b, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(c.StateDir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(c.markerFile(), nil, 0o644); err != nil {
		return err
	}
	return os.WriteFile(c.baselinePath(), data, 0o644)
}

func (c Config) readBaseline() (*baseline, error) {
	data, err := os.ReadFile(c.baselinePath())
	if err != nil {
		return nil, err
	}
	var b baseline
	if err := json.Unmarshal(data, &b); err != nil {
		return nil, fmt.Errorf("read %s: %w", c.baselinePath(), err)
	}
	return &b, nil
}

// restoreBaseline puts back the host sysctls and removes the outside paths
// that were not there before. Paths that were there keep everything but the
// entries that point into the state directory.
func (c Config) restoreBaseline(b *baseline) []error {
	var errs []error
	for k, want := range b.Sysctls {
		if got, err := readSysctl(k); err == nil && got != want {
			if err := writeSysctl(k, want); err != nil {
				errs = append(errs, fmt.Errorf("restore sysctl %s=%s: %w", k, want, err))
			}
		}
	}
	for _, p := range outsidePaths {
		existed, known := b.Existed[p]
		if !known || !fileExists(p) {
			continue
		}
		if !existed {
			if err := os.RemoveAll(p); err != nil {
				errs = append(errs, err)
			}
			continue
		}
		// Only our symlinks (kubelet's container log links) are ours to
		// remove in a directory that was already there.
		entries, _ := os.ReadDir(p)
		for _, e := range entries {
			full := filepath.Join(p, e.Name())
			if target, err := os.Readlink(full); err == nil && strings.HasPrefix(target, c.StateDir) {
				if err := os.Remove(full); err != nil && !errors.Is(err, fs.ErrNotExist) {
					errs = append(errs, err)
				}
			}
		}
	}
	return errs
}
