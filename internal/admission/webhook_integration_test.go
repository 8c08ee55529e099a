//go:build integration

package admission

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/yaml"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/scaling"
	"elasti.dev/elasti/internal/testenv"
	"elasti.dev/elasti/internal/testenv/estest"
)

// The operator's namespace in this test, and the namespace of the
// ElastiServices.
const (
	operatorNS = "elasti-system"
	appsNS     = "webhook-apps"
	secretName = "elasti-webhook-cert"
	service    = "elasti-operator"
)

// TestWebhook runs the webhook as the operator does (Setup: the rotator,
// the copy of its certificate, the gated server) against a real API
// server that calls it through config/webhook's ValidatingWebhookConfiguration,
// pointed at localhost instead of the Service, and proves:
//   - the replica is not ready before the certificate is in place, and is
//     after; the Secret then holds a CA and a serving certificate for the
//     Service's DNS names, and the configuration's caBundle is that CA;
//   - schedules the cron parser refuses are refused with its words, valid
//     ones pass;
//   - a metadata-only update of an object whose stored schedule is now
//     refused goes through, while a spec update of it does not;
//   - the CA is published in a ConfigMap, and the activation server speaks
//     TLS with the webhook's certificate (activationOverTLS);
//   - a serving certificate close to expiry is renewed, and the webhook
//     and activation servers switch to the new one.
func TestWebhook(t *testing.T) {
	certFilesFast, certFilesSlow = 200*time.Millisecond, 500*time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := env.Client
	for _, ns := range []string{operatorNS, appsNS} {
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}

	// Stored before the webhook exists: only CEL's shape check applies.
	legacy := estest.New(appsNS, "legacy", window("61 * * * *", "1h"))
	if err := c.Create(ctx, legacy); err != nil {
		t.Fatalf("create an ElastiService with minute 61 before the webhook exists: %v", err)
	}

	// The install's objects: the empty Secret and config/webhook's
	// configuration, called by URL. Removed at the end, the configuration
	// first, so that another run in this process starts clean.
	secretObj := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: operatorNS, Name: secretName}}
	if err := c.Create(ctx, secretObj); err != nil {
		t.Fatal(err)
	}
	port := testenv.FreePort(t)
	vwc := webhookConfiguration(t, port)
	if err := c.Create(ctx, vwc); err != nil {
		t.Fatalf("create the ValidatingWebhookConfiguration: %v", err)
	}
	t.Cleanup(func() {
		bg := context.Background()
		caCM := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: operatorNS, Name: caConfigMapName}}
		for _, obj := range []client.Object{vwc, secretObj, caCM} {
			if err := c.Delete(bg, obj); err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("delete %s: %v", obj.GetName(), err)
			}
		}
		if err := c.DeleteAllOf(bg, &elastiv1alpha1.ElastiService{}, client.InNamespace(appsNS)); err != nil {
			t.Errorf("delete the ElastiServices: %v", err)
		}
	})

	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme: env.Scheme, Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
	})
	if err != nil {
		t.Fatal(err)
	}
	certDir := t.TempDir()
	serving, err := Setup(mgr, Config{Port: port, CertDir: certDir, Namespace: operatorNS, SecretName: secretName,
		ServiceName: service, ConfigurationName: vwc.Name, ExtraDNSNames: []string{"localhost"}, CAConfigMapName: caConfigMapName,
		ReviewAccess: true, Limits: limits(t)})
	if err != nil {
		t.Fatal(err)
	}
	ready := serving.Ready
	activationPort := addActivationServer(t, mgr, serving)
	probe := httptest.NewRequest("GET", "/readyz", nil)
	if err := ready(probe); err == nil {
		t.Fatal("ready before the manager started")
	}
	mgrDone := make(chan error, 1)
	go func() { mgrDone <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-mgrDone; err != nil {
			t.Errorf("manager: %v", err)
		}
	})
	start := time.Now()
	testenv.Eventually(t, time.Minute, "the webhook ready", func() error { return ready(probe) })
	t.Logf("ready %s after start", time.Since(start).Round(time.Millisecond))

	// The certificate: a CA in the Secret and in the caBundle, and a
	// serving pair for the Service's names.
	var secret corev1.Secret
	if err := c.Get(ctx, client.ObjectKey{Namespace: operatorNS, Name: secretName}, &secret); err != nil {
		t.Fatal(err)
	}
	caPEM := secret.Data["ca.crt"]
	if err := c.Get(ctx, client.ObjectKeyFromObject(vwc), vwc); err != nil {
		t.Fatal(err)
	}
	if got := vwc.Webhooks[0].ClientConfig.CABundle; len(caPEM) == 0 || !bytes.Equal(got, caPEM) {
		t.Fatalf("caBundle is not the Secret's CA:\ncaBundle %q\nca.crt %q", got, caPEM)
	}
	leaf := parseCert(t, secret.Data["tls.crt"])
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(caPEM)
	for _, name := range []string{service + "." + operatorNS + ".svc", service + "." + operatorNS + ".svc.cluster.local", "localhost"} {
		if _, err := leaf.Verify(x509.VerifyOptions{DNSName: name, Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
			t.Errorf("the serving certificate is not valid for %s: %v", name, err)
		}
	}
	if served := servedCert(t, port, roots); !served.Equal(leaf) {
		t.Errorf("the server presents serial %s, the Secret holds %s", served.SerialNumber, leaf.SerialNumber)
	}

	t.Run("activation over TLS", func(t *testing.T) {
		activationOverTLS(t, ctx, c, activationPort, caPEM)
	})

	t.Run("schedules", func(t *testing.T) {
		for _, tc := range []struct{ name, schedule, parserErr string }{
			{"minute-61", "61 * * * *", "end of range (61) above maximum (59): 61"},
			{"backwards-range", "5-1 * * * *", "beginning of range (5) beyond end of range (1): 5-1"},
			{"workdays", "0 9 * * 1-5", ""},
			{"daily", "@daily", ""},
		} {
			err := createThroughWebhook(ctx, c, estest.New(appsNS, tc.name, window(tc.schedule, "8h")))
			if tc.parserErr == "" {
				if err != nil {
					t.Errorf("schedule %q refused: %v", tc.schedule, err)
				}
				continue
			}
			want := `admission webhook "elastiservices.elasti.dev" denied the request: spec.enabledPeriod.schedule: ` + tc.parserErr +
				`; use a five-field cron expression such as "0 9 * * 1-5" or a descriptor such as @daily`
			if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), want) {
				t.Errorf("schedule %q:\n got %v\nwant an Invalid error containing %s", tc.schedule, err, want)
			}
		}
	})

	t.Run("the author's access, through the API server", func(t *testing.T) {
		// TestAccessReview covers the reviews; this is the same refusal
		// as kubectl shows it, for a user the API server authenticated.
		role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: appsNS, Name: "elastiservices-only"},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{elastiv1alpha1.GroupVersion.Group}, Resources: []string{"elastiservices"}, Verbs: []string{"*"}}}}
		rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: appsNS, Name: "elastiservices-only"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "webhook-tenant"}}}
		for _, o := range []client.Object{role, rb} {
			if err := c.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
				t.Fatal(err)
			}
		}
		rc := rest.CopyConfig(env.Config)
		rc.Impersonate = rest.ImpersonationConfig{UserName: "webhook-tenant"}
		tenant, err := client.New(rc, client.Options{Scheme: env.Scheme})
		if err != nil {
			t.Fatal(err)
		}
		err = createThroughWebhook(ctx, tenant, estest.New(appsNS, "tenant-web"))
		want := `admission webhook "elastiservices.elasti.dev" denied the request: spec.scaleTargetRef: webhook-tenant may not update deployments.apps/scale "tenant-web" in namespace ` + appsNS
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), want) {
			t.Errorf("an ElastiService from a user who may not scale its target:\n got %v\nwant Forbidden containing %s", err, want)
		}
		if err := createThroughWebhook(ctx, c, estest.New(appsNS, "admin-web")); err != nil {
			t.Errorf("the same ElastiService from an admin: %v", err)
		}
	})

	t.Run("the cluster admin's limits", func(t *testing.T) {
		for _, tc := range []struct {
			name string
			opt  estest.Option
			want string
		}{
			{"on-the-list", estest.Prometheus("http://prometheus.monitoring.svc:9090", "vector(0)", "1"), ""},
			{"within-ceilings", func(es *elastiv1alpha1.ElastiService) {
				es.Spec.Proxy = &elastiv1alpha1.ProxySpec{MaxHeldRequests: 100, HoldTimeout: "10m"}
			}, ""},
			{"off-the-list", estest.Prometheus("http://attacker.example.com", "vector(0)", "1"),
				`spec.triggers[0].metadata.serverAddress: attacker.example.com is not on the operator's --trigger-servers (*.svc,*.svc.cluster.local)`},
			{"metadata-server", estest.Prometheus("http://169.254.169.254/latest", "vector(0)", "1"),
				`spec.triggers[0].metadata.serverAddress: 169.254.169.254 is not on the operator's --trigger-servers`},
			{"too-many-held", func(es *elastiv1alpha1.ElastiService) {
				es.Spec.Proxy = &elastiv1alpha1.ProxySpec{MaxHeldRequests: 5000}
			},
				`spec.proxy.maxHeldRequests: 5000 is above 100, the most one ElastiService may hold per resolver in this cluster (operator --max-held-requests-ceiling)`},
			{"too-long-hold", func(es *elastiv1alpha1.ElastiService) { es.Spec.Proxy = &elastiv1alpha1.ProxySpec{HoldTimeout: "45m"} },
				`spec.proxy.holdTimeout: 45m is longer than 30m0s, the longest hold in this cluster (operator --hold-timeout-ceiling)`},
		} {
			err := createThroughWebhook(ctx, c, estest.New(appsNS, "limits-"+tc.name, tc.opt))
			if tc.want == "" {
				if err != nil {
					t.Errorf("%s refused: %v", tc.name, err)
				}
				continue
			}
			if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s:\n got %v\nwant an Invalid error containing %s", tc.name, err, tc.want)
			}
			if err := c.Get(ctx, client.ObjectKey{Namespace: appsNS, Name: "limits-" + tc.name}, &elastiv1alpha1.ElastiService{}); !apierrors.IsNotFound(err) {
				t.Errorf("%s: the refused ElastiService exists (%v)", tc.name, err)
			}
		}
	})

	t.Run("time zones and pre-warm schedules", func(t *testing.T) {
		// Each name has the shape the CRD admits; only loading it, as the
		// operator does, tells a zone from a typo.
		for _, tc := range []struct {
			name string
			opts []estest.Option
			want string
		}{
			{"zones", []estest.Option{window("0 8 * * 1-5", "11h"), zone("Europe/Berlin"), withPreWarm("55 8 * * 1-5", "Europe/Berlin")}, ""},
			{"unknown-window-zone", []estest.Option{window("0 8 * * 1-5", "11h"), zone("Europe/Berlinn")},
				`spec.enabledPeriod.timeZone: load time zone: unknown time zone Europe/Berlinn; use an IANA time zone name such as Europe/Berlin, America/New_York or UTC`},
			{"unknown-prewarm-zone", []estest.Option{withPreWarm("55 8 * * 1-5", "America/Springfield")},
				`spec.preWarm.timeZone: load time zone: unknown time zone America/Springfield; use an IANA time zone name such as Europe/Berlin, America/New_York or UTC`},
			{"prewarm-minute-61", []estest.Option{withPreWarm("61 8 * * 1-5", "Europe/Berlin")},
				`spec.preWarm.schedule: end of range (61) above maximum (59): 61; use a five-field cron expression such as "55 8 * * 1-5" or a descriptor such as @daily`},
		} {
			err := createThroughWebhook(ctx, c, estest.New(appsNS, tc.name, tc.opts...))
			if tc.want == "" {
				if err != nil {
					t.Errorf("%s refused: %v", tc.name, err)
				}
				continue
			}
			want := `admission webhook "elastiservices.elasti.dev" denied the request: ` + tc.want
			if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), want) {
				t.Errorf("%s:\n got %v\nwant an Invalid error containing %s", tc.name, err, want)
			}
		}
	})

	t.Run("duration too long for CEL to read", func(t *testing.T) {
		// Go syntax, so the CRD's format rule passes; too many digits for
		// its positivity rule to call duration(); Go overflows.
		err := createThroughWebhook(ctx, c, estest.New(appsNS, "overflow", func(es *elastiv1alpha1.ElastiService) {
			es.Spec.Proxy = &elastiv1alpha1.ProxySpec{HoldTimeout: "99999999999h"}
		}))
		want := `spec.proxy.holdTimeout: time: invalid duration "99999999999h"; use a positive Go duration such as 30s or 5m`
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), want) {
			t.Errorf("got %v\nwant an Invalid error containing %s", err, want)
		}
	})

	t.Run("metadata-only updates of a stored invalid spec", func(t *testing.T) {
		es := &elastiv1alpha1.ElastiService{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(legacy), es); err != nil {
			t.Fatal(err)
		}
		es.Labels = map[string]string{"team": "a"}
		es.Finalizers = append(es.Finalizers, "elasti.dev/test")
		if err := c.Update(ctx, es); err != nil {
			t.Fatalf("label and finalizer update refused: %v", err)
		}
		es.Finalizers = nil
		if err := c.Update(ctx, es); err != nil {
			t.Fatalf("finalizer removal refused: %v", err)
		}
		es.Spec.CooldownPeriod = 60
		err := c.Update(ctx, es)
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.enabledPeriod.schedule: end of range (61)") {
			t.Errorf("a spec update keeping minute 61: want the webhook's refusal, got %v", err)
		}
		if err := c.Delete(ctx, es); err != nil {
			t.Errorf("delete: %v", err)
		}
	})

	t.Run("matchConditions alone keep metadata updates from the webhook", func(t *testing.T) {
		// The same registration, pointed at a port where nothing listens:
		// every call of it fails, and failurePolicy Fail refuses the
		// request. A metadata-only update must not call it at all.
		dead := webhookConfiguration(t, testenv.FreePort(t))
		if err := c.Create(ctx, dead); err != nil {
			t.Fatal(err)
		}
		defer func() {
			if err := c.Delete(context.Background(), dead); err != nil {
				t.Errorf("delete %s: %v", dead.Name, err)
			}
		}()
		es := estest.New(appsNS, "bystander", window("@daily", "1h"))
		testenv.Eventually(t, 30*time.Second, "a create answered by the webhook", func() error {
			err := c.Create(ctx, es.DeepCopy())
			if err == nil {
				_ = c.Delete(ctx, es)
				return errors.New("created while a registered webhook cannot be reached")
			}
			if !strings.Contains(err.Error(), "failed calling webhook") {
				return err
			}
			return nil
		})
		// Stored by the schedules subtest.
		var stored elastiv1alpha1.ElastiService
		if err := c.Get(ctx, client.ObjectKey{Namespace: appsNS, Name: "workdays"}, &stored); err != nil {
			t.Fatal(err)
		}
		stored.Annotations = map[string]string{"note": "metadata only"}
		if err := c.Update(ctx, &stored); err != nil {
			t.Errorf("metadata-only update called an unreachable webhook: %v", err)
		}
		stored.Spec.CooldownPeriod++
		if err := c.Update(ctx, &stored); err == nil || !strings.Contains(err.Error(), "failed calling webhook") {
			t.Errorf("spec update: want the unreachable webhook's failure, got %v", err)
		}
	})

	t.Run("renewal", func(t *testing.T) {
		// A serving certificate from the same CA that expires within the
		// rotator's look-ahead (90 days) must be replaced.
		shortLived := issue(t, secret.Data["ca.crt"], secret.Data["ca.key"], 24*time.Hour, leaf.DNSNames)
		if err := c.Get(ctx, client.ObjectKeyFromObject(&secret), &secret); err != nil {
			t.Fatal(err)
		}
		secret.Data["tls.crt"], secret.Data["tls.key"] = shortLived.crt, shortLived.key
		if err := c.Update(ctx, &secret); err != nil {
			t.Fatal(err)
		}
		var renewed *x509.Certificate
		testenv.Eventually(t, time.Minute, "the serving certificate renewed in its Secret", func() error {
			if err := c.Get(ctx, client.ObjectKeyFromObject(&secret), &secret); err != nil {
				return err
			}
			renewed = parseCert(t, secret.Data["tls.crt"])
			if renewed.NotAfter.Before(time.Now().Add(300 * 24 * time.Hour)) {
				return fmt.Errorf("the Secret's serving certificate expires %s", renewed.NotAfter)
			}
			return nil
		})
		if !bytes.Equal(secret.Data["ca.crt"], caPEM) {
			t.Error("renewing the serving certificate replaced a valid CA")
		}
		testenv.Eventually(t, time.Minute, "the renewed certificate written to the certificate directory", func() error {
			got, err := os.ReadFile(filepath.Join(certDir, "tls.crt"))
			if err != nil {
				return err
			}
			if !bytes.Equal(got, secret.Data["tls.crt"]) {
				return fmt.Errorf("%s does not hold the renewed certificate", certDir)
			}
			if served := servedCert(t, port, roots); !served.Equal(renewed) {
				return fmt.Errorf("the server presents serial %s, want the renewed %s", served.SerialNumber, renewed.SerialNumber)
			}
			if served := servedCert(t, activationPort, roots); !served.Equal(renewed) {
				return fmt.Errorf("the activation server presents serial %s, want the renewed %s", served.SerialNumber, renewed.SerialNumber)
			}
			return nil
		})
		if err := ready(probe); err != nil {
			t.Errorf("not ready after the renewal: %v", err)
		}
		// And the API server still trusts the webhook.
		if err := createThroughWebhook(ctx, c, estest.New(appsNS, "after-renewal", window("@hourly", "30m"))); err != nil {
			t.Errorf("create after the renewal: %v", err)
		}
	})
}

