// Package memlimit gives the Go runtime a soft memory limit below the
// container's memory limit.
//
// Without one, the runtime sizes its heap from GOGC alone: a live heap of
// 300 MiB may grow to 600 MiB before the next GC, and a container limited
// to 512 MiB is killed on the way. With a soft limit the GC runs harder as
// the heap nears it instead. The manifests pass the container's
// limits.memory in bytes through the downward API as ELASTI_MEMORY_LIMIT;
// the soft limit is 90% of it, leaving the rest for what the runtime does
// not count (the binary, thread stacks outside the heap, the kernel's share
// of the cgroup).
package memlimit

import (
	"fmt"
	"math"
	"runtime/debug"
	"strconv"
	"strings"
)

// Env holds the container's memory limit in bytes.
const Env = "ELASTI_MEMORY_LIMIT"

// Share is the part of the container's limit given to the runtime.
const Share = 0.9

// FromEnv sets the runtime's soft memory limit to Share of the bytes in
// Env, and returns it. It sets nothing, and returns 0, when GOMEMLIMIT is set
// (the runtime has read it already: the operator's word wins) or Env is
// empty. A value that is not a positive number of bytes is an error.
func FromEnv(getenv func(string) string) (int64, error) {
	if getenv("GOMEMLIMIT") != "" {
		return 0, nil
	}
	v := strings.TrimSpace(getenv(Env))
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("%s=%q: want the container's memory limit in bytes (a positive integer)", Env, v)
	}
	limit := int64(math.Floor(float64(n) * Share))
	debug.SetMemoryLimit(limit)
	return limit, nil
}
