//go:build integration

package integration

import (
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"elasti.dev/elasti/internal/testenv"
)

var k8s client.Client

func TestMain(m *testing.M) {
	testenv.Main(m, testenv.Options{}, func(e *testenv.Env) { k8s = e.Client })
}
