//go:build integration

package admission

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"elasti.dev/elasti/internal/activation"
	"elasti.dev/elasti/internal/testenv"
)

// caConfigMapName is the ConfigMap TestWebhook has the CA published in.
const caConfigMapName = "elasti-activation-ca"

// resolverSA is the only caller the test's activation server accepts.
const resolverSA = "elasti-resolver"

// wakeAll finds every ElastiService and scales it to one replica.
type wakeAll struct{}

func (wakeAll) Wake(context.Context, types.NamespacedName) (activation.WakeResult, error) {
	return activation.WakeResult{Found: true, Replicas: 1}, nil
}

// addActivationServer adds an activation server to mgr as the operator
// runs it with the webhook on: TLS with serving's certificate, TokenReview
// against the test's API server. It returns the port.
func addActivationServer(t *testing.T, mgr ctrl.Manager, serving *Serving) int {
	t.Helper()
	srv := &activation.Server{
		Addr: "127.0.0.1:0",
		Authenticator: &activation.Authenticator{
			Client: mgr.GetClient(), ServiceAccountNamespace: operatorNS, ServiceAccountName: resolverSA,
			Audiences: []string{activation.Audience},
		},
		Waker:          wakeAll{},
		GetCertificate: serving.GetCertificate,
	}
	addr, err := srv.Listen()
	if err != nil {
		t.Fatal(err)
	}
	if err := mgr.Add(srv); err != nil {
		t.Fatal(err)
	}
	return addr.(*net.TCPAddr).Port
}

// activationOverTLS proves that the CA ConfigMap holds the Secret's CA and
// nothing else, and that the resolver's client, trusting only that CA
// (written to a file as the kubelet mounts the ConfigMap), completes an
// activation call over TLS, while a plain HTTP call is refused.
func activationOverTLS(t *testing.T, ctx context.Context, c client.Client, port int, caPEM []byte) {
	var cm corev1.ConfigMap
	testenv.Eventually(t, 30*time.Second, "the CA ConfigMap holds the CA", func() error {
		if err := c.Get(ctx, client.ObjectKey{Namespace: operatorNS, Name: caConfigMapName}, &cm); err != nil {
			return err
		}
		if !bytes.Equal([]byte(cm.Data[CAKey]), caPEM) {
			return fmt.Errorf("ConfigMap %s holds %q, the Secret's CA is %q", caConfigMapName, cm.Data[CAKey], caPEM)
		}
		return nil
	})
	if len(cm.Data) != 1 || len(cm.BinaryData) != 0 {
		t.Errorf("ConfigMap %s holds more than %s: %v", caConfigMapName, CAKey, cm.Data)
	}
	if refs := cm.OwnerReferences; len(refs) != 1 || refs[0].Kind != "Secret" || refs[0].Name != secretName {
		t.Errorf("ConfigMap %s owners %+v, want the Secret %s", caConfigMapName, refs, secretName)
	}

	// A stale copy is put right.
	cm.Data[CAKey] = "stale"
	if err := c.Update(ctx, &cm); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, "the stale CA ConfigMap put right", func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(&cm), &cm); err != nil {
			return err
		}
		if cm.Data[CAKey] != string(caPEM) {
			return errors.New("the stale CA was not replaced")
		}
		return nil
	})

	dir := t.TempDir()
	caFile, tokenPath := filepath.Join(dir, CAKey), filepath.Join(dir, "token")
	if err := os.WriteFile(caFile, []byte(cm.Data[CAKey]), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(tokenPath, []byte(resolverToken(t, ctx, c)), 0o600); err != nil {
		t.Fatal(err)
	}
	call := func(url string) (*activation.Client, error) {
		cl := activation.NewClient(activation.ClientOptions{
			OperatorURL: url, TokenPath: tokenPath,
			HTTPClient: &http.Client{Timeout: 10 * time.Second, Transport: activation.NewTransport(caFile)},
		})
		_, err := cl.Activate(ctx, "apps", "web")
		return cl, err
	}
	// The server's certificate watch may start a moment after the webhook
	// reported ready.
	testenv.Eventually(t, 30*time.Second, "an activation call over TLS", func() error {
		_, err := call(fmt.Sprintf("https://localhost:%d", port))
		return err
	})
	// The server answers 400 and closes; the client sees that or the reset.
	if _, err := call(fmt.Sprintf("http://localhost:%d", port)); err == nil {
		t.Error("a plain HTTP activation call succeeded")
	}
}

// resolverToken is a token of the resolver's ServiceAccount for the
// activation audience.
func resolverToken(t *testing.T, ctx context.Context, c client.Client) string {
	t.Helper()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: operatorNS, Name: resolverSA}}
	if err := c.Create(ctx, sa); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		ExpirationSeconds: ptr.To(int64(600)), Audiences: []string{activation.Audience},
	}}
	if err := c.SubResource("token").Create(ctx, sa, tr); err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}
