package main

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestWithProfiling(t *testing.T) {
	inner := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("inner")) })
	h := withProfiling(inner)
	for path, want := range map[string]int{"/debug/pprof/": http.StatusOK, "/debug/pprof/heap?debug=1": http.StatusOK, "/metrics": http.StatusOK} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		if rec.Code != want {
			t.Errorf("GET %s: %d, want %d", path, rec.Code, want)
		}
		if path == "/metrics" && rec.Body.String() != "inner" {
			t.Errorf("GET /metrics went to %q, want the admin handler", rec.Body.String())
		}
	}
}
