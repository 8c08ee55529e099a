package testenv

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
)

// ErrNoAssets means KUBEBUILDER_ASSETS does not point at the binaries; run the
// tests through `make test-integration`, which builds them.
var ErrNoAssets = errors.New("KUBEBUILDER_ASSETS is not set: run `make test-integration`, which builds kube-apiserver and etcd with hack/k8s-binaries.sh")

// Env is a running control plane.
type Env struct {
	Config *rest.Config
	Client client.Client
	Scheme *runtime.Scheme
	// Version is the kube-apiserver's reported gitVersion.
	Version string
	// Root is the module root.
	Root string

	env *envtest.Environment
}

// Options says what to install beyond Elasti's own CRDs and admission
// policies.
type Options struct {
	// KEDAAndRollouts installs KEDA's ScaledObject and Argo Rollouts'
	// Rollout CRDs, taken from those projects' Go modules at KEDAModule and
	// RolloutsModule.
	KEDAAndRollouts bool
}

// NewScheme returns a scheme with client-go's types, the apiextensions types
// and Elasti's.
func NewScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(apiextensionsv1.AddToScheme(s))
	utilruntime.Must(elastiv1alpha1.AddToScheme(s))
	return s
}

// Start starts kube-apiserver and etcd and installs Elasti's CRDs and
// admission policies. Call Stop when done.
func Start(opts Options) (*Env, error) {
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		return nil, ErrNoAssets
	}
	root, err := ModuleRoot()
	if err != nil {
		return nil, err
	}
	crds := []string{filepath.Join(root, "config", "crd", "bases")}
	if opts.KEDAAndRollouts {
		more, err := kedaAndRolloutCRDs()
		if err != nil {
			return nil, err
		}
		crds = append(crds, more...)
	}
	s := NewScheme()
	env := &envtest.Environment{
		BinaryAssetsDirectory: assets,
		CRDDirectoryPaths:     crds,
		ErrorIfCRDPathMissing: true,
		Scheme:                s,
		// make test starts a dozen API servers at once beside the unit
		// tests on two CPUs; envtest's default of 20 s to become ready is
		// too short for that (seen: "timeout waiting for process
		// kube-apiserver to start successfully").
		ControlPlaneStartTimeout: 3 * time.Minute,
		// The same for the CRDs to be served: 10 s by default, which a
		// package starting beside the end-to-end tier's 500 ElastiServices
		// (TestResolverRolloutAtScale) once missed ("something went wrong
		// waiting for CRDs to appear as API resources").
		CRDInstallOptions: envtest.CRDInstallOptions{MaxTime: 2 * time.Minute},
	}
	// envtest's default Service range is a /24: 254 ClusterIPs for a whole
	// package, which the controller suite's Services (never deleted, as
	// there is no garbage collector) fill. A /16 holds them all.
	env.ControlPlane.GetAPIServer().Configure().Set("service-cluster-ip-range", "10.0.0.0/16")
	cfg, err := env.Start()
	if err != nil {
		return nil, fmt.Errorf("start kube-apiserver and etcd from %s: %w", assets, err)
	}
	e := &Env{Config: cfg, Scheme: s, Root: root, env: env}
	stopOnSignal(e)
	if e.Client, err = client.New(cfg, client.Options{Scheme: s}); err != nil {
		_ = e.Stop()
		return nil, fmt.Errorf("build client: %w", err)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		_ = e.Stop()
		return nil, fmt.Errorf("build discovery client: %w", err)
	}
	v, err := dc.ServerVersion()
	if err != nil {
		_ = e.Stop()
		return nil, fmt.Errorf("read server version: %w", err)
	}
	e.Version = v.GitVersion
	if err := e.report(); err != nil {
		_ = e.Stop()
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// trigger-threshold goes last: waitForPolicies probes it, and the API
	// server's policy informers see objects in the order they were written.
	for _, policy := range []string{"status-writers.yaml", "trigger-threshold.yaml"} {
		if err := e.Apply(ctx, filepath.Join(root, "config", "admission", policy)); err != nil {
			_ = e.Stop()
			return nil, err
		}
	}
	if err := e.waitForPolicies(); err != nil {
		_ = e.Stop()
		return nil, err
	}
	return e, nil
}

// KubeconfigFile writes a kubeconfig for a new user of the control plane,
// in groups, into dir and returns its path: for a component that reads
// its credentials only from a file.
func (e *Env) KubeconfigFile(dir, user string, groups ...string) (string, error) {
	u, err := e.env.ControlPlane.AddUser(envtest.User{Name: user, Groups: groups}, nil)
	if err != nil {
		return "", fmt.Errorf("add user %s: %w", user, err)
	}
	raw, err := u.KubeConfig()
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, user+".kubeconfig")
	return path, os.WriteFile(path, raw, 0o600)
}