// webhookConfiguration reads config/webhook's ValidatingWebhookConfiguration
// and points it at https://localhost:port instead of the Service: envtest
// has no Service network. Everything else (rules, matchConditions, failure
// policy, timeout) is the install's.
func webhookConfiguration(t *testing.T, port int) *admissionregistrationv1.ValidatingWebhookConfiguration {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(env.Root, "config", "webhook", "validating-webhook.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := yaml.UnmarshalStrict(b, vwc); err != nil {
		t.Fatal(err)
	}
	if len(vwc.Webhooks) != 1 || vwc.Webhooks[0].ClientConfig.Service == nil {
		t.Fatalf("config/webhook: want one webhook called through a Service, got %+v", vwc.Webhooks)
	}
	svc := vwc.Webhooks[0].ClientConfig.Service
	if svc.Path == nil || *svc.Path != Path || svc.Name != service {
		t.Fatalf("config/webhook calls %s at %v; the operator serves %s at %s", svc.Name, svc.Path, service, Path)
	}
	runs++ // a configuration (and so a rotator) of its own per run
	vwc.Name = fmt.Sprintf("%s-%d", vwc.Name, runs)
	url := fmt.Sprintf("https://localhost:%d%s", port, Path)
	vwc.Webhooks[0].ClientConfig = admissionregistrationv1.WebhookClientConfig{URL: &url}
	return vwc
}

