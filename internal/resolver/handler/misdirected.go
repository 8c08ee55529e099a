package handler

import (
	"net"
	"net/netip"
	"strings"

	"elasti.dev/elasti/internal/resolver/route"
)

// ToResolver reports whether host (a request's Host) is the address the
// connection arrived at, local: the request was addressed to the resolver
// pod itself (toResolver).
func ToResolver(host string, local netip.Addr) bool {
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
// namespace is taken for a Service's short name, not a public domain.
type Namespaces interface {
	Known(namespace string) bool
}

// Misdirected reports whether host (a request's Host, or its :authority)
// names an in-cluster Service other than t's. A resolver port leads to one
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
func Misdirected(host string, rt route.Route, clusterDomain string, namespaces Namespaces) bool {
	host = hostName(host)
	if host == "" {
		return false
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		return toResolver(ip, rt.Local)
	}
	t := rt.Target
	name, ns := strings.ToLower(t.Service.Name), strings.ToLower(t.Service.Namespace)
	labels := strings.Split(host, ".")
	if n := len(labels); n >= 3 {
		// Strip the cluster domain, then look for the svc label.
		rest := host
		if clusterDomain != "" {
			rest = strings.TrimSuffix(host, "."+strings.ToLower(strings.Trim(clusterDomain, ".")))
		}
		if l := strings.Split(rest, "."); len(l) >= 3 && l[len(l)-1] == "svc" {
			return l[len(l)-3] != name || l[len(l)-2] != ns
		}
	}
	switch len(labels) {
	case 1:
		return labels[0] != name
	case 2:
		if namespaces != nil && namespaces.Known(labels[1]) {
			return labels[0] != name || labels[1] != ns
		}
	}
	return false
}
