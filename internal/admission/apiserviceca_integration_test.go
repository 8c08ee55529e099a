//go:build integration

package admission

import (
	"context"
	"encoding/base64"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"elasti.dev/elasti/internal/testenv"
)

// TestAPIServiceCA: with config/metrics-api's permissions, and no more, the
// operator writes its CA into the metrics API's APIService once it reaches
// the operator's Service, and leaves alone one that is missing or reaches
// another server (KEDA's, say).
func TestAPIServiceCA(t *testing.T) {
	ctx := context.Background()
	c := env.Client
	const name = "v1beta1.external.metrics.k8s.io"
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: operatorNS}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	root, err := testenv.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	if err := env.Apply(ctx, filepath.Join(root, "config", "metrics-api", "rbac.yaml")); err != nil {
		t.Fatal(err)
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: operatorNS, Name: "apiservice-ca-cert"},
		Data: map[string][]byte{CAKey: []byte("-----BEGIN CERTIFICATE-----\nca\n-----END CERTIFICATE-----\n")}}
	if err := c.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	// The operator reads the Secret with its webhook role (config/webhook);
	// here the test's admin reads it, the operator writes.
	operator := impersonate(t, "system:serviceaccount:"+operatorNS+":elasti-operator")
	a := &apiServiceCA{
		reader: readerSplit{secrets: c, rest: operator}, writer: operator, secret: client.ObjectKeyFromObject(secret), apiService: name,
		service: types.NamespacedName{Namespace: operatorNS, Name: "elasti-metrics-api"},
	}

	if done, skipped, err := a.sync(ctx); err != nil || !done || skipped != "it does not exist" {
		t.Fatalf("no APIService: done %v, skipped %q, err %v", done, skipped, err)
	}

	svc := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
		"metadata": map[string]any{"name": name},
		"spec": map[string]any{
			"group": "external.metrics.k8s.io", "version": "v1beta1", "groupPriorityMinimum": int64(100), "versionPriority": int64(100),
			"service": map[string]any{"namespace": "kube-system", "name": "keda-metrics-apiserver", "port": int64(443)},
		},
	}}
	if err := c.Create(ctx, svc); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), svc) })
	done, skipped, err := a.sync(ctx)
	if err != nil || !done || !strings.Contains(skipped, "kube-system/keda-metrics-apiserver") {
		t.Fatalf("another server's APIService: done %v, skipped %q, err %v", done, skipped, err)
	}
	bundle := func() string {
		t.Helper()
		got := &unstructured.Unstructured{}
		got.SetGroupVersionKind(apiServiceKind)
		if err := c.Get(ctx, types.NamespacedName{Name: name}, got); err != nil {
			t.Fatal(err)
		}
		b, _, _ := unstructured.NestedString(got.Object, "spec", "caBundle")
		return b
	}
	if b := bundle(); b != "" {
		t.Fatalf("another server's caBundle written: %q", b)
	}

	// A patch: the aggregator writes the status meanwhile.
	reach := []byte(`{"spec":{"service":{"namespace":"` + operatorNS + `","name":"elasti-metrics-api","port":443}}}`)
	if err := c.Patch(ctx, svc, client.RawPatch(types.MergePatchType, reach)); err != nil {
		t.Fatal(err)
	}
	if done, skipped, err := a.sync(ctx); err != nil || !done || skipped != "" {
		t.Fatalf("the operator's APIService: done %v, skipped %q, err %v", done, skipped, err)
	}
	if b, want := bundle(), base64.StdEncoding.EncodeToString(secret.Data[CAKey]); b != want {
		t.Errorf("caBundle %q, want %q", b, want)
	}

	// Without config/metrics-api's ClusterRole the write is refused: the
	// permissions above are what made it.
	other := impersonate(t, "system:serviceaccount:"+operatorNS+":someone-else")
	b := &apiServiceCA{reader: readerSplit{secrets: c, rest: other}, writer: other, secret: a.secret, apiService: name, service: a.service}
	if _, _, err := b.sync(ctx); !apierrors.IsForbidden(err) {
		t.Errorf("sync without the role: %v, want forbidden", err)
	}
}

// readerSplit reads Secrets with one client and everything else with
// another.
type readerSplit struct {
	secrets, rest client.Reader
}

func (r readerSplit) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if _, ok := obj.(*corev1.Secret); ok {
		return r.secrets.Get(ctx, key, obj, opts...)
	}
	return r.rest.Get(ctx, key, obj, opts...)
}

func (r readerSplit) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	return r.rest.List(ctx, list, opts...)
}
