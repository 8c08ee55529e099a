package activation

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"golang.org/x/sync/singleflight"

	"elasti.dev/elasti/internal/contract"
)

// DefaultOperatorURL is where the resolver finds the operator's
// activation server inside the cluster.
const DefaultOperatorURL = "https://elasti-operator.elasti-system.svc:8013"

// DefaultCAFile is where the resolver's pod mounts the CA certificate the
// operator publishes (ConfigMap elasti-activation-ca, key ca.crt), to
// verify the activation server with.
const DefaultCAFile = "/var/run/elasti/activation-ca/ca.crt"

// Audience is the token audience of activation calls: the resolver presents
// a projected ServiceAccount token for it, and the operator's server
// requires it by default. The API server does not accept such a token, so a
// token leaked from an activation call cannot be replayed against it.
const Audience = "elasti.dev/activation"

// DefaultTokenPath is where the resolver's pod mounts its projected token
// for Audience.
const DefaultTokenPath = "/var/run/secrets/elasti.dev/activation/token"

// StatusError is an activation call the operator answered with a status other
// than 200. 401 and 403 mean the resolver's identity was refused, 404 that the
// ElastiService does not exist.
type StatusError struct {
	StatusCode int
	// Body is the start of the operator's answer, for the log.
	Body string
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("activation answered %d %s: %s", e.StatusCode, http.StatusText(e.StatusCode), e.Body)
}

// HTTPStatus returns the operator's status code.
func (e *StatusError) HTTPStatus() int { return e.StatusCode }

// ClientOptions configure a Client.
type ClientOptions struct {
	// OperatorURL is the activation server's base URL; ActivationPath is
	// appended. Default DefaultOperatorURL.
	OperatorURL string
	// TokenPath is read on every call, because the kubelet rotates the
	// projected token. Default DefaultTokenPath.
	TokenPath string
	// HTTPClient is the transport; default a client with a 10s timeout.
	HTTPClient *http.Client
}

// Client is the resolver's side of the activation API. Calls for the same
// ElastiService that overlap share one request to the operator.
type Client struct {
	url       string
	tokenPath string
	http      *http.Client
	flight    singleflight.Group
}

// NewClient returns a Client with opts' defaults filled in.
func NewClient(opts ClientOptions) *Client {
	if opts.OperatorURL == "" {
		opts.OperatorURL = DefaultOperatorURL
	}
	if opts.TokenPath == "" {
		opts.TokenPath = DefaultTokenPath
	}
	if opts.HTTPClient == nil {
		opts.HTTPClient = &http.Client{Timeout: 10 * time.Second}
	}
	return &Client{
		url:       strings.TrimSuffix(opts.OperatorURL, "/") + contract.ActivationPath,
		tokenPath: opts.TokenPath,
		http:      opts.HTTPClient,
	}
}

// Activate asks the operator to wake the target of ElastiService
// namespace/name. Concurrent calls for the same ElastiService are merged into
// one request; each caller still stops waiting when its own ctx ends.
func (c *Client) Activate(ctx context.Context, namespace, name string) (*contract.ActivationResponse, error) {
	key := namespace + "/" + name
	ch := c.flight.DoChan(key, func() (any, error) {
		// The shared call must not die with whichever caller came first.
		timeout := c.http.Timeout
		if timeout <= 0 {
			timeout = 30 * time.Second
		}
		callCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
		defer cancel()
		return c.call(callCtx, namespace, name)
	})
	select {
	case res := <-ch:
		if res.Err != nil {
			return nil, res.Err
		}
		return res.Val.(*contract.ActivationResponse), nil
	case <-ctx.Done():
		return nil, fmt.Errorf("activate %s: %w", key, ctx.Err())
	}
}

func (c *Client) call(ctx context.Context, namespace, name string) (*contract.ActivationResponse, error) {
	key := namespace + "/" + name
	token, err := os.ReadFile(c.tokenPath)
	if err != nil {
		return nil, fmt.Errorf("activate %s: read ServiceAccount token: %w", key, err)
	}
	body, err := json.Marshal(contract.ActivationRequest{Namespace: namespace, ElastiService: name})
	if err != nil {
		return nil, fmt.Errorf("activate %s: encode request: %w", key, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("activate %s: build request: %w", key, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("activate %s: %w", key, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return nil, fmt.Errorf("activate %s: read answer: %w", key, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("activate %s: %w", key, &StatusError{StatusCode: resp.StatusCode, Body: truncate(strings.TrimSpace(string(data)), 256)})
	}
	var out contract.ActivationResponse
	if err := json.Unmarshal(data, &out); err != nil {
		return nil, fmt.Errorf("activate %s: decode answer: %w", key, err)
	}
	return &out, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
