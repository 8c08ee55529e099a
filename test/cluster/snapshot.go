package cluster

import (
	"bytes"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// Snapshot is the part of the machine's state that the cluster touches:
// what Down must leave exactly as Up found it. It ignores what other work on
// the machine changes all the time (processes unrelated to the cluster,
// counters).
type Snapshot struct {
	// Processes are "comm (pid)" of live or zombie processes that belong to
	// a cluster: a command line naming the state directory, or a name only
	// the cluster runs.
	Processes []string
	// Links and Addrs are the host's interfaces and their addresses;
	// Routes and Rules its routing tables and policy rules (v4 and v6).
	Links, Addrs, Routes, Rules []string
	// NetNS lists /run/netns.
	NetNS []string
	// Nftables is `nft -s list ruleset`; IptablesLegacy is the legacy
	// tables, when the machine has them, without counters.
	Nftables, IptablesLegacy string
	// Mounts are the mount points, Cgroups every cgroup directory.
	Mounts, Cgroups []string
	// Sysctls are the host's values of the settings a cluster may change.
	Sysctls map[string]string
	// Paths says which of the paths a cluster may create exist.
	Paths map[string]bool
}

// clusterComms are process names only a cluster's processes have.
var clusterComms = map[string]bool{
	"containerd": true, "containerd-shim": true, "containerd-shim-runc-v2": true, "runc": true,
	"kubelet": true, "kube-proxy": true, "kube-router": true, "prometheus-adap": true, "coredns": true, "pause": true, "demoapp": true,
	"operator": true, "resolver": true,
}

// snapshotSysctls are read on the host for every snapshot.
var snapshotSysctls = append([]string{
	"net/ipv4/ip_forward", "net/ipv4/conf/all/forwarding", "net/ipv4/conf/all/route_localnet",
	"net/ipv4/conf/default/route_localnet", "net/ipv6/conf/all/forwarding", "net/ipv6/conf/all/disable_ipv6",
	"net/bridge/bridge-nf-call-iptables", "net/bridge/bridge-nf-call-ip6tables", "net/bridge/bridge-nf-call-arptables",
	"net/netfilter/nf_conntrack_max", "net/netfilter/nf_conntrack_tcp_timeout_established",
	"net/netfilter/nf_conntrack_tcp_timeout_close_wait", "net/netfilter/nf_conntrack_tcp_be_liberal",
	"fs/inotify/max_user_watches", "fs/inotify/max_user_instances", "kernel/pid_max", "kernel/keys/maxkeys",
}, hostSysctls...)

// TakeSnapshot records the machine's state as the cluster with this Config
// could change it.
func (c Config) TakeSnapshot() (*Snapshot, error) {
	s := &Snapshot{Sysctls: map[string]string{}, Paths: map[string]bool{}}
	s.Processes = c.clusterProcesses()
	ifaces, err := net.Interfaces()
	if err != nil {
		return nil, err
	}
	for _, ifc := range ifaces {
		s.Links = append(s.Links, fmt.Sprintf("%s mtu=%d flags=%s", ifc.Name, ifc.MTU, ifc.Flags))
		addrs, _ := ifc.Addrs()
		for _, a := range addrs {
			s.Addrs = append(s.Addrs, ifc.Name+" "+a.String())
		}
	}
	for _, args := range [][]string{
		{"-4", "route", "show", "table", "all"}, {"-6", "route", "show", "table", "all"},
	} {
		s.Routes = append(s.Routes, lines(output("ip", args...))...)
	}
	for _, args := range [][]string{{"-4", "rule"}, {"-6", "rule"}} {
		s.Rules = append(s.Rules, lines(output("ip", args...))...)
	}
	if entries, err := os.ReadDir("/run/netns"); err == nil {
		for _, e := range entries {
			s.NetNS = append(s.NetNS, e.Name())
		}
	}
	s.Nftables = output("nft", "-s", "list", "ruleset")
	counters := regexp.MustCompile(`\[\d+:\d+\]`)
	for _, save := range []string{"iptables-legacy-save", "ip6tables-legacy-save"} {
		if _, err := exec.LookPath(save); err == nil {
			for _, l := range lines(output(save)) {
				if !strings.HasPrefix(l, "#") {
					s.IptablesLegacy += counters.ReplaceAllString(l, "") + "\n"
				}
			}
		}
	}
	mounts, err := readMounts()
	if err != nil {
		return nil, err
	}
	for _, m := range mounts {
		s.Mounts = append(s.Mounts, m.point+" "+m.fstype)
	}
	roots, _ := cgroupMounts()
	for _, root := range roots {
		_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				s.Cgroups = append(s.Cgroups, p)
				// The machine's command runner gives every command
				// (other sessions' builds too) a cgroup of its own
				// here: other work's churn, never the cluster's.
				if d.Name() == "process_api" {
					return filepath.SkipDir
				}
			}
			return nil
		})
	}
	for _, k := range snapshotSysctls {
		if v, err := readSysctl(k); err == nil {
			s.Sysctls[k] = v
		}
	}
	for _, p := range append([]string{c.StateDir, c.StateDir + ".lock"}, outsidePaths...) {
		s.Paths[p] = fileExists(p)
	}
	for _, l := range [][]string{s.Processes, s.Links, s.Addrs, s.Routes, s.Rules, s.NetNS, s.Mounts, s.Cgroups} {
		sort.Strings(l)
	}
	return s, nil
}

