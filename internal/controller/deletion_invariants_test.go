package controller

import (
	"testing"
	"time"
)

// TestReleaseProxy: a deleted ElastiService's proxy slices wait for a ready
// endpoint of the Service's own, but never past the deadline, and not when
// nothing could become ready or hold traffic.
func TestReleaseProxy(t *testing.T) {
	now := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	waiting := release{now: now, deadline: now.Add(time.Minute), slices: true, serviceFound: true, targetFound: true, replicas: 1, resolvers: 1}
	for _, tc := range []struct {
		name     string
		mut      func(*release)
		wait     time.Duration
		failOpen bool
	}{
		{"no proxy slice: nothing to wait for", func(s *release) { s.slices = false }, 0, false},
		{"target starting: wait until the deadline", nil, time.Minute, false},
		{"ready endpoint: release", func(s *release) { s.ownReady = true }, 0, false},
		{"a ready endpoint of a target at zero is stale", func(s *release) { s.ownReady = true; s.replicas = 0 }, time.Minute, false},
		{"deadline passed: fail open", func(s *release) { s.now = s.deadline }, 0, true},
		{"Service gone: fail open", func(s *release) { s.serviceFound = false }, 0, true},
		{"target gone: fail open", func(s *release) { s.targetFound = false }, 0, true},
		{"no resolver holds traffic: fail open", func(s *release) { s.resolvers = 0 }, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := waiting
			if tc.mut != nil {
				tc.mut(&s)
			}
			wait, why := releaseProxy(s)
			if wait != tc.wait || (why != "") != tc.failOpen {
				t.Errorf("releaseProxy = %s, %q; want %s, fail open %v", wait, why, tc.wait, tc.failOpen)
			}
		})
	}
}
