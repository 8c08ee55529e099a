package admission

import (
	"crypto/x509"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/open-policy-agent/cert-controller/pkg/rotator"
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
	// With the metrics API its Service's name comes first: the one
	// cert-controller checks, so a certificate without it is renewed.
	api := cfg
	api.APIService, api.APIServiceService = "v1beta1.external.metrics.k8s.io", "elasti-metrics-api"
	want = append([]string{"elasti-metrics-api.elasti-system.svc", "elasti-metrics-api.elasti-system.svc.cluster.local"}, want...)
	if diff := cmp.Diff(want, api.dnsNames()); diff != "" {
		t.Errorf("dnsNames with the metrics API (-want +got)\n%s", diff)
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

// TestMetricsAPIRenewsTheCertificate: cert-controller keeps a certificate
// it finds as long as it is valid for the first of dnsNames, the only name
// it checks. A certificate made before the metrics API was on is not valid
// for the metrics API's Service, so turning it on renews it; one made with
// it stays valid for the webhook's Service when the metrics API is turned
// off again.
func TestMetricsAPIRenewsTheCertificate(t *testing.T) {
	webhookOnly := Config{Namespace: "elasti-system", ServiceName: "elasti-operator"}
	withAPI := webhookOnly
	withAPI.APIService, withAPI.APIServiceService = "v1beta1.external.metrics.k8s.io", "elasti-metrics-api"
	usages := []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	issue := func(c Config) (ca, crt, key []byte) {
		t.Helper()
		names := c.dnsNames()
		r := &rotator.CertRotator{CAName: "elasti-webhook-ca", CAOrganization: "elasti.dev", DNSName: names[0], ExtraDNSNames: names[1:], ExtKeyUsages: &usages}
		now := time.Now()
		pair, err := r.CreateCACert(now.Add(-time.Hour), now.Add(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		crt, key, err = r.CreateCertPEM(pair, now.Add(-time.Hour), now.Add(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		return pair.CertPEM, crt, key
	}
	valid := func(ca, crt, key []byte, c Config) bool {
		t.Helper()
		ok, err := rotator.ValidCert(ca, crt, key, c.dnsNames()[0], &usages, time.Now())
		if err != nil && ok {
			t.Fatal(err)
		}
		return ok
	}
	ca, crt, key := issue(webhookOnly)
	if !valid(ca, crt, key, webhookOnly) {
		t.Fatal("a certificate is not valid for the config it was made for")
	}
	if valid(ca, crt, key, withAPI) {
		t.Error("a certificate made without the metrics API passes cert-controller's check with it: it would not be renewed")
	}
	ca, crt, key = issue(withAPI)
	if !valid(ca, crt, key, webhookOnly) {
		t.Error("a certificate made with the metrics API fails the check without it: turning it off would renew it needlessly")
	}
}
