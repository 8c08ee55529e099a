package scaling

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"k8s.io/utils/ptr"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
)

func TestServerPolicyCheck(t *testing.T) {
	for _, tc := range []struct {
		entries []string
		trusted string
		allowed []string
		refused []string
	}{
		{DefaultTriggerServers, "http://10.250.0.2:9090",
			[]string{"http://prometheus.monitoring.svc:9090", "https://vm.metrics.svc.cluster.local/select/0/prometheus", "http://PROMETHEUS.Monitoring.SVC.:9090", "http://10.250.0.2:9090/x"},
			[]string{"http://prometheus.monitoring:9090", "http://attacker.example.com", "http://169.254.169.254/latest", "http://10.250.0.3:9090", "http://svc", "http://svc.evil", "not a url"}},
		{[]string{"mimir-gateway.mimir", "*.thanos.svc", "10.96.0.0/12", "fd00::1"}, "",
			[]string{"http://mimir-gateway.mimir/prometheus", "http://query.thanos.svc:9090", "http://10.100.1.2:9090", "http://[fd00::1]:9090"},
			[]string{"http://mimir-gateway.mimir.evil.com", "http://thanos.svc", "http://10.128.0.1", "http://[fd00::2]:9090", "http://a.svc"}},
		{[]string{"*"}, "", []string{"http://anything.example.com", "http://127.0.0.1:1"}, nil},
	} {
		p, err := NewServerPolicy(tc.entries, tc.trusted)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range tc.allowed {
			if err := p.Check(a); err != nil {
				t.Errorf("%v: %s refused: %v", tc.entries, a, err)
			}
		}
		for _, a := range tc.refused {
			if err := p.Check(a); err == nil {
				t.Errorf("%v: %s allowed", tc.entries, a)
			}
		}
	}
	for _, bad := range []string{"10.0.0.0/33", "prom*.svc", "http://prometheus:9090"} {
		if _, err := NewServerPolicy([]string{bad}, ""); err == nil {
			t.Errorf("entry %q accepted", bad)
		}
	}
}

// TestTriggerServersAllowList: with the operator's list in place, a trigger
// whose serverAddress is not on it is unhealthy with ServerNotAllowed and
// no request leaves the operator, credentials or not; a name on the list
// that resolves to loopback is refused at the dial; a CIDR entry that holds
// the address, or the address being the operator's own
// --prometheus-address, lets the query through.
func TestTriggerServersAllowList(t *testing.T) {
	seen := make(chan http.Header, 10)
	url := fakePrometheus(t, map[string]string{"low": vector("0")}, seen) // http://127.0.0.1:port
	token := elastiv1alpha1.TriggerMetadata{
		Threshold:     ptr.To(elastiv1alpha1.Threshold("1")),
		AuthSecretRef: &elastiv1alpha1.SecretKeySelector{Name: "token", Key: "token"},
	}
	evaluate := func(entries []string, trusted, address string) Result {
		t.Helper()
		p, err := NewServerPolicy(entries, trusted)
		if err != nil {
			t.Fatal(err)
		}
		ev := &Evaluator{Secrets: authSecrets(), Timeout: 5 * time.Second, Servers: p}
		return ev.Evaluate(context.Background(), prometheusTrigger(address, token))
	}
	noRequest := func(name string) {
		t.Helper()
		select {
		case h := <-seen:
			t.Errorf("%s: the server got a request (Authorization %q)", name, h.Get("Authorization"))
		default:
		}
	}

	r := evaluate(DefaultTriggerServers, "", url)
	if r.State != StateUnhealthy || r.Reason != ReasonServerNotAllowed || !strings.Contains(r.Message, "metadata.serverAddress") {
		t.Errorf("address off the list: got %+v, want unhealthy ServerNotAllowed naming the field", r)
	}
	noRequest("address off the list")

	// "localhost" is on the list by name, but resolves to loopback.
	r = evaluate([]string{"localhost"}, "", strings.Replace(url, "127.0.0.1", "localhost", 1))
	if r.State != StateUnhealthy || r.Reason != ReasonServerNotAllowed {
		t.Errorf("name resolving to loopback: got %+v, want unhealthy ServerNotAllowed", r)
	}
	noRequest("name resolving to loopback")

	for _, tc := range []struct {
		name             string
		entries          []string
		trusted, address string
	}{
		{"a CIDR entry holds it", []string{"127.0.0.0/8"}, "", url},
		{"the operator's --prometheus-address", DefaultTriggerServers, url, url},
	} {
		r = evaluate(tc.entries, tc.trusted, tc.address)
		if r.State != StateIdle {
			t.Errorf("%s: got %+v, want idle", tc.name, r)
		}
		select {
		case h := <-seen:
			if h.Get("Authorization") == "" {
				t.Errorf("%s: the query came without the trigger's credentials", tc.name)
			}
		default:
			t.Errorf("%s: the server got no request", tc.name)
		}
	}
}

func TestServerNotAllowedWraps(t *testing.T) {
	p, _ := NewServerPolicy(nil, "")
	if err := p.Check("http://x.example.com"); !errors.Is(err, ErrServerNotAllowed) {
		t.Errorf("Check's refusal does not wrap ErrServerNotAllowed: %v", err)
	}
}
