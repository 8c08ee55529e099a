package cli

import (
	"fmt"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
)

// kubeFlags are the kubectl flags that choose the cluster, identity and
// namespace. Loading follows kubectl: --kubeconfig, else $KUBECONFIG, else
// ~/.kube/config.
type kubeFlags struct {
	kubeconfig string
	context    string
	namespace  string
}

func (f *kubeFlags) addFlags(fs *pflag.FlagSet) {
	fs.StringVar(&f.kubeconfig, "kubeconfig", "", "path to the kubeconfig file (default: $KUBECONFIG or ~/.kube/config)")
	fs.StringVar(&f.context, "context", "", "the kubeconfig context to use")
	fs.StringVarP(&f.namespace, "namespace", "n", "", "the namespace (default: the context's namespace, else \"default\")")
}

func (f *kubeFlags) clientConfig() clientcmd.ClientConfig {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = f.kubeconfig
	overrides := &clientcmd.ConfigOverrides{CurrentContext: f.context}
	overrides.Context.Namespace = f.namespace
	return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides)
}

// session is a client for the chosen cluster and the namespace to work in.
type session struct {
	client    client.Client
	namespace string
}

// connect loads the kubeconfig and builds a client that knows Elasti's types.
func (f *kubeFlags) connect() (*session, error) {
	cc := f.clientConfig()
	ns, _, err := cc.Namespace()
	if err != nil {
		return nil, fmt.Errorf("read the namespace from the kubeconfig: %w", err)
	}
	cfg, err := cc.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("load kubeconfig: %w", err)
	}
	cfg.UserAgent = "kubectl-elasti"
	// list reads one /scale per row; kubectl's own limits are this generous.
	cfg.QPS, cfg.Burst = 50, 100
	c, err := client.New(cfg, client.Options{Scheme: newScheme()})
	if err != nil {
		return nil, fmt.Errorf("build API client for %s: %w", cfg.Host, err)
	}
	return &session{client: c, namespace: ns}, nil
}

func newScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(elastiv1alpha1.AddToScheme(s))
	return s
}
