package cluster

import (
	"regexp"
	"testing"
)

// TestTraefikIngressRouter: the relabeling that gives Traefik's Ingress
// routers their namespace and Ingress labels reads them back from the router
// names Traefik makes (<namespace>-<name>-<host>-<path>, everything but
// letters and digits turned into '-', then "@kubernetes"), for the names it
// is documented to take, and leaves other routers unlabelled. Prometheus
// anchors a relabeling regex at both ends, as here.
func TestTraefikIngressRouter(t *testing.T) {
	re := regexp.MustCompile("^(?:" + traefikIngressRouter + ")$")
	for _, c := range []struct {
		router, namespace, ingress string
	}{
		// An e2e test's Ingress for the path /<namespace>.
		{"e2e-0a1b2c-demoapp-e2e-0a1b2c@kubernetes", "e2e-0a1b2c", "demoapp"},
		// docs/hpa.md's Ingress: no host, the path /.
		{"web-api@kubernetes", "web", "api"},
		// With a host.
		{"web-api-api-web-example-com@kubernetes", "web", "api"},
		// Not an Ingress's router.
		{"httproute-e2e-0a1b2c-demoapp-gw-front-door-front-door-ep-web-0-1c0000a0b2c9d1e8f7a6@kubernetesgateway", "", ""},
		{"ping@internal", "", ""},
	} {
		m := re.FindStringSubmatch(c.router)
		var ns, ing string
		if m != nil {
			ns, ing = m[1], m[2]
		}
		if ns != c.namespace || ing != c.ingress {
			t.Errorf("router %q: namespace %q, ingress %q; want %q, %q", c.router, ns, ing, c.namespace, c.ingress)
		}
	}
}
