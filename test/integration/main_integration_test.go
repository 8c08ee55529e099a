//go:build integration

package integration

import (
	"context"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"elasti.dev/elasti/internal/testenv"
)

var (
	k8s client.Client
	// restConfig reaches the API server below the typed client, for
	// requests a client cannot encode.
	restConfig *rest.Config
)

func TestMain(m *testing.M) {
	testenv.Main(m, testenv.Options{}, func(e *testenv.Env) { k8s, restConfig = e.Client, e.Config })
}

// expectRejected creates obj and requires the API server to refuse it at
// admission as Invalid (the CRD's schema and CEL rules, and Elasti's
// ValidatingAdmissionPolicy, whose validations answer Invalid too) with a
// message containing every one of wants (a field's path, the rule's words).
// It returns the message; an object wrongly accepted is deleted.
func expectRejected(t *testing.T, ctx context.Context, obj client.Object, wants ...string) string {
	t.Helper()
	err := k8s.Create(ctx, obj)
	if err == nil {
		_ = k8s.Delete(ctx, obj)
		t.Fatalf("the API server accepted %s %q, which must be refused", obj.GetObjectKind().GroupVersionKind().Kind, obj.GetName())
	}
	if !apierrors.IsInvalid(err) {
		t.Fatalf("want an Invalid error, got %v", err)
	}
	msg := err.Error()
	for _, want := range wants {
		if !strings.Contains(msg, want) {
			t.Fatalf("the refusal does not say %q:\n%s", want, msg)
		}
	}
	return msg
}
