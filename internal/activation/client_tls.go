package activation

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"
)

// NewTransport returns the resolver's transport for activation calls: no
// proxy, and when caFile is set, TLS connections verified with the CA
// certificates (PEM) in that file and no other. The file is read again for
// every new connection, so a CA the operator rotated, once the kubelet has
// refreshed the mounted ConfigMap, is trusted from the next connection on;
// a call refused with the old CA closes its connection, so the retry dials
// anew. An empty caFile verifies with the system's roots.
func NewTransport(caFile string) *http.Transport {
	t := &http.Transport{
		Proxy:               nil,
		MaxIdleConnsPerHost: 16,
		IdleConnTimeout:     90 * time.Second,
		TLSHandshakeTimeout: 10 * time.Second,
	}
	if caFile != "" {
		d := &caFileDialer{caFile: caFile, dialer: net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}}
		t.DialTLSContext = d.DialTLSContext
	}
	return t
}

// caFileDialer dials TLS connections that trust only the CA certificates in
// caFile, read at every dial.
type caFileDialer struct {
	caFile string
	dialer net.Dialer
}

// DialTLSContext connects to addr and completes a TLS handshake, verifying
// the server's certificate for addr's host name with caFile's CAs.
func (d *caFileDialer) DialTLSContext(ctx context.Context, network, addr string) (net.Conn, error) {
	pem, err := os.ReadFile(d.caFile)
	if err != nil {
		return nil, fmt.Errorf("read the operator's CA file: %w", err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("the operator's CA file %s holds no PEM certificate", d.caFile)
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", addr, err)
	}
	td := &tls.Dialer{NetDialer: &d.dialer, Config: &tls.Config{
		MinVersion: tls.VersionTLS12,
		RootCAs:    roots,
		ServerName: host,
		NextProtos: []string{"http/1.1"},
	}}
	conn, err := td.DialContext(ctx, network, addr)
	if err != nil {
		return nil, fmt.Errorf("TLS to the activation server %s (CA file %s): %w", addr, d.caFile, err)
	}
	return conn, nil
}
