//go:build integration

package metricsapi

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/metrics/pkg/apis/external_metrics"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"elasti.dev/elasti/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	testenv.Main(m, testenv.Options{}, func(e *testenv.Env) { env = e })
}

// TestServerChecksAccess: the embedded server, started against a real
// kube-apiserver, authenticates a ServiceAccount's token by TokenReview
// and authorizes each read by SubjectAccessReview: a ServiceAccount granted
// get on external.metrics.k8s.io in the namespace reads an ElastiService's
// metric, one without the grant gets 403, and an unknown ElastiService, a
// missing selector and an unknown metric get 404, 400 and 404.
func TestServerChecksAccess(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	crt, key, err := certutil.GenerateSelfSignedCertKey("localhost", []net.IP{net.IPv4(127, 0, 0, 1)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tls.crt"), crt, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tls.key"), key, 0o600); err != nil {
		t.Fatal(err)
	}
	// The server's delegated checks run as a user allowed TokenReviews and
	// SubjectAccessReviews (the operator's ServiceAccount, bound to
	// system:auth-delegator, in a cluster).
	auth, err := env.KubeconfigFile(dir, "elasti-metrics-api", "system:masters")
	if err != nil {
		t.Fatal(err)
	}
	port := testenv.FreePort(t)
	at := time.Now().Add(-time.Second).Truncate(time.Second)
	src := fixedSource{{Namespace: "team-a", Name: "api"}: {Value: resource.MustParse("3"), At: at}}
	srv, err := New(Config{Port: port, CertDir: dir, Client: env.Config, AuthKubeconfig: auth}, &Provider{Source: src})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- srv.Start(runCtx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("server ended with %v", err)
		}
	})

	allowed := token(t, "team-a", "hpa")
	denied := token(t, "team-a", "other")
	grant(t, "team-a", "hpa")
	base := fmt.Sprintf("https://127.0.0.1:%d/apis/external.metrics.k8s.io/v1beta1/namespaces/team-a/", port)
	sel := "?labelSelector=" + SelectorLabel + "%3D"

	var got external_metrics.ExternalMetricValueList
	testenv.Eventually(t, time.Minute, "the metrics API to serve an allowed read", func() error {
		code, body, err := get(base+MetricHeld+sel+"api", allowed)
		if err != nil {
			return err
		}
		if code != http.StatusOK {
			return fmt.Errorf("HTTP %d: %s", code, body)
		}
		return json.Unmarshal(body, &got)
	})
	if len(got.Items) != 1 || got.Items[0].Value.Cmp(resource.MustParse("3")) != 0 || got.Items[0].MetricLabels[SelectorLabel] != "api" || !got.Items[0].Timestamp.Time.Equal(at) {
		t.Errorf("read %+v; want one value 3 labelled %s=api at %v", got.Items, SelectorLabel, at)
	}
	for _, c := range []struct {
		name, url, token string
		want             int
	}{
		{"a ServiceAccount without the grant", base + MetricHeld + sel + "api", denied, http.StatusForbidden},
		{"no token", base + MetricHeld + sel + "api", "", http.StatusForbidden},
		{"an ElastiService that is not served", base + MetricHeld + sel + "nope", allowed, http.StatusNotFound},
		{"no ElastiService in the selector", base + MetricHeld, allowed, http.StatusBadRequest},
		{"a metric Elasti does not serve", base + "something_else" + sel + "api", allowed, http.StatusNotFound},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, body, err := get(c.url, c.token)
			if err != nil {
				t.Fatal(err)
			}
			if code != c.want {
				t.Errorf("HTTP %d, want %d: %s", code, c.want, body)
			}
		})
	}
}

// get reads url with a bearer token (none if empty), trusting any server
// certificate: the test checks access, not the serving certificate.
func get(url, token string) (int, []byte, error) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return 0, nil, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // see above
	resp, err := c.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, body, err
}

// token creates namespace/name's ServiceAccount (and the namespace) and
// returns a token for it.
func token(t *testing.T, namespace, name string) string {
	t.Helper()
	ctx := context.Background()
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}); client.IgnoreAlreadyExists(err) != nil {
		t.Fatal(err)
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	if err := env.Client.Create(ctx, sa); client.IgnoreAlreadyExists(err) != nil {
		t.Fatal(err)
	}
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(600))}}
	if err := env.Client.SubResource("token").Create(ctx, sa, tr); err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}

// grant lets namespace/sa read external metrics in its namespace, as the
// HPA controller's bootstrap role does cluster-wide.
func grant(t *testing.T, namespace, sa string) {
	t.Helper()
	ctx := context.Background()
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "external-metrics-reader"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{"external.metrics.k8s.io"}, Resources: []string{"*"}, Verbs: []string{"get", "list", "watch"}}},
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "external-metrics-reader"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: namespace, Name: sa}},
	}
	for _, o := range []client.Object{role, binding} {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
}