// waitForPolicies returns once the admission policies applied by Start
// refuse what they must. The API server compiles a ValidatingAdmissionPolicy
// and its binding a moment after they are written, from its own informers;
// a test that creates an invalid ElastiService before then sees it accepted
// (seen in CI on a busy machine: every threshold case of
// TestInvalidElastiServicesAreRejected accepted). The probe is a dry-run
// create of an ElastiService whose threshold is not a number, which the
// schema lets through and elasti-trigger-threshold refuses; dry-run requests
// pass through admission and store nothing. The informers deliver in write
// order and the policies are applied status-writers first, so once the
// last-applied policy answers the earlier one does as well.
func (e *Env) waitForPolicies() error {
	th := elastiv1alpha1.Threshold("not-a-number")
	probe := &elastiv1alpha1.ElastiService{
		ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceDefault, Name: "testenv-policy-probe"},
		Spec: elastiv1alpha1.ElastiServiceSpec{
			Service:        "probe",
			ScaleTargetRef: elastiv1alpha1.ScaleTargetRef{APIVersion: "apps/v1", Kind: "Deployment", Name: "probe"},
			Triggers: []elastiv1alpha1.ScaleTrigger{{
				Type:     elastiv1alpha1.TriggerTypeNetwork,
				Metadata: elastiv1alpha1.TriggerMetadata{Threshold: &th},
			}},
		},
	}
	const limit = 2 * time.Minute
	deadline := time.Now().Add(limit)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := e.Client.Create(ctx, probe.DeepCopy(), client.DryRunAll)
		cancel()
		if apierrors.IsInvalid(err) && strings.Contains(err.Error(), "elasti-trigger-threshold") {
			return nil
		}
		if time.Now().After(deadline) {
			if err == nil {
				err = errors.New("accepted")
			}
			return fmt.Errorf("admission policy elasti-trigger-threshold not in effect %v after it was applied: a dry-run ElastiService with threshold %q got %w", limit, th, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// Stop stops the control plane.
func (e *Env) Stop() error {
	running.Lock()
	delete(running.envs, e)
	running.Unlock()
	return e.env.Stop()
}

// running is every control plane this process started and has not
// stopped yet.
var running struct {
	sync.Mutex
	envs   map[*Env]bool
	signal sync.Once
}

// stopOnSignal makes SIGINT and SIGTERM stop e, and every other control
// plane still running, before the process exits. envtest starts
// kube-apiserver and etcd in process groups of their own, so a signal to
// the test binary's group (make test stops the tiers beside a failed one
// that way, hack/test.sh) does not reach them, and a test binary killed by
// a signal runs no deferred Stop: they outlived the run.
func stopOnSignal(e *Env) {
	running.Lock()
	defer running.Unlock()
	if running.envs == nil {
		running.envs = map[*Env]bool{}
	}
	running.envs[e] = true
	running.signal.Do(func() {
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
		go func() {
			got := <-sig
			running.Lock()
			for env := range running.envs {
				_ = env.env.Stop()
			}
			running.Unlock()
			fmt.Fprintf(os.Stderr, "integration: %v: stopped kube-apiserver and etcd\n", got)
			os.Exit(2)
		}()
	})
}

// Banner is the line integration test binaries print so their output shows
// what they ran against.
func (e *Env) Banner() string {
	return fmt.Sprintf("integration: real kube-apiserver %s at %s (binaries from %s)", e.Version, e.Config.Host, e.env.BinaryAssetsDirectory)
}

// report appends the Banner, with the test package's directory, to the file
// ELASTI_INTEGRATION_REPORT names, so that `make test-integration` can show
// what every package ran against without the noise of verbose output.
func (e *Env) report() error {
	path := os.Getenv("ELASTI_INTEGRATION_REPORT")
	if path == "" {
		return nil
	}
	wd, _ := os.Getwd()
	pkg, err := filepath.Rel(e.Root, wd)
	if err != nil {
		pkg = wd
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("open %s: %w", path, err)
	}
	defer f.Close()
	_, err = fmt.Fprintf(f, "%s: %s\n", pkg, e.Banner())
	return err
}

// Apply creates or updates every object in a multi-document YAML file.
func (e *Env) Apply(ctx context.Context, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("open %s: %w", path, err)
	}
	defer f.Close()
	dec := utilyaml.NewYAMLOrJSONDecoder(f, 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("decode %s: %w", path, err)
		}
		if len(u.Object) == 0 {
			continue
		}
		if err := e.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner("elasti-testenv"), client.ForceOwnership); err != nil {
			return fmt.Errorf("apply %s %s from %s: %w", u.GetKind(), u.GetName(), path, err)
		}
	}
}

// ModuleRoot finds the directory holding go.mod, walking up from the working
// directory.
func ModuleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("go.mod not found above the working directory")
		}
		dir = parent
	}
}
