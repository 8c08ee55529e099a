package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Down stops the cluster and removes everything Up created: processes,
// containers, mounts, the namespace and veth pair (and with them every
// iptables rule and route inside), the host guard, cgroups and the state
// directory. It restores the host sysctls the kubelet changed. Safe to run
// on a machine with no cluster.
func (c Config) Down(ctx context.Context, logf Logf) error {
	unlock, err := c.lock()
	if err != nil {
		return err
	}
	defer func() {
		unlock()
		_ = os.Remove(c.StateDir + ".lock")
	}()
	return c.down(ctx, logf)
}

func (c Config) down(ctx context.Context, logf Logf) error {
	errs := c.downWorkers()
	comps := append(c.components(), c.optionalComponents()...)
	comps = append(comps, c.addons()...)
	comps = append(comps, component{name: RolloutsComponent}, component{name: KEDAComponent}, component{name: KEDAAdapterComponent}, component{name: TraefikComponent})
	slices.Reverse(comps)
	for _, comp := range comps {
		// The state is thrown away, so nothing is gained by waiting long:
		// the kube-apiserver alone would drain its watches for a minute.
		if err := c.stop(comp.name, 3*time.Second); err != nil {
			errs = append(errs, err)
		}
	}
	// Containers and containerd's shims outlive containerd.
	if err := c.killCgroupProcesses(30 * time.Second); err != nil {
		errs = append(errs, err)
	}
	base, err := c.readBaseline()
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, err)
	}
	// Mounts: the kubelet's volumes and root-dir bind mount, containerd's
	// rootfs and shm mounts, all under the state directory.
	if err := unmountMatching(func(p string) bool { return under(p, c.StateDir) }); err != nil {
		errs = append(errs, fmt.Errorf("unmount under %s: %w", c.StateDir, err))
	}
	errs = append(errs, c.teardownWorkerNetworks(ctx)...)
	errs = append(errs, c.teardownNetwork(ctx)...)
	// Pod network namespaces containerd left under /run/netns (and, when
	// `ip netns` created it, /run/netns itself).
	if base != nil {
		known := map[string]bool{}
		for _, m := range base.Mounts {
			known[m] = true
		}
		if err := unmountMatching(func(p string) bool { return under(p, "/run/netns") && !known[p] }); err != nil {
			errs = append(errs, fmt.Errorf("unmount pod namespaces: %w", err))
		}
		if base.Existed["/run/netns"] {
			entries, _ := os.ReadDir("/run/netns")
			for _, e := range entries {
				if !known[filepath.Join("/run/netns", e.Name())] && c.ownNetNS(e.Name()) {
					_ = os.Remove(filepath.Join("/run/netns", e.Name()))
				}
			}
		}
	}
	if err := c.removeCgroups(); err != nil {
		errs = append(errs, err)
	}
	if base != nil {
		errs = append(errs, c.restoreBaseline(base)...)
	}
	if err := c.removeStateDir(); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	logf("cluster down: processes, mounts, namespace, links, guard, cgroups and state removed")
	return nil
}

// ownNetNS reports whether /run/netns/name is one the cluster makes: a node's
// or a pod's.
func (c Config) ownNetNS(name string) bool {
	_, worker := c.workerNumber(name)
	return name == c.NetNS || worker || strings.HasPrefix(name, "cni-")
}

// markerFile marks a directory as a cluster's state directory; Down removes
// no directory without it (ELASTI_CLUSTER_DIR could name anything).
func (c Config) markerFile() string { return c.path(".elasti-cluster") }

func (c Config) removeStateDir() error {
	entries, err := os.ReadDir(c.StateDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if len(entries) > 0 && !fileExists(c.markerFile()) {
		return fmt.Errorf("%s is not a cluster state directory (no %s): not removing it", c.StateDir, filepath.Base(c.markerFile()))
	}
	return os.RemoveAll(c.StateDir)
}
