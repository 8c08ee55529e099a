package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/test/cluster"
)

// Env is the running cluster, as tests use it.
type Env struct {
	// Cluster is the cluster's layout: kubeconfig, addresses, state dir.
	Cluster cluster.Config
	// REST is the admin client configuration.
	REST *rest.Config
	// Client is a controller-runtime client that knows client-go's and
	// Elasti's types.
	Client client.Client
	// Clientset is client-go's typed clientset.
	Clientset kubernetes.Interface
	// Dialer opens connections from inside the node's network namespace.
	Dialer *cluster.NodeDialer
}

// Get returns the cluster of this test run. The package's TestMain must call
// Main.
func Get(t testing.TB) *Env {
	t.Helper()
	if current == nil {
		t.Fatal("no cluster: this package's TestMain must call e2e.Main")
	}
	return current
}

// NewEnv connects to the cluster cfg describes, for programs outside go test
// (the demo, the bench). The clients allow 50 requests a second with bursts
// of 100; tune, when given, adjusts the client configuration before the
// clients are built (the bench raises those limits).
func NewEnv(cfg cluster.Config, tune ...func(*rest.Config)) (*Env, error) {
	rc, err := clientcmd.BuildConfigFromFlags("", cfg.Kubeconfig())
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", cfg.Kubeconfig(), err)
	}
	rc.QPS, rc.Burst = 50, 100
	for _, f := range tune {
		f(rc)
	}
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(elastiv1alpha1.AddToScheme(scheme))
	c, err := client.New(rc, client.Options{Scheme: scheme})
	if err != nil {
		return nil, err
	}
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, err
	}
	return &Env{Cluster: cfg, REST: rc, Client: c, Clientset: cs, Dialer: cfg.NodeDialer()}, nil
}

// HTTPClient returns a client whose connections start inside the node's
// network namespace and resolve cluster DNS names (use the fully qualified
// form, name.namespace.svc.cluster.local). Keep-alives are off, so every
// request takes the current route through kube-proxy.
func (e *Env) HTTPClient() *http.Client {
	return &http.Client{
		Timeout: 10 * time.Second,
		Transport: &http.Transport{
			DialContext:       e.Dialer.DialContext,
			DisableKeepAlives: true,
			Proxy:             nil,
		},
	}
}

// NewNamespace creates a namespace with a random name for one test and
// deletes it when the test ends.
func (e *Env) NewNamespace(t testing.TB) string {
	t.Helper()
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "e2e-" + hex.EncodeToString(b)}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := e.Client.Create(ctx, ns); err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			e.dumpNamespace(t, ns.Name)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := e.Client.Delete(ctx, ns); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete namespace %s: %v", ns.Name, err)
		}
	})
	return ns.Name
}

// errorsAfterDump returns an Errorf for t that also repeats its messages
// once t's later cleanups have run. Call it before NewNamespace: a failed
// test's namespace dump is long, and a log cut to its last lines should
// still say why the test failed.
func errorsAfterDump(t *testing.T) func(format string, args ...any) {
	t.Helper()
	var mu sync.Mutex
	var msgs []string
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, m := range msgs {
			t.Log("failed: " + m)
		}
	})
	return func(format string, args ...any) {
		t.Helper()
		m := fmt.Sprintf(format, args...)
		mu.Lock()
		msgs = append(msgs, m)
		mu.Unlock()
		t.Error(m)
	}
}

// Eventually calls check every interval until it returns nil, and fails the
// test with check's last error when timeout passes. Use generous timeouts:
// the machine has two cores and other builds may be running.
func Eventually(t testing.TB, timeout, interval time.Duration, check func(ctx context.Context) error) {
	t.Helper()
	if err := Poll(context.Background(), timeout, interval, check); err != nil {
		t.Fatal(err)
	}
}

// Poll is Eventually without a test: it returns check's last error on
// timeout.
func Poll(ctx context.Context, timeout, interval time.Duration, check func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last error
	for {
		attempt, cancelAttempt := context.WithTimeout(ctx, 10*time.Second)
		last = check(attempt)
		cancelAttempt()
		if last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not true after %s: %w", timeout, last)
		case <-time.After(interval):
		}
	}
}
