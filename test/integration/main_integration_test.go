//go:build integration

package integration

import (
	"testing"

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
