package admission

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// apiServiceKind is apiregistration.k8s.io/v1 APIService, read unstructured
// (kube-aggregator's types are not a dependency).
var apiServiceKind = schema.GroupVersionKind{Group: "apiregistration.k8s.io", Version: "v1", Kind: "APIService"}

// apiServiceCA keeps an APIService's caBundle holding the CA of the
// certificate Secret, for a server of the operator that serves with that
// certificate (the metrics API). Unlike the rotator's webhook injection it
// never holds up readiness: an APIService that does not exist, or that
// reaches another server (KEDA's, prometheus-adapter's), is left alone and
// looked at again at the slow interval.
type apiServiceCA struct {
	reader     client.Reader
	writer     client.Writer
	secret     types.NamespacedName
	apiService string
	// service is the Service the APIService must reach for its caBundle
	// to be the operator's to keep.
	service    types.NamespacedName
	clock      clock.Clock
	fast, slow time.Duration
}

// NeedLeaderElection is false: every replica writes the same CA.
func (*apiServiceCA) NeedLeaderElection() bool { return false }

// Start polls until ctx ends, logging errors and what it leaves alone
// (once per change of reason).
func (a *apiServiceCA) Start(ctx context.Context) error {
	logger := log.FromContext(ctx).WithName("apiservice-ca").WithValues("apiservice", a.apiService)
	var last string
	poll(ctx, a.clock, a.fast, a.slow, func(ctx context.Context) (bool, error) {
		done, skipped, err := a.sync(ctx)
		if skipped != "" && skipped != last {
			logger.Info("not keeping the APIService's caBundle: " + skipped)
		}
		last = skipped
		return done, err
	}, func(err error) {
		logger.Error(err, "keep the APIService's caBundle")
	})
	return nil
}

// sync writes the Secret's CA into the APIService's caBundle when they
// differ. done is true when there is nothing to do until the CA changes
// (written, already there, or not the operator's to write: skipped says
// why).
func (a *apiServiceCA) sync(ctx context.Context) (done bool, skipped string, err error) {
	var s corev1.Secret
	if err := a.reader.Get(ctx, a.secret, &s); err != nil {
		return false, "", fmt.Errorf("get Secret %s: %w", a.secret, err)
	}
	ca := s.Data[CAKey]
	if len(ca) == 0 {
		return false, "", nil // the rotator has not filled it yet
	}
	svc := &unstructured.Unstructured{}
	svc.SetGroupVersionKind(apiServiceKind)
	switch err := a.reader.Get(ctx, types.NamespacedName{Name: a.apiService}, svc); {
	case apierrors.IsNotFound(err):
		return true, "it does not exist", nil
	case err != nil:
		return false, "", fmt.Errorf("get APIService %s: %w", a.apiService, err)
	}
	name, _, _ := unstructured.NestedString(svc.Object, "spec", "service", "name")
	ns, _, _ := unstructured.NestedString(svc.Object, "spec", "service", "namespace")
	if name != a.service.Name || ns != a.service.Namespace {
		return true, fmt.Sprintf("it reaches Service %s/%s, not %s", ns, name, a.service), nil
	}
	bundle, _, _ := unstructured.NestedString(svc.Object, "spec", "caBundle")
	if bundle == base64.StdEncoding.EncodeToString(ca) {
		return true, "", nil
	}
	// []byte marshals as base64, the caBundle's encoding.
	patch, err := json.Marshal(map[string]any{"spec": map[string]any{"caBundle": ca}})
	if err != nil {
		return false, "", err
	}
	if err := a.writer.Patch(ctx, svc, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return false, "", fmt.Errorf("patch APIService %s: %w", a.apiService, err)
	}
	return true, "", nil
}
