package activation

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"

	"elasti.dev/elasti/internal/contract"
)

// maxRequestBody bounds an activation request body.
const maxRequestBody = 4 << 10

// WakeResult is the outcome of a wake.
type WakeResult struct {
	// Found is false when the ElastiService does not exist.
	Found bool
	// Replicas is the replica count the target was scaled to.
	Replicas int32
}

// Waker wakes the target of an ElastiService.
type Waker interface {
	Wake(ctx context.Context, key types.NamespacedName) (WakeResult, error)
}

// Server is the operator's activation server. Every operator replica runs
// one; the Waker decides whether this replica acts or hands the call to
// the leader.
type Server struct {
	// Addr is the listen address, e.g. ":8013".
	Addr string
	// Authenticator checks the caller's token.
	Authenticator *Authenticator
	// Waker performs the wake.
	Waker Waker
	// Log receives one line per refused or failed call.
	Log logr.Logger
	// GetCertificate, if set, makes the server speak TLS only (HTTP/1.1),
	// presenting the certificate it returns for each handshake; a
	// handshake it fails for is refused. Nil serves plain HTTP.
	GetCertificate func(*tls.ClientHelloInfo) (*tls.Certificate, error)

	listener net.Listener
}

// Handler returns the HTTP handler. Order: method, authentication (caches,
// then the per-source review limit, then a TokenReview), body, wake.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc(contract.ActivationPath, s.activate)
	return mux
}

func (s *Server) activate(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		httpError(w, http.StatusMethodNotAllowed, "use POST")
		return
	}
	token, ok := bearerToken(r.Header.Get("Authorization"))
	if !ok {
		refusals.WithLabelValues(refusedUnauthenticated).Inc()
		w.Header().Set("WWW-Authenticate", `Bearer realm="elasti-activation"`)
		httpError(w, http.StatusUnauthorized, "a ServiceAccount bearer token is required")
		return
	}
	switch err := s.Authenticator.Authenticate(r.Context(), sourceIP(r.RemoteAddr), token); {
	case err == nil:
	case errors.Is(err, ErrUnauthenticated):
		refusals.WithLabelValues(refusedUnauthenticated).Inc()
		s.Log.Info("activation refused", "reason", refusedUnauthenticated, "remote", r.RemoteAddr)
		w.Header().Set("WWW-Authenticate", `Bearer realm="elasti-activation"`)
		httpError(w, http.StatusUnauthorized, "the token is not valid")
		return
	case errors.Is(err, ErrForbidden):
		refusals.WithLabelValues(refusedForbidden).Inc()
		s.Log.Info("activation refused", "reason", refusedForbidden, "remote", r.RemoteAddr, "detail", err.Error())
		httpError(w, http.StatusForbidden, "this identity may not activate targets")
		return
	case errors.Is(err, ErrRateLimited):
		// Per call at V(1) only: a flood would otherwise flood the log too.
		// The counter shows it.
		refusals.WithLabelValues(refusedRateLimited).Inc()
		s.Log.V(1).Info("activation refused", "reason", refusedRateLimited, "remote", r.RemoteAddr)
		w.Header().Set("Retry-After", "1")
		httpError(w, http.StatusTooManyRequests, "too many token reviews from this address; retry later")
		return
	default:
		s.Log.Error(err, "activation: token review failed")
		w.Header().Set("Retry-After", "1")
		httpError(w, http.StatusServiceUnavailable, "the token could not be verified; retry")
		return
	}
	req, err := decodeRequest(r)
	if err != nil {
		httpError(w, http.StatusBadRequest, err.Error())
		return
	}
	key := types.NamespacedName{Namespace: req.Namespace, Name: req.ElastiService}
	res, err := s.Waker.Wake(r.Context(), key)
	if err != nil {
		s.Log.Error(err, "activation: wake failed", "elastiservice", key.String())
		w.Header().Set("Retry-After", "1")
		httpError(w, http.StatusServiceUnavailable, "the wake did not complete; retry")
		return
	}
	if !res.Found {
		httpError(w, http.StatusNotFound, fmt.Sprintf("ElastiService %s not found", key))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(contract.ActivationResponse{Replicas: res.Replicas})
}

// decodeRequest reads and validates an ActivationRequest.
func decodeRequest(r *http.Request) (contract.ActivationRequest, error) {
	var req contract.ActivationRequest
	if ct := r.Header.Get("Content-Type"); ct != "" {
		if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
			return req, errors.New("the body must be application/json")
		}
	}
	dec := json.NewDecoder(io.LimitReader(r.Body, maxRequestBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return req, fmt.Errorf("decode the activation request: %w", err)
	}
	if errs := validation.IsDNS1123Label(req.Namespace); len(errs) > 0 {
		return req, fmt.Errorf("namespace %q: %s", req.Namespace, strings.Join(errs, "; "))
	}
	if errs := validation.IsDNS1123Subdomain(req.ElastiService); len(errs) > 0 {
		return req, fmt.Errorf("elastiService %q: %s", req.ElastiService, strings.Join(errs, "; "))
	}
	return req, nil
}

// sourceIP is the host part of a request's RemoteAddr, the key of the
// per-source review limit; the whole string if it has no port.
func sourceIP(remoteAddr string) string {
	if host, _, err := net.SplitHostPort(remoteAddr); err == nil {
		return host
	}
	return remoteAddr
}

func bearerToken(h string) (string, bool) {
	const prefix = "bearer "
	if len(h) <= len(prefix) || !strings.EqualFold(h[:len(prefix)], prefix) {
		return "", false
	}
	t := strings.TrimSpace(h[len(prefix):])
	return t, t != ""
}

func httpError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	_, _ = io.WriteString(w, msg+"\n")
}

// Start serves until ctx ends, then shuts down gracefully. It implements
// controller-runtime's manager.Runnable.
func (s *Server) Start(ctx context.Context) error {
	ln := s.listener
	if ln == nil {
		var err error
		if ln, err = net.Listen("tcp", s.Addr); err != nil {
			return fmt.Errorf("listen for activation calls on %s: %w", s.Addr, err)
		}
	}
	srv := &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       90 * time.Second,
		MaxHeaderBytes:    16 << 10,
	}
	if s.GetCertificate != nil {
		ln = tls.NewListener(ln, &tls.Config{
			MinVersion:     tls.VersionTLS12,
			GetCertificate: s.GetCertificate,
			// The resolver speaks HTTP/1.1; not offering h2 keeps
			// HTTP/2's own attack surface off this port.
			NextProtos: []string{"http/1.1"},
		})
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve activation calls: %w", err)
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdown); err != nil {
		return fmt.Errorf("shut down the activation server: %w", err)
	}
	return nil
}

// Listen binds the server's address now, so that Start cannot fail on it and
// tests can learn the port. Optional.
func (s *Server) Listen() (net.Addr, error) {
	ln, err := net.Listen("tcp", s.Addr)
	if err != nil {
		return nil, fmt.Errorf("listen for activation calls on %s: %w", s.Addr, err)
	}
	s.listener = ln
	return ln.Addr(), nil
}

// NeedLeaderElection is false: every replica answers activation calls.
func (s *Server) NeedLeaderElection() bool { return false }
