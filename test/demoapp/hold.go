package main

import (
	"fmt"
	"os"

	"k8s.io/apimachinery/pkg/api/resource"
)

// parseHold reads a byte quantity such as "500Mi", "1Gi" or "4096" (the
// Kubernetes quantity syntax, the one a pod's memory request is written
// in). Empty means nothing to hold.
func parseHold(s string) (int64, error) {
	if s == "" {
		return 0, nil
	}
	q, err := resource.ParseQuantity(s)
	if err != nil {
		return 0, fmt.Errorf("hold memory %q: %w", s, err)
	}
	n, ok := q.AsInt64()
	if !ok || n < 0 {
		return 0, fmt.Errorf("hold memory %q: want a whole number of bytes, at least 0, such as 500Mi", s)
	}
	return n, nil
}

// holdMemory allocates n bytes and writes to every page of them, and
// returns them. An allocation alone only maps pages that the kernel backs
// on their first write; written, they are resident, and stay so while the
// caller keeps the slice referenced. They stand for an application's warm
// state (caches, a loaded model): what a scale to zero throws away and a
// doze keeps.
func holdMemory(n int64) []byte {
	if n <= 0 {
		return nil
	}
	b := make([]byte, n)
	page := os.Getpagesize()
	for i := 0; i < len(b); i += page {
		b[i] = 1
	}
	return b
}