// runs counts TestWebhook's runs in this process (go test -count).
var runs int

// servedCert is the leaf certificate the webhook server presents to a
// client that trusts roots and asks for the Service's name.
func servedCert(t *testing.T, port int, roots *x509.CertPool) *x509.Certificate {
	t.Helper()
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", net.JoinHostPort("localhost", strconv.Itoa(port)),
		&tls.Config{RootCAs: roots, ServerName: service + "." + operatorNS + ".svc", MinVersion: tls.VersionTLS12})
	if err != nil {
		t.Fatalf("TLS handshake with the webhook server: %v", err)
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0]
}

func parseCert(t *testing.T, pemBytes []byte) *x509.Certificate {
	t.Helper()
	block, _ := pem.Decode(pemBytes)
	if block == nil {
		t.Fatalf("no PEM block in %q", pemBytes)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

type pair struct{ crt, key []byte }

// issue signs a serving certificate for names with the CA, valid for d.
func issue(t *testing.T, caPEM, caKeyPEM []byte, d time.Duration, names []string) pair {
	t.Helper()
	ca := parseCert(t, caPEM)
	block, _ := pem.Decode(caKeyPEM)
	if block == nil {
		t.Fatal("no PEM block in ca.key")
	}
	caKey, err := x509.ParsePKCS1PrivateKey(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(now.UnixNano()), Subject: pkix.Name{CommonName: names[0]}, DNSNames: names,
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(d),
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	return pair{
		crt: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		key: pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}),
	}
}

// createThroughWebhook creates es, retrying for a while when the API server
// could not call the webhook: the server's view of the configuration (its
// caBundle, just written by the rotator) may lag the replica's readiness by
// a moment. A refusal by the webhook, or any other answer, is returned.
func createThroughWebhook(ctx context.Context, c client.Client, es *elastiv1alpha1.ElastiService) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := c.Create(ctx, es.DeepCopy())
		if err == nil || !strings.Contains(err.Error(), "failed calling webhook") || time.Now().After(deadline) {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// limits are the cluster admin's limits TestWebhook serves with: the
// default --trigger-servers, and ceilings below the defaults so that the
// test shows them set.
func limits(t *testing.T) Limits {
	t.Helper()
	servers, err := scaling.NewServerPolicy(scaling.DefaultTriggerServers, "")
	if err != nil {
		t.Fatal(err)
	}
	return Limits{TriggerServers: servers, MaxHeldRequests: 100, MaxHoldTimeout: 30 * time.Minute}
}
