package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// run runs a command and returns its combined output in the error.
func run(ctx context.Context, name string, args ...string) error {
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// ErrAddressInUse means one of the cluster's ranges overlaps an address or a
// route the machine already has; the cluster must never shadow them.
var ErrAddressInUse = errors.New("cluster address range overlaps the machine's network")

// checkAddresses refuses ranges that overlap any address on the machine.
// Routes through the cluster's own link (left by a crashed run) are ignored:
// Down removes them first.
func (c Config) checkAddresses() error {
	ifaces, err := net.Interfaces()
	if err != nil {
		return err
	}
	ranges := []netip.Prefix{c.NodeRange, c.ClusterPodCIDR, c.ServiceCIDR}
	for _, ifc := range ifaces {
		if ifc.Name == c.HostLink {
			continue
		}
		addrs, err := ifc.Addrs()
		if err != nil {
			return err
		}
		for _, a := range addrs {
			p, err := netip.ParsePrefix(a.String())
			if err != nil || !p.Addr().Is4() || p.Addr().IsLoopback() {
				continue
			}
			for _, r := range ranges {
				if r.Overlaps(p.Masked()) {
					return fmt.Errorf("%w: %s on %s overlaps %s", ErrAddressInUse, p, ifc.Name, r)
				}
			}
		}
	}
	return nil
}

// setupNetwork creates the node's namespace and the veth pair to it, gives
// the host routes to the pod and Service ranges through it, and installs the
// guards. The host's own forwarding setting is left alone.
func (c Config) setupNetwork(ctx context.Context) error {
	if err := c.checkAddresses(); err != nil {
		return err
	}
	hostPrefix := netip.PrefixFrom(c.HostIP, c.LinkPrefix.Bits()).String()
	nodePrefix := netip.PrefixFrom(c.NodeIP, c.LinkPrefix.Bits()).String()
	ns := c.NetNS
	steps := [][]string{
		{"ip", "netns", "add", ns},
		{"ip", "link", "add", c.HostLink, "type", "veth", "peer", "name", c.NodeLink, "netns", ns},
	}
	for _, s := range steps {
		if err := run(ctx, s[0], s[1:]...); err != nil {
			return err
		}
	}
	// No IPv6 on the link: no router solicitations or other chatter.
	if err := writeSysctl(filepath.Join("net/ipv6/conf", c.HostLink, "disable_ipv6"), "1"); err != nil {
		return err
	}
	if err := setNodeSysctls(c.NetNSPath()); err != nil {
		return err
	}
	steps = [][]string{
		{"ip", "addr", "add", hostPrefix, "dev", c.HostLink},
		{"ip", "link", "set", c.HostLink, "up"},
		{"ip", "-n", ns, "link", "set", "lo", "up"},
		{"ip", "-n", ns, "addr", "add", nodePrefix, "dev", c.NodeLink},
		{"ip", "-n", ns, "link", "set", c.NodeLink, "up"},
		// Locally sent packets to a ClusterIP need a route before
		// kube-proxy's DNAT picks the pod.
		{"ip", "-n", ns, "route", "add", c.ServiceCIDR.String(), "dev", c.NodeLink, "src", c.NodeIP.String()},
		// The host reaches pods, ClusterIPs and the further nodes
		// through this node, so a test or an out-of-cluster operator
		// can, and a mistaken packet to those ranges never takes the
		// host's default route.
		{"ip", "route", "add", c.ClusterPodCIDR.String(), "via", c.NodeIP.String(), "dev", c.HostLink},
		{"ip", "route", "add", c.ServiceCIDR.String(), "via", c.NodeIP.String(), "dev", c.HostLink},
		{"ip", "route", "add", c.NodeRange.String(), "via", c.NodeIP.String(), "dev", c.HostLink},
	}
	for _, s := range steps {
		if err := run(ctx, s[0], s[1:]...); err != nil {
			return err
		}
	}
	return c.installGuards(ctx)
}

// setNodeSysctls sets, in the node namespace at path: forwarding between its
// links and the pods' bridge, bridged pod traffic through iptables
// (kube-proxy needs it), no IPv6. All of these are per-namespace and vanish
// with it.
func setNodeSysctls(path string) error {
	return inNetNS(path, func() error {
		for key, val := range map[string]string{
			"net/ipv4/ip_forward":                 "1",
			"net/ipv6/conf/all/disable_ipv6":      "1",
			"net/ipv6/conf/default/disable_ipv6":  "1",
			"net/bridge/bridge-nf-call-iptables":  "1",
			"net/bridge/bridge-nf-call-ip6tables": "1",
		} {
			if err := writeSysctl(key, val); err != nil && !errors.Is(err, os.ErrNotExist) {
				return err
			}
		}
		return nil
	})
}

// installGuards adds two nftables tables. On the host: never forward
// anything to or from the cluster's link, whatever the host's ip_forward
// says, so no cluster packet reaches the machine's real interfaces. In the
// node: forward nothing out of the node's link except to the host's address.
func (c Config) installGuards(ctx context.Context) error {
	host := fmt.Sprintf(`table inet %[1]s {
	chain forward {
		type filter hook forward priority -10; policy accept;
		iifname %[2]q counter drop
		oifname %[2]q counter drop
	}
}
`, c.GuardTable, c.HostLink)
	if err := nftApply(ctx, "", host); err != nil {
		return fmt.Errorf("install host guard: %w", err)
	}
	node := fmt.Sprintf(`table inet %[1]s {
	chain forward {
		type filter hook forward priority -10; policy accept;
		oifname %[2]q ip daddr != %[3]s counter drop
		oifname %[2]q meta nfproto ipv6 counter drop
	}
}
`, c.GuardTable, c.NodeLink, c.HostIP)
	if err := nftApply(ctx, c.NetNS, node); err != nil {
		return fmt.Errorf("install node guard: %w", err)
	}
	return nil
}

func nftApply(ctx context.Context, netns, ruleset string) error {
	args := []string{"-f", "-"}
	name := "nft"
	if netns != "" {
		name, args = "ip", append([]string{"netns", "exec", netns, "nft"}, args...)
	}
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdin = strings.NewReader(ruleset)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("nft: %w: %s", err, out)
	}
	return nil
}

// teardownNetwork removes the guard, the veth pair (and with it the host's
// routes) and the namespace. Each step tolerates what is already gone.
func (c Config) teardownNetwork(ctx context.Context) []error {
	var errs []error
	if exec.CommandContext(ctx, "nft", "list", "table", "inet", c.GuardTable).Run() == nil {
		if err := run(ctx, "nft", "delete", "table", "inet", c.GuardTable); err != nil {
			errs = append(errs, err)
		}
	}
	if _, err := net.InterfaceByName(c.HostLink); err == nil {
		if err := run(ctx, "ip", "link", "del", c.HostLink); err != nil {
			errs = append(errs, err)
		}
	}
	if fileExists(c.NetNSPath()) {
		if err := run(ctx, "ip", "netns", "del", c.NetNS); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// writeSysctl writes /proc/sys/<key> (key in path form: net/ipv4/ip_forward).
func writeSysctl(key, val string) error {
	return os.WriteFile(filepath.Join("/proc/sys", key), []byte(val), 0o644)
}

func readSysctl(key string) (string, error) {
	b, err := os.ReadFile(filepath.Join("/proc/sys", key))
	return strings.TrimSpace(string(b)), err
}
