package handler

import (
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/resolver/route"
)

// refusals counts what requireMapping refused, by kind.
type refusals map[string]int

func (r refusals) Unmapped(types.NamespacedName)                             { r["unmapped"]++ }
func (r refusals) Misdirected(types.NamespacedName)                          { r["misdirected"]++ }
func (r refusals) BadRequest(types.NamespacedName)                           { r["bad"]++ }
func (r refusals) Draining(types.NamespacedName)                             {}
func (r refusals) Static(types.NamespacedName, string)                       {}
func (r refusals) WakingPage(types.NamespacedName, elastiv1alpha1.WakePhase) {}
func (r refusals) Refused(types.NamespacedName, error)                       { r["refused"]++ }

// TestRequireMappingToTheResolverItself: a request addressed to the
// resolver pod's own IP (what a scan of the port range sends) gets the same
// 421 on a mapped port as on an unmapped one, so the answers tell nothing
// of which ports are mapped, and it never reaches the hold, so a scan wakes
// nothing. The Service's own names and other addresses go on; an unmapped
// port still answers them 404.
func TestRequireMappingToTheResolverItself(t *testing.T) {
	local := netip.MustParseAddr("10.244.0.7")
	mapped := route.Route{Target: route.Target{ElastiService: types.NamespacedName{Namespace: "shop", Name: "web"},
		Service: types.NamespacedName{Namespace: "shop", Name: "web"}}, Port: 20001, Mapped: true, Local: local}
	unmapped := route.Route{Port: 20002, Local: local}
	for _, tc := range []struct {
		name   string
		rt     route.Route
		host   string
		status int
	}{
		{"mapped, the resolver's own address", mapped, "10.244.0.7:20001", http.StatusMisdirectedRequest},
		{"unmapped, the resolver's own address", unmapped, "10.244.0.7:20002", http.StatusMisdirectedRequest},
		{"mapped, the Service's name", mapped, "web.shop.svc", http.StatusOK},
		{"mapped, a ClusterIP", mapped, "10.96.4.2", http.StatusOK},
		{"unmapped, a ClusterIP", unmapped, "10.96.4.2", http.StatusNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			held := false
			rec := refusals{}
			h := &requireMapping{next: http.HandlerFunc(func(http.ResponseWriter, *http.Request) { held = true }), rec: rec, hosts: NewHosts("cluster.local", nil)}
			req := httptest.NewRequest(http.MethodGet, "/", nil)
			req.Host = tc.host
			req = req.WithContext(route.With(req.Context(), tc.rt))
			w := httptest.NewRecorder()
			h.ServeHTTP(w, req)
			status := w.Code
			if held {
				status = http.StatusOK
			}
			if status != tc.status {
				t.Errorf("got %d, want %d (body %q)", status, tc.status, w.Body.String())
			}
			if tc.status == http.StatusMisdirectedRequest && rec["misdirected"] != 1 {
				t.Errorf("refusals counted %v, want one misdirected", rec)
			}
		})
	}
	// The two 421s are the same answer.
	answer := func(rt route.Route, host string) string {
		h := &requireMapping{next: http.NotFoundHandler(), rec: refusals{}}
		req := httptest.NewRequest(http.MethodGet, "/", nil)
		req.Host = host
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req.WithContext(route.With(req.Context(), rt)))
		return w.Header().Get("Connection") + " " + w.Body.String()
	}
	if a, b := answer(mapped, "10.244.0.7"), answer(unmapped, "10.244.0.7"); a != b {
		t.Errorf("a mapped port answers %q, an unmapped one %q: a scan tells them apart", a, b)
	}
}
