// Command demo narrates Elasti on the local cluster for `make demo`: it
// installs Elasti, the demo app and an ElastiService, shows the app going to
// sleep, wakes it with a request and measures what the wake cost, then
// prints how to carry on by hand. hack/demo.sh builds and starts the cluster
// first.
package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"elasti.dev/elasti/internal/testenv/estest"
	"elasti.dev/elasti/test/cluster"
	"elasti.dev/elasti/test/e2e"
)

const (
	ns   = "demo"
	name = "demoapp"
)

func main() {
	if err := run(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

type demo struct {
	env  *e2e.Env
	c    client.Client
	http *http.Client
	url  string
}

func say(format string, args ...any) {
	fmt.Printf("%s  %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

func run(ctx context.Context) error {
	cfg, err := cluster.LocalConfig(os.Getenv("ELASTI_K8S_BIN"))
	if err != nil {
		return err
	}
	env, err := e2e.NewEnv(cfg)
	if err != nil {
		return err
	}
	c := env.Client
	// The demo's client works like curl run once per step: a new connection
	// for every request, so each one takes kube-proxy's route of that moment.
	// (The e2e suite also tests kept-alive clients through a wake.)
	d := &demo{env: env, c: c, http: &http.Client{Timeout: 2 * time.Minute, Transport: &http.Transport{
		DialContext: env.Dialer.DialContext, DisableKeepAlives: true,
	}}}

	say("Installing Elasti: kubectl apply -k test/e2e/testdata/elasti (config/default, polling every second)")
	if _, err := cfg.Kubectl(ctx, "", "apply", "--server-side", "--force-conflicts", "-k", filepath.Join(cfg.RepoRoot, "test", "e2e", "testdata", "elasti")); err != nil {
		return err
	}
	if err := env.WaitRolledOut(ctx, e2e.ElastiNamespace, e2e.OperatorDeployment, e2e.ResolverDeployment); err != nil {
		return err
	}
	say("Elasti is up: 2 operator replicas (one leader) and 2 resolvers")

	say("Deploying the demo app in namespace %q (Deployment + Service, scraped by Prometheus at %s)", ns, cfg.PrometheusURL())
	if err := d.fresh(ctx); err != nil {
		return err
	}
	var svc corev1.Service
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &svc); err != nil {
		return err
	}
	d.url = "http://" + net.JoinHostPort(svc.Spec.ClusterIP, fmt.Sprint(e2e.DemoHTTPPort)) + "/"
	if err := d.poll(ctx, 2*time.Minute, func(ctx context.Context) error { _, err := d.get(ctx); return err }); err != nil {
		return err
	}

	say("Baseline without Elasti: scale the Deployment 0 -> 1 by hand and time it until its endpoint is ready and answers")
	if err := d.scale(ctx, 0); err != nil {
		return err
	}
	// Until the old pod is gone it may still answer (kube-proxy falls back
	// to serving, terminating endpoints): start from nothing.
	if err := d.poll(ctx, 2*time.Minute, d.noPods); err != nil {
		return err
	}
	t0 := time.Now()
	if err := d.scale(ctx, 1); err != nil {
		return err
	}
	// Wait for the ready endpoint before asking: a request to a Service
	// with no endpoint is refused, and one sent just as kube-proxy
	// reprograms the Service can hang until its timeout, which would time
	// the retry rather than the scale-up. After that, ask every 20 ms with
	// a short timeout until kube-proxy routes to the new pod.
	if err := e2e.Poll(ctx, 2*time.Minute, 20*time.Millisecond, func(ctx context.Context) error {
		own, err := env.ReadyEndpoints(ctx, ns, name)
		if err == nil && own == 0 {
			err = errors.New("no ready endpoint yet")
		}
		return err
	}); err != nil {
		return err
	}
	ready := time.Since(t0)
	if err := e2e.Poll(ctx, time.Minute, 20*time.Millisecond, func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		_, err := d.get(ctx)
		return err
	}); err != nil {
		return err
	}
	plain := time.Since(t0)
	say("  plain scale 0 -> 1: endpoint ready after %s, answered through the ClusterIP after %s", ready.Round(time.Millisecond), plain.Round(time.Millisecond))

	q := e2e.RequestRateQuery(ns, name)
	say("Creating the ElastiService: sleep when %s < %s for a 10s cooldown", q, e2e.Threshold)
	es := env.ElastiServiceFor(ns, name, q, estest.Cooldown(10))
	if err := c.Create(ctx, es); err != nil {
		return err
	}
	say("Nobody calls the app now. Waiting for the cooldown and the scale to zero ...")
	// Asleep as the e2e tests mean it: not only replicas 0, but the pod gone
	// and kube-proxy no longer sending the Service to it. Until then a
	// request can still reach the terminating pod (Kubernetes' own
	// termination race; the demo app drains for 3 s after SIGTERM).
	if err := d.poll(ctx, 3*time.Minute, func(ctx context.Context) error { return env.Asleep(ctx, ns, name) }); err != nil {
		return err
	}
	say("  asleep: mode=proxy, Deployment at 0 replicas, pod gone, the Service's traffic goes to the resolvers")

	say("A request arrives at zero: GET %s", d.url)
	t1 := time.Now()
	body, err := d.get(ctx)
	if err != nil {
		return err
	}
	wake := time.Since(t1)
	say("  answered %q after %s (cold start)", trim(body), wake.Round(time.Millisecond))
	if added := wake - plain; added > 0 {
		say("  a plain scale 0 -> 1 took %s, so Elasti added %s (activation call, scale, hold and forward)",
			plain.Round(time.Millisecond), added.Round(time.Millisecond))
	} else {
		say("  a plain scale 0 -> 1 took %s: through Elasti it was quicker, because the resolver forwards to the pod the moment\n            its endpoint is ready, while a plain client also waits for kube-proxy to route it. Single cold starts vary by up to\n            a second with the kubelet's ticks; make bench measures what Elasti adds over 30 pairs", plain.Round(time.Millisecond))
	}

	if err := d.poll(ctx, time.Minute, func(ctx context.Context) error { return env.Awake(ctx, ns, name) }); err != nil {
		return err
	}
	t2 := time.Now()
	for i := 0; i < 5; i++ {
		if _, err := d.get(ctx); err != nil {
			return err
		}
	}
	say("Back to serve: proxy slice removed, 5 more requests went straight to the pod in %s", time.Since(t2).Round(time.Millisecond))
	say("The app will sleep again after 10s without traffic.")

	k := filepath.Join(cfg.BinDir, "kubectl")
	fmt.Printf(`
Try it by hand:
  export KUBECONFIG=%[1]s
  %[2]s -n %[3]s get elastiservices,deploy,endpointslices
  %[2]s -n %[3]s events      # in time order, the operator's Events among them
  ip netns exec %[4]s curl -s %[5]s      # wakes it if it sleeps
  Prometheus: %[6]s (from this machine)
Tear it all down:
  make cluster-down
`, cfg.Kubeconfig(), k, ns, cfg.NetNS, d.url, cfg.PrometheusURL())
	return nil
}

func trim(s string) string {
	if len(s) > 0 && s[len(s)-1] == '\n' {
		return s[:len(s)-1]
	}
	return s
}

// fresh recreates the demo namespace's app.
func (d *demo) fresh(ctx context.Context) error {
	n := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}
	if err := d.c.Delete(ctx, n); err == nil {
		say("  removing the demo namespace of an earlier run")
	}
	if err := d.poll(ctx, 2*time.Minute, func(ctx context.Context) error {
		err := d.c.Create(ctx, n)
		if apierrors.IsAlreadyExists(err) {
			return errors.New("namespace still terminating")
		}
		return err
	}); err != nil {
		return err
	}
	for _, o := range []client.Object{e2e.DemoAppDeployment(ns, name, 1), e2e.DemoAppService(ns, name)} {
		if err := d.c.Create(ctx, o); err != nil {
			return err
		}
	}
	return nil
}

func (d *demo) get(ctx context.Context) (string, error) {
	return e2e.GetWith(ctx, d.http, d.url, "")
}

func (d *demo) scale(ctx context.Context, n int32) error {
	var dep appsv1.Deployment
	if err := d.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &dep); err != nil {
		return err
	}
	dep.Spec.Replicas = &n
	return d.c.Update(ctx, &dep)
}

func (d *demo) poll(ctx context.Context, timeout time.Duration, check func(context.Context) error) error {
	return e2e.Poll(ctx, timeout, 200*time.Millisecond, check)
}

func (d *demo) noPods(ctx context.Context) error {
	pods, err := d.env.Pods(ctx, ns, map[string]string{"app": name})
	if err != nil {
		return err
	}
	if len(pods) > 0 {
		return fmt.Errorf("%d pods left", len(pods))
	}
	return nil
}
