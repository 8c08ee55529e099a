package testenv

import (
	"testing"
	"time"
)

// Eventually polls fn every 100 ms until it returns nil, and fails the test
// once timeout has passed, with what and fn's last error. It is the one
// polling helper of the integration tests.
func Eventually(t testing.TB, timeout time.Duration, what string, fn func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := fn()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: still failing after %s: %v", what, timeout, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
