package handler

import (
	"net"
	"net/netip"
	"strings"

	"elasti.dev/elasti/internal/resolver/route"
)

// addressedToResolver reports whether host (a request's Host) is the
// address the connection arrived at, local: the request was addressed to
// the resolver pod itself (toResolver).
func addressedToResolver(host string, local netip.Addr) bool {
	ip, err := netip.ParseAddr(hostName(host))
	return err == nil && toResolver(ip, local)
}

// hostName is host without its port, brackets and final dot, in lower
// case.
func hostName(host string) string {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	return strings.Trim(strings.TrimSuffix(strings.ToLower(host), "."), "[]")
}

// toResolver reports whether a Host that is the IP address ip names the
// resolver pod itself (local, the address the connection arrived at):
// a client that addressed the pod directly, by its IP, rather than a
// Service, as a scan of the port range does. Loopback is left alone: only
// the pod itself (and tests) can reach it.
func toResolver(ip, local netip.Addr) bool {
	return local.IsValid() && !local.IsLoopback() && ip.Unmap() == local
}

// Namespaces says whether a namespace has had an ElastiService while this
// resolver ran (ports.PortMap): a host name <name>.<namespace> with such a
// namespace is taken for a Service's short name, not a public domain. The
// namespace is in lower case.
type Namespaces interface {
	Known(namespace string) bool
}

// Hosts tells which Hosts name another Service than a route's (Misdirected).
// Build it once with NewHosts: it is asked on every request.
type Hosts struct {
	// clusterSuffix is "." and the cluster domain, in lower case; empty
	// without one.
	clusterSuffix string
	namespaces    Namespaces
}

// NewHosts returns the Hosts of a cluster whose DNS domain is
// clusterDomain (such as cluster.local), whose namespaces with
// ElastiServices namespaces knows (nil: none).
func NewHosts(clusterDomain string, namespaces Namespaces) Hosts {
	h := Hosts{namespaces: namespaces}
	if d := strings.ToLower(strings.Trim(clusterDomain, ".")); d != "" {
		h.clusterSuffix = "." + d
	}
	return h
}

// Misdirected reports whether host (a request's Host, or its :authority)
// names an in-cluster Service other than rt's. A resolver port leads to one
// Service only, so such a request was meant for another Service: a data
// plane that still routes a freed port (a node cut off from the API
// server, a stuck ingress controller) would otherwise hand it, with its
// cookies and credentials, to whichever Service the port leads to now. It
// is answered 421 and never held or forwarded. See docs/security.md,
// "Resolver ports".
//
// The names that count as a Service's are the cluster's own forms:
// <name> (one label), <name>.<namespace> where the namespace is one
// namespaces knows, and <...>.<name>.<namespace>.svc with or without
// .<clusterDomain>. An IP address names no Service that the resolver could
// tell (a ClusterIP, a node port, a load balancer's address all reach it),
// and any other name may be an ingress's public host: both pass, except
// the resolver pod's own address (toResolver), which names no Service.
// Service names and namespaces are DNS labels, in lower case already.
func (h Hosts) Misdirected(host string, rt route.Route) bool {
	host = hostName(host)
	if host == "" {
		return false
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		return toResolver(ip, rt.Local)
	}
	name, ns := rt.Target.Service.Name, rt.Target.Service.Namespace
	if rest, ok := strings.CutSuffix(strings.TrimSuffix(host, h.clusterSuffix), ".svc"); ok {
		// rest is <...>.<name>.<namespace>; a bare <namespace>.svc names
		// no Service.
		i := strings.LastIndexByte(rest, '.')
		if i < 0 {
			return false
		}
		svc := rest[:i]
		return svc[strings.LastIndexByte(svc, '.')+1:] != name || rest[i+1:] != ns
	}
	first, second, dotted := strings.Cut(host, ".")
	switch {
	case !dotted:
		return host != name
	case strings.Contains(second, "."):
		return false
	case h.namespaces != nil && h.namespaces.Known(second):
		return first != name || second != ns
	}
	return false
}
