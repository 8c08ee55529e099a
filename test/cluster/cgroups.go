package cluster

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// cgroupMounts returns the mount point of every cgroup hierarchy (v1
// controllers, named hierarchies and the v2 unified one).
func cgroupMounts() ([]string, error) {
	mounts, err := readMounts()
	if err != nil {
		return nil, err
	}
	var out []string
	for _, m := range mounts {
		if m.fstype == "cgroup" || m.fstype == "cgroup2" {
			out = append(out, m.point)
		}
	}
	return out, nil
}

// componentsCgroup is the cgroup the components (and so containerd's shims)
// run in; the kubelet puts pods in CgroupRoot/kubepods beside it.
func (c Config) componentsCgroup() string { return filepath.Join(c.CgroupRoot, "components") }

// createCgroups creates CgroupRoot and its components child in every
// hierarchy. cpuset cgroups start empty on v1 and must inherit their parent's
// CPUs and memory nodes before a task can join.
func (c Config) createCgroups() error {
	roots, err := cgroupMounts()
	if err != nil {
		return err
	}
	for _, root := range roots {
		for _, rel := range []string{c.CgroupRoot, c.componentsCgroup()} {
			dir := filepath.Join(root, rel)
			if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
				return fmt.Errorf("create cgroup %s: %w", dir, err)
			}
			for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
				parent, err := os.ReadFile(filepath.Join(filepath.Dir(dir), f))
				if err != nil {
					continue // not the cpuset hierarchy
				}
				if err := os.WriteFile(filepath.Join(dir, f), parent, 0o644); err != nil {
					return fmt.Errorf("init %s/%s: %w", dir, f, err)
				}
			}
		}
	}
	return nil
}

// joinComponentsCgroup moves pid into the components cgroup of every
// hierarchy.
func (c Config) joinComponentsCgroup(pid int) error {
	roots, err := cgroupMounts()
	if err != nil {
		return err
	}
	for _, root := range roots {
		f := filepath.Join(root, c.componentsCgroup(), "cgroup.procs")
		if err := os.WriteFile(f, []byte(strconv.Itoa(pid)), 0o644); err != nil {
			return fmt.Errorf("move %d to %s: %w", pid, f, err)
		}
	}
	return nil
}

// cgroupDirs lists CgroupRoot and everything under it in every hierarchy,
// deepest first.
func (c Config) cgroupDirs() []string {
	roots, _ := cgroupMounts()
	var dirs []string
	for _, root := range roots {
		_ = filepath.WalkDir(filepath.Join(root, c.CgroupRoot), func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
	}
	sort.Slice(dirs, func(i, j int) bool { return strings.Count(dirs[i], "/") > strings.Count(dirs[j], "/") })
	return dirs
}

// cgroupPIDs returns every process in CgroupRoot's tree, in any hierarchy.
func (c Config) cgroupPIDs() []int {
	seen := map[int]bool{}
	var pids []int
	for _, dir := range c.cgroupDirs() {
		f, err := os.Open(filepath.Join(dir, "cgroup.procs"))
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if pid, err := strconv.Atoi(strings.TrimSpace(sc.Text())); err == nil && !seen[pid] {
				seen[pid] = true
				pids = append(pids, pid)
			}
		}
		f.Close()
	}
	return pids
}

// killCgroupProcesses SIGKILLs every process left in CgroupRoot's tree (the
// containers and containerd's shims, which outlive containerd) until none
// is left.
func (c Config) killCgroupProcesses(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		pids := c.cgroupPIDs()
		if len(pids) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("processes still in cgroup %s: %v", c.CgroupRoot, pids)
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// removeCgroups removes CgroupRoot's tree, deepest first.
func (c Config) removeCgroups() error {
	var errs []error
	for i := 0; i < 50; i++ {
		errs = nil
		for _, dir := range c.cgroupDirs() {
			if err := syscall.Rmdir(dir); err != nil && !errors.Is(err, syscall.ENOENT) {
				errs = append(errs, fmt.Errorf("remove cgroup %s: %w", dir, err))
			}
		}
		if len(errs) == 0 {
			return nil
		}
		// A cgroup whose last task just died can be busy for a moment.
		time.Sleep(100 * time.Millisecond)
	}
	return errors.Join(errs...)
}
