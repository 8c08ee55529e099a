package cluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// RolloutsComponent is Argo Rollouts' controller, built from the Go module
// proxy by hack/argo-rollouts.sh, which the end-to-end tests start on demand
// (elasti-cluster rollouts-start) to sleep and wake a real Rollout. It runs
// on the first node, cluster-wide, with the admin kubeconfig; Down stops it
// like any component.
const RolloutsComponent = "argo-rollouts"

// RolloutsDirEnv names the directory hack/argo-rollouts.sh prints: the
// controller binary and the release's CRDs.
const RolloutsDirEnv = "ELASTI_ARGO_ROLLOUTS_DIR"

// rolloutsHealthPort is the controller's health port, on the first node's
// loopback.
const rolloutsHealthPort = 20246

// rolloutsNamespace is where the controller looks for its own ConfigMap
// (its default, without POD_NAMESPACE).
const rolloutsNamespace = "argo-rollouts"

func (c Config) rolloutsComponent(dir string) component {
	return component{name: RolloutsComponent, bin: filepath.Join(dir, "rollouts-controller"), args: []string{
		"--kubeconfig=" + c.Kubeconfig(), "--leader-elect=false",
		fmt.Sprintf("--healthzPort=%d", rolloutsHealthPort), "--metricsPort=20247",
		"--loglevel=info",
	}}
}

// StartRollouts installs Argo Rollouts' CRDs and starts its controller (both
// from $ELASTI_ARGO_ROLLOUTS_DIR), and waits until it answers its health
// check. It does nothing more when the controller already runs.
func (c Config) StartRollouts(ctx context.Context, logf Logf) error {
	dir, err := c.installRelease(ctx, RolloutsComponent, RolloutsDirEnv, "hack/argo-rollouts.sh", rolloutsNamespace)
	if err != nil || dir == "" {
		return err
	}
	if err := c.spawn(c.rolloutsComponent(dir)); err != nil {
		return err
	}
	nodeHTTP := c.nodeHTTPClient()
	if err := c.waitFor(ctx, RolloutsComponent, 2*time.Minute, httpOK(nodeHTTP, fmt.Sprintf("http://127.0.0.1:%d/healthz", rolloutsHealthPort))); err != nil {
		return err
	}
	logf("Argo Rollouts' controller runs (%s)", dir)
	return nil
}

// installRelease is the start of running a controller built from a release
// by a hack/ script: it reads the directory the script printed from env,
// and installs the CRDs in its crds/ (waiting until they are established)
// and the namespace ns. It returns ""
// when the component named comp already runs.
func (c Config) installRelease(ctx context.Context, comp, env, script, ns string) (string, error) {
	dir := os.Getenv(env)
	if dir == "" {
		return "", fmt.Errorf("%s is not set: run %s and set it to the directory it prints", env, script)
	}
	if _, ok := c.runningPID(comp); ok {
		return "", nil
	}
	crds := filepath.Join(dir, "crds")
	if _, err := c.Kubectl(ctx, "", "apply", "--server-side", "-f", crds); err != nil {
		return "", err
	}
	// Served before the first object of theirs is written: a client that
	// discovers the group while only part of it is served caches that part.
	if _, err := c.Kubectl(ctx, "", "wait", "--for=condition=Established", "--timeout=60s", "-f", crds); err != nil {
		return "", err
	}
	manifest := fmt.Sprintf("apiVersion: v1\nkind: Namespace\nmetadata: {name: %s}\n", ns)
	if _, err := c.Kubectl(ctx, manifest, "apply", "-f", "-"); err != nil {
		return "", err
	}
	return dir, nil
}
