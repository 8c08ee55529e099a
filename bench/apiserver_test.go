//go:build bench

package main

import "testing"

func TestCountersBy(t *testing.T) {
	text := `# TYPE apiserver_request_total counter
apiserver_request_total{verb="PATCH",resource="elastiservices"} 3
apiserver_request_total{verb="PUT",resource="elastiservices"} 2
apiserver_request_total{verb="GET",resource="elastiservices"} 7
apiserver_request_total{verb="PUT",resource="leases"} 5
`
	got := countersBy(text, "apiserver_request_total", func(l map[string]string) (string, bool) {
		return l["resource"], l["verb"] != "GET"
	})
	if len(got) != 2 || got["elastiservices"] != 5 || got["leases"] != 5 {
		t.Errorf("by resource, writes only: %v", got)
	}
	if n := sumCounter(text, "apiserver_request_total"); n != 17 {
		t.Errorf("sum %v, want 17", n)
	}
	if n := sumCounter(text, "absent_total"); n != 0 {
		t.Errorf("absent counter sums to %v", n)
	}
}
