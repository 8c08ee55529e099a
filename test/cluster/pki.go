package cluster

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// certSpec is one certificate the CA signs.
type certSpec struct {
	name    string // file stem under pki/
	cn      string
	orgs    []string
	server  bool
	client  bool
	dnsSANs []string
	ipSANs  []net.IP
}

// certSpecs lists every certificate the components use. Client identities
// match the bootstrap RBAC the kube-apiserver creates (system:kube-proxy,
// system:kube-scheduler, ...) and the Node authorizer (system:node:<name>).
func (c Config) certSpecs() []certSpec {
	apiDNS := []string{"kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local", "localhost"}
	apiIPs := []net.IP{c.NodeIP.AsSlice(), c.APIServiceIP.AsSlice(), net.IPv4(127, 0, 0, 1)}
	return []certSpec{
		{name: "apiserver", cn: "kube-apiserver", server: true, dnsSANs: apiDNS, ipSANs: apiIPs},
		{name: "apiserver-kubelet-client", cn: "kube-apiserver-kubelet-client", orgs: []string{"system:masters"}, client: true},
		{name: "admin", cn: "elasti-admin", orgs: []string{"system:masters"}, client: true},
		{name: "controller-manager", cn: "system:kube-controller-manager", client: true},
		{name: "scheduler", cn: "system:kube-scheduler", client: true},
		{name: "kube-proxy", cn: "system:kube-proxy", client: true},
		{name: "kubelet", cn: "system:node:" + c.NodeName, orgs: []string{"system:nodes"}, client: true},
		{name: "kubelet-serving", cn: c.NodeName, server: true, dnsSANs: []string{c.NodeName}, ipSANs: []net.IP{c.NodeIP.AsSlice()}},
		// The API aggregation layer: the kube-apiserver's client identity
		// towards aggregated API servers, and the Prometheus adapter's
		// serving certificate (its Service's name and the node address).
		{name: "front-proxy-client", cn: "front-proxy-client", client: true},
		{name: "metrics-adapter", cn: "elasti-metrics-adapter", server: true,
			dnsSANs: []string{"elasti-metrics-adapter.kube-system.svc"}, ipSANs: []net.IP{c.NodeIP.AsSlice()}},
		{name: "metrics-server", cn: "elasti-metrics-server", server: true,
			dnsSANs: []string{"elasti-metrics-server.kube-system.svc"}, ipSANs: []net.IP{c.NodeIP.AsSlice()}},
		// KEDA: one key pair for the operator's gRPC metrics service and
		// its metrics apiserver, which call each other with mutual TLS on
		// the first node's loopback; the apiserver also serves the API
		// aggregation layer through its Service.
		{name: "keda", cn: "keda-operator", server: true, client: true,
			dnsSANs: []string{"keda-operator.keda.svc", "keda-metrics-apiserver.kube-system.svc"},
			ipSANs:  []net.IP{c.NodeIP.AsSlice(), net.IPv4(127, 0, 0, 1)}},
	}
}

// writePKI creates the CA, every certificate in certSpecs and the
// ServiceAccount signing key pair under pki/. Existing files are kept, so a
// restart of a stopped cluster keeps its identities.
func (c Config) writePKI() error {
	dir := c.pkiDir()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	caKey, caCert, err := loadOrCreateCA(dir)
	if err != nil {
		return err
	}
	for _, s := range c.certSpecs() {
		if fileExists(filepath.Join(dir, s.name+".crt")) {
			continue
		}
		if err := issue(dir, s, caKey, caCert); err != nil {
			return fmt.Errorf("issue %s certificate: %w", s.name, err)
		}
	}
	if fileExists(filepath.Join(dir, "sa.key")) {
		return nil
	}
	saKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	if err := writeKey(filepath.Join(dir, "sa.key"), saKey); err != nil {
		return err
	}
	pub, err := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	if err != nil {
		return err
	}
	return writePEM(filepath.Join(dir, "sa.pub"), "PUBLIC KEY", pub, 0o644)
}

func loadOrCreateCA(dir string) (crypto.Signer, *x509.Certificate, error) {
	certPath, keyPath := filepath.Join(dir, "ca.crt"), filepath.Join(dir, "ca.key")
	if fileExists(certPath) && fileExists(keyPath) {
		certPEM, err := os.ReadFile(certPath)
		if err != nil {
			return nil, nil, err
		}
		keyPEM, err := os.ReadFile(keyPath)
		if err != nil {
			return nil, nil, err
		}
		cb, _ := pem.Decode(certPEM)
		kb, _ := pem.Decode(keyPEM)
		if cb == nil || kb == nil {
			return nil, nil, fmt.Errorf("read CA in %s: not PEM", dir)
		}
		cert, err := x509.ParseCertificate(cb.Bytes)
		if err != nil {
			return nil, nil, err
		}
		key, err := x509.ParseECPrivateKey(kb.Bytes)
		if err != nil {
			return nil, nil, err
		}
		return key, cert, nil
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "elasti-cluster-ca"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.AddDate(1, 0, 0),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, err
	}
	if err := writeKey(keyPath, key); err != nil {
		return nil, nil, err
	}
	return key, cert, writePEM(certPath, "CERTIFICATE", der, 0o644)
}

func issue(dir string, s certSpec, caKey crypto.Signer, ca *x509.Certificate) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: s.cn, Organization: s.orgs},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.AddDate(1, 0, 0),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		DNSNames:     s.dnsSANs,
		IPAddresses:  s.ipSANs,
	}
	if s.server {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
	}
	if s.client {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageClientAuth)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return err
	}
	if err := writeKey(filepath.Join(dir, s.name+".key"), key); err != nil {
		return err
	}
	return writePEM(filepath.Join(dir, s.name+".crt"), "CERTIFICATE", der, 0o644)
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		panic(err)
	}
	return n
}

func writeKey(path string, key *ecdsa.PrivateKey) error {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	return writePEM(path, "EC PRIVATE KEY", der, 0o600)
}

func writePEM(path, typ string, der []byte, mode os.FileMode) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), mode)
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