func (c Config) clusterProcesses() []string {
	var out []string
	for _, p := range c.clusterProcessList() {
		out = append(out, fmt.Sprintf("%s (%d)", p.name, p.pid))
	}
	return out
}

// process is one process on the machine.
type process struct {
	pid  int
	name string
}

// clusterProcessList lists the processes that belong to a cluster: by name,
// or by a command line naming the state directory.
func (c Config) clusterProcessList() []process {
	var out []process
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		comm, err := os.ReadFile(filepath.Join("/proc", e.Name(), "comm"))
		if err != nil {
			continue
		}
		name := strings.TrimSpace(string(comm))
		cmdline, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if clusterComms[name] || bytes.Contains(cmdline, []byte(c.StateDir+"/")) {
			out = append(out, process{pid: pid, name: name})
		}
	}
	return out
}

func output(name string, args ...string) string {
	out, err := exec.Command(name, args...).Output()
	if err != nil {
		return fmt.Sprintf("<%s %s: %v>", name, strings.Join(args, " "), err)
	}
	return string(out)
}

func lines(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}

// Diff lists every difference between s (before) and after, one line each,
// "-" for what went missing and "+" for what was left behind. Empty means the
// machine is as it was.
func (s *Snapshot) Diff(after *Snapshot) []string {
	var d []string
	set := func(what string, a, b []string) {
		in := func(l []string) map[string]bool {
			m := map[string]bool{}
			for _, x := range l {
				m[x] = true
			}
			return m
		}
		ma, mb := in(a), in(b)
		for _, x := range a {
			if !mb[x] {
				d = append(d, fmt.Sprintf("%s: - %s", what, x))
			}
		}
		for _, x := range b {
			if !ma[x] {
				d = append(d, fmt.Sprintf("%s: + %s", what, x))
			}
		}
	}
	set("process", s.Processes, after.Processes)
	set("link", s.Links, after.Links)
	set("address", s.Addrs, after.Addrs)
	set("route", s.Routes, after.Routes)
	set("rule", s.Rules, after.Rules)
	set("netns", s.NetNS, after.NetNS)
	set("nftables", lines(s.Nftables), lines(after.Nftables))
	set("iptables-legacy", lines(s.IptablesLegacy), lines(after.IptablesLegacy))
	set("mount", s.Mounts, after.Mounts)
	set("cgroup", s.Cgroups, after.Cgroups)
	keys := func(m map[string]string) []string {
		var k []string
		for x := range m {
			k = append(k, x)
		}
		sort.Strings(k)
		return k
	}
	for _, k := range keys(s.Sysctls) {
		if s.Sysctls[k] != after.Sysctls[k] {
			d = append(d, fmt.Sprintf("sysctl: %s was %q, now %q", k, s.Sysctls[k], after.Sysctls[k]))
		}
	}
	var paths []string
	for p := range s.Paths {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		if s.Paths[p] != after.Paths[p] {
			d = append(d, fmt.Sprintf("path: %s existed=%v, now %v", p, s.Paths[p], after.Paths[p]))
		}
	}
	return d
}
