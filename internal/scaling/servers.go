package scaling

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"syscall"
	"time"
)

// DefaultTriggerServers is the operator's --trigger-servers when the cluster
// admin names none: Services of the cluster by their full DNS names. The
// host of --prometheus-address is allowed whatever the list says.
var DefaultTriggerServers = []string{"*.svc", "*.svc.cluster.local"}

// ErrServerNotAllowed means a trigger's serverAddress is not on the cluster
// admin's list (--trigger-servers).
var ErrServerNotAllowed = errors.New("not on the operator's --trigger-servers")

// ServerPolicy is the cluster admin's list of servers that prometheus
// triggers may query: the operator sends these queries, with the
// credentials a trigger names, to an address a tenant writes, so without a
// list it would fetch any URL in the cluster's network for whoever may
// create an ElastiService (docs/security.md, "Calls to trigger servers").
//
// An entry is a host name ("prometheus.monitoring.svc"), a wildcard that
// matches any name ending in what follows the star ("*.svc"), a CIDR that
// matches serverAddresses written as IP addresses in it ("10.96.0.0/12"), or
// "*" for any address. The host of the operator's own --prometheus-address
// is allowed too.
//
// Names are checked as written; the addresses they resolve to are checked
// when dialing (Transport): loopback, link-local (cloud metadata) and
// unspecified addresses are never dialed for a tenant's serverAddress,
// unless a CIDR entry holds them.
type ServerPolicy struct {
	entries  []string
	names    map[string]bool
	suffixes []string
	prefixes []netip.Prefix
	any      bool
	// trustedHost is the host of --prometheus-address.
	trustedHost string

	transport *http.Transport
}

// NewServerPolicy parses the entries of --trigger-servers; trustedAddress
// is --prometheus-address (may be empty).
func NewServerPolicy(entries []string, trustedAddress string) (*ServerPolicy, error) {
	p := &ServerPolicy{names: map[string]bool{}}
	for _, raw := range entries {
		e := strings.ToLower(strings.TrimSpace(raw))
		switch {
		case e == "":
			continue
		case e == "*":
			p.any = true
		case strings.HasPrefix(e, "*."):
			p.suffixes = append(p.suffixes, strings.TrimSuffix(e[1:], "."))
		case strings.Contains(e, "/"):
			prefix, err := netip.ParsePrefix(e)
			if err != nil {
				return nil, fmt.Errorf("--trigger-servers entry %q: not a CIDR such as 10.96.0.0/12: %w", raw, err)
			}
			p.prefixes = append(p.prefixes, prefix.Masked())
		default:
			if ip, err := netip.ParseAddr(e); err == nil {
				p.prefixes = append(p.prefixes, netip.PrefixFrom(ip.Unmap(), ip.Unmap().BitLen()))
				break
			}
			if strings.ContainsAny(e, "*:?@ ") {
				return nil, fmt.Errorf("--trigger-servers entry %q: write a host name (prometheus.monitoring.svc), a wildcard (*.svc), a CIDR (10.96.0.0/12) or *", raw)
			}
			p.names[strings.TrimSuffix(e, ".")] = true
		}
		p.entries = append(p.entries, e)
	}
	if trustedAddress != "" {
		u, err := url.Parse(trustedAddress)
		if err != nil {
			return nil, fmt.Errorf("--prometheus-address %q: %w", trustedAddress, err)
		}
		p.trustedHost = strings.ToLower(u.Hostname())
	}
	base, ok := http.DefaultTransport.(*http.Transport)
	if !ok {
		return nil, errors.New("http.DefaultTransport is not an *http.Transport")
	}
	p.transport = base.Clone()
	dialer := &net.Dialer{Timeout: defaultDialTimeout, KeepAlive: defaultDialTimeout, Control: p.controlDial}
	p.transport.DialContext = dialer.DialContext
	return p, nil
}

// defaultDialTimeout is net/http's default transport's.
const defaultDialTimeout = 30 * time.Second

// String lists the entries as the flag takes them.
func (p *ServerPolicy) String() string {
	if len(p.entries) == 0 {
		return "(none)"
	}
	return strings.Join(p.entries, ",")
}

// Check reports whether a trigger may query address: nil, or an error
// wrapping ErrServerNotAllowed that says which list refused it.
func (p *ServerPolicy) Check(address string) error {
	u, err := url.Parse(address)
	if err != nil || u.Host == "" {
		return fmt.Errorf("%q is not a URL such as http://prometheus.monitoring.svc:9090", address)
	}
	host := strings.TrimSuffix(strings.ToLower(u.Hostname()), ".")
	if p.trusted(host) || p.any {
		return nil
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		if p.holds(ip.Unmap()) {
			return nil
		}
	} else if p.names[host] || p.matchesSuffix(host) {
		return nil
	}
	return fmt.Errorf("%s is %w (%s); ask the cluster admin to add it, or use a Service's full name such as http://prometheus.monitoring.svc:9090", host, ErrServerNotAllowed, p.String())
}

// Trusted reports whether address is on the host of --prometheus-address,
// which the cluster admin chose: it is queried without the dial checks.
func (p *ServerPolicy) Trusted(address string) bool {
	u, err := url.Parse(address)
	return err == nil && p.trusted(strings.TrimSuffix(strings.ToLower(u.Hostname()), "."))
}

func (p *ServerPolicy) trusted(host string) bool { return p.trustedHost != "" && host == p.trustedHost }

func (p *ServerPolicy) matchesSuffix(host string) bool {
	for _, s := range p.suffixes {
		if strings.HasSuffix(host, s) && len(host) > len(s) {
			return true
		}
	}
	return false
}

func (p *ServerPolicy) holds(ip netip.Addr) bool {
	for _, prefix := range p.prefixes {
		if prefix.Contains(ip) {
			return true
		}
	}
	return false
}

// Transport dials only addresses a tenant's serverAddress may reach: a
// name on the list may resolve anywhere but to loopback, link-local or
// unspecified addresses (a node's own ports, a cloud's metadata server),
// unless a CIDR entry holds them. It carries every query except those to
// the trusted --prometheus-address.
func (p *ServerPolicy) Transport() http.RoundTripper { return p.transport }

// controlDial refuses a connection to an address no tenant may make the
// operator dial.
func (p *ServerPolicy) controlDial(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("dial %s: %w", address, err)
	}
	ip := ap.Addr().Unmap()
	if p.holds(ip) {
		return nil
	}
	if ip.IsLoopback() || ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() || ip.IsUnspecified() || ip.IsMulticast() {
		return fmt.Errorf("dial %s: %w: a trigger's server may not be a loopback, link-local or unspecified address unless a --trigger-servers CIDR holds it", address, ErrServerNotAllowed)
	}
	return nil
}
