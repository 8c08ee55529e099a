package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
)

// The slow query endpoint answers Prometheus' own client after its delay,
// with one sample of 1; other paths reach the app.
func TestSlowQueries(t *testing.T) {
	app := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusTeapot) })
	srv := httptest.NewServer(slowQueries(app, 200*time.Millisecond))
	defer srv.Close()
	c, err := api.NewClient(api.Config{Address: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	v, _, _, err := promv1.NewAPI(c).Query(context.Background(), "sum(rate(x[1m]))", time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took < 200*time.Millisecond {
		t.Errorf("answered after %s, before the delay", took)
	}
	vec, ok := v.(model.Vector)
	if !ok || len(vec) != 1 || vec[0].Value != 1 {
		t.Errorf("result %v, want one sample of 1", v)
	}
	resp, err := http.Get(srv.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusTeapot {
		t.Errorf("GET / answered %d, not by the app", resp.StatusCode)
	}
}
