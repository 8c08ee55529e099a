package admission

import (
	"errors"
	"net/http"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestReadiness(t *testing.T) {
	ready := make(chan struct{})
	var serverErr error
	check := readiness(ready, func(*http.Request) error { return serverErr })
	if err := check(nil); err == nil {
		t.Fatal("ready before the certificate is in place")
	}
	close(ready)
	serverErr = errors.New("webhook server is not reachable")
	if err := check(nil); err == nil {
		t.Fatal("ready while the server does not answer")
	}
	serverErr = nil
	if err := check(nil); err != nil {
		t.Fatalf("not ready with the certificate in place and the server answering: %v", err)
	}
}

func TestConfig(t *testing.T) {
	cfg := Config{Port: 9443, CertDir: "/certs", Namespace: "elasti-system", SecretName: "s", ServiceName: "elasti-operator", ConfigurationName: "w", ExtraDNSNames: []string{"localhost"}}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	want := []string{"elasti-operator.elasti-system.svc", "elasti-operator", "elasti-operator.elasti-system", "elasti-operator.elasti-system.svc.cluster.local", "localhost"}
	if diff := cmp.Diff(want, cfg.dnsNames()); diff != "" {
		t.Errorf("dnsNames (-want +got)\n%s", diff)
	}
	for _, bad := range []func(*Config){
		func(c *Config) { c.Port = 0 },
		func(c *Config) { c.Port = 65536 },
		func(c *Config) { c.CertDir = "" },
		func(c *Config) { c.Namespace = "" },
		func(c *Config) { c.SecretName = "" },
		func(c *Config) { c.ServiceName = "" },
		func(c *Config) { c.ConfigurationName = "" },
	} {
		c := cfg
		bad(&c)
		if err := c.Validate(); err == nil {
			t.Errorf("%+v accepted", c)
		}
	}
}
