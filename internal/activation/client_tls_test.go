package activation

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// testCA is a self-signed CA that issues serving certificates.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newTestCA(t *testing.T, name string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// serving issues a serving certificate for localhost.
func (ca *testCA) serving(t *testing.T) *tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "localhost"}, DNSNames: []string{"localhost"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// serveTLS runs an activation server that presents whatever cert holds
// (nil: no certificate yet) and returns its https URL for localhost.
func serveTLS(t *testing.T, cert *atomic.Pointer[tls.Certificate]) string {
	t.Helper()
	var reviews atomic.Int32
	srv := &Server{
		Addr: "127.0.0.1:0",
		Authenticator: &Authenticator{
			Client:                  reviewer(t, map[string]string{"good": "system:serviceaccount:elasti-system:elasti-resolver"}, &reviews),
			ServiceAccountNamespace: "elasti-system", ServiceAccountName: "elasti-resolver",
		},
		Waker: &fakeWaker{},
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			if c := cert.Load(); c != nil {
				return c, nil
			}
			return nil, errors.New("no certificate yet")
		},
	}
	addr, err := srv.Listen()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("server: %v", err)
		}
	})
	_, port, _ := strings.Cut(addr.String(), ":")
	return "https://localhost:" + port
}

func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestClientVerifiesWithCAFile: a server whose certificate another CA
// issued is refused as unknown; once the CA file holds that CA, the same
// client's next call succeeds, without a restart.
func TestClientVerifiesWithCAFile(t *testing.T) {
	caA, caB := newTestCA(t, "ca-a"), newTestCA(t, "ca-b")
	var cert atomic.Pointer[tls.Certificate]
	cert.Store(caB.serving(t))
	url := serveTLS(t, &cert)
	dir := t.TempDir()
	tokenPath, caFile := filepath.Join(dir, "token"), filepath.Join(dir, "ca.crt")
	writeToken(t, tokenPath, "good")
	writeFile(t, caFile, caA.pem)
	c := NewClient(ClientOptions{OperatorURL: url, TokenPath: tokenPath,
		HTTPClient: &http.Client{Timeout: 5 * time.Second, Transport: NewTransport(caFile)}})
	ctx := context.Background()

	_, err := c.Activate(ctx, "demo", "web")
	var unknown x509.UnknownAuthorityError
	if !errors.As(err, &unknown) {
		t.Fatalf("call to a server of another CA: got %v, want an unknown-authority error", err)
	}

	writeFile(t, caFile, caB.pem) // the CA rotated, the kubelet refreshed the ConfigMap
	resp, err := c.Activate(ctx, "demo", "web")
	if err != nil {
		t.Fatalf("call after the CA file was rewritten: %v", err)
	}
	if resp.Replicas != 2 {
		t.Errorf("replicas %d, want 2", resp.Replicas)
	}
}

// TestClientCAFileProblems: a missing or empty CA file fails the call with
// words naming the file, rather than falling back to other roots.
func TestClientCAFileProblems(t *testing.T) {
	ca := newTestCA(t, "ca")
	var cert atomic.Pointer[tls.Certificate]
	cert.Store(ca.serving(t))
	url := serveTLS(t, &cert)
	dir := t.TempDir()
	tokenPath, caFile := filepath.Join(dir, "token"), filepath.Join(dir, "ca.crt")
	writeToken(t, tokenPath, "good")
	c := NewClient(ClientOptions{OperatorURL: url, TokenPath: tokenPath,
		HTTPClient: &http.Client{Timeout: 5 * time.Second, Transport: NewTransport(caFile)}})
	ctx := context.Background()
	if _, err := c.Activate(ctx, "demo", "web"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing CA file: got %v, want a not-exist error", err)
	}
	writeFile(t, caFile, []byte("not a certificate\n"))
	if _, err := c.Activate(ctx, "demo", "web"); err == nil || !strings.Contains(err.Error(), "holds no PEM certificate") {
		t.Errorf("CA file without a certificate: got %v", err)
	}
	writeFile(t, caFile, ca.pem)
	if _, err := c.Activate(ctx, "demo", "web"); err != nil {
		t.Errorf("with the CA: %v", err)
	}
}

// TestServerTLSOnly: a TLS activation server refuses plain HTTP, and
// refuses handshakes until it has a certificate.
func TestServerTLSOnly(t *testing.T) {
	ca := newTestCA(t, "ca")
	var cert atomic.Pointer[tls.Certificate]
	url := serveTLS(t, &cert)
	dir := t.TempDir()
	tokenPath, caFile := filepath.Join(dir, "token"), filepath.Join(dir, "ca.crt")
	writeToken(t, tokenPath, "good")
	writeFile(t, caFile, ca.pem)
	newClient := func(operatorURL string) *Client {
		return NewClient(ClientOptions{OperatorURL: operatorURL, TokenPath: tokenPath,
			HTTPClient: &http.Client{Timeout: 5 * time.Second, Transport: NewTransport(caFile)}})
	}
	ctx := context.Background()
	if _, err := newClient(url).Activate(ctx, "demo", "web"); err == nil {
		t.Error("TLS call succeeded before the server had a certificate")
	}
	cert.Store(ca.serving(t))
	if _, err := newClient(url).Activate(ctx, "demo", "web"); err != nil {
		t.Fatalf("TLS call: %v", err)
	}
	// The server answers 400 and closes; the client sees that or the reset.
	if _, err := newClient("http://"+strings.TrimPrefix(url, "https://")).Activate(ctx, "demo", "web"); err == nil {
		t.Error("a plain HTTP call succeeded on the TLS port")
	}
}
