package scaling

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// defaultKubeletPort is the kubelet's port when a Node does not say.
const defaultKubeletPort = 10250

// maxSummaryBytes bounds one Summary API response (about 2 KiB a pod).
const maxSummaryBytes = 16 << 20

// errKubeletForbidden marks a kubelet's 401 or 403.
var errKubeletForbidden = errors.New("refused by the kubelet")

// KubeletSummaries reads nodes' Summary API (/stats/summary) the way
// metrics-server reads it: straight from each kubelet's port, with the
// operator's own credentials, which the kubelet authorizes as get on
// nodes/stats. It never goes through the API server's node proxy, which
// would need nodes/proxy, a far wider grant.
//
// Requests to one node are made one at a time, and an answer younger than
// summaryMaxAge serves every trigger that asks meanwhile: the network
// triggers of many ElastiServices whose pods share a node cost the kubelet
// one request, and a container runtime that handles concurrent stats
// requests badly gets none from the operator.
type KubeletSummaries struct {
	// Nodes reads the Node objects, for the kubelet's address and port.
	Nodes client.Reader
	// Transport carries the requests with the operator's credentials (see
	// KubeletTransport).
	Transport http.RoundTripper
	// Clock times the answers kept for reuse; nil means the real clock.
	Clock clock.PassiveClock

	mu    sync.Mutex
	nodes map[string]*nodeSummary
}

// summaryMaxAge is how long a node's Summary API answer is reused. The
// kubelet's own figures are refreshed every 10 to 15 s (cAdvisor's
// housekeeping), so a reused answer loses nothing.
const summaryMaxAge = 2 * time.Second

// nodeSummary is a node's last answer; mu serializes its requests.
type nodeSummary struct {
	mu      sync.Mutex
	at      time.Time
	summary *statsv1alpha1.Summary
}

// KubeletTransport is the transport for KubeletSummaries: the operator's
// own bearer token (re-read as it rotates) from cfg, and TLS that trusts
// caFile, or the API server's CA when caFile is empty. insecure skips the
// kubelets' certificate check, for clusters whose kubelets serve
// self-signed certificates.
func KubeletTransport(cfg *rest.Config, caFile string, insecure bool) (http.RoundTripper, error) {
	c := rest.CopyConfig(cfg)
	c.ServerName = ""
	// The client certificate, if any, is the API server's business.
	c.CertFile, c.CertData = "", nil
	c.KeyFile, c.KeyData = "", nil
	if caFile != "" {
		c.CAFile, c.CAData = caFile, nil
	}
	if insecure {
		c.Insecure = true
		c.CAFile, c.CAData = "", nil
	}
	rt, err := rest.TransportFor(c)
	if err != nil {
		return nil, fmt.Errorf("kubelet transport: %w", err)
	}
	return rt, nil
}

// summaryAttempts is how many times a kubelet's 5xx answer is tried again,
// summaryRetryDelay apart: a kubelet whose stats come from containerd 1.6
// answers 500 to the whole request while one pod sandbox on the node is
// being torn down (ListPodSandboxStats: "task ... not found"), which lasts
// a moment.
const (
	summaryAttempts   = 3
	summaryRetryDelay = 500 * time.Millisecond
)

// Summary reads the Summary API of the named node. The answer is shared:
// callers must not change it.
func (k *KubeletSummaries) Summary(ctx context.Context, nodeName string) (*statsv1alpha1.Summary, error) {
	k.mu.Lock()
	if k.nodes == nil {
		k.nodes = map[string]*nodeSummary{}
	}
	n := k.nodes[nodeName]
	if n == nil {
		n = &nodeSummary{}
		k.nodes[nodeName] = n
	}
	k.mu.Unlock()

	clk := k.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if age := clk.Since(n.at); n.summary != nil && age >= 0 && age < summaryMaxAge {
		return n.summary, nil
	}
	s, err := k.read(ctx, nodeName)
	if err != nil {
		return nil, err
	}
	n.summary, n.at = s, clk.Now()
	return s, nil
}

// read asks the named node's kubelet.
func (k *KubeletSummaries) read(ctx context.Context, nodeName string) (*statsv1alpha1.Summary, error) {
	node := &corev1.Node{}
	if err := k.Nodes.Get(ctx, types.NamespacedName{Name: nodeName}, node); err != nil {
		if apierrors.IsForbidden(err) {
			return nil, fmt.Errorf("the operator may not get Node %s: grant it get on nodes (the chart and the kustomize install do): %w", nodeName, errKubeletForbidden)
		}
		return nil, fmt.Errorf("get Node %s: %w", nodeName, err)
	}
	host := kubeletHost(node)
	if host == "" {
		return nil, fmt.Errorf("node %s has no InternalIP, ExternalIP or Hostname address", nodeName)
	}
	port := int(node.Status.DaemonEndpoints.KubeletEndpoint.Port)
	if port == 0 {
		port = defaultKubeletPort
	}
	url := "https://" + net.JoinHostPort(host, strconv.Itoa(port)) + "/stats/summary"
	for attempt := 1; ; attempt++ {
		s, err := k.get(ctx, url)
		var status *serverError
		if err == nil || !errors.As(err, &status) || attempt == summaryAttempts {
			return s, err
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(summaryRetryDelay):
		}
	}
}

// serverError is a kubelet's 5xx answer.
type serverError struct{ msg string }

func (e *serverError) Error() string { return e.msg }

func (k *KubeletSummaries) get(ctx context.Context, url string) (*statsv1alpha1.Summary, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	rt := k.Transport
	if rt == nil {
		rt = http.DefaultTransport
	}
	resp, err := rt.RoundTrip(req)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", url, err)
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		return nil, fmt.Errorf("%s answered %s: the operator needs get on nodes/stats (the chart and the kustomize install grant it), and the kubelet must authorize with the API server (authorization mode Webhook): %w", url, resp.Status, errKubeletForbidden)
	case resp.StatusCode >= 500:
		return nil, &serverError{msg: fmt.Sprintf("%s answered %s", url, resp.Status)}
	case resp.StatusCode != http.StatusOK:
		return nil, fmt.Errorf("%s answered %s", url, resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxSummaryBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", url, err)
	}
	if len(body) > maxSummaryBytes {
		return nil, fmt.Errorf("%s answered more than %d bytes", url, maxSummaryBytes)
	}
	s := &statsv1alpha1.Summary{}
	if err := json.Unmarshal(body, s); err != nil {
		return nil, fmt.Errorf("%s answered no Summary API response: %w", url, err)
	}
	return s, nil
}

// kubeletHost picks the address to reach a node's kubelet at: its
// InternalIP, else its ExternalIP, else its Hostname.
func kubeletHost(node *corev1.Node) string {
	for _, t := range []corev1.NodeAddressType{corev1.NodeInternalIP, corev1.NodeExternalIP, corev1.NodeHostName} {
		for _, a := range node.Status.Addresses {
			if a.Type == t && a.Address != "" {
				return a.Address
			}
		}
	}
	return ""
}
