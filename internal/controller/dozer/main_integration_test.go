//go:build integration

package dozer

import (
	"testing"

	"elasti.dev/elasti/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	testenv.Main(m, testenv.Options{}, func(e *testenv.Env) { env = e })
}
