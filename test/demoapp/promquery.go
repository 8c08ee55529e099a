package main

import (
	"fmt"
	"net/http"
	"time"
)

// slowQueries answers Prometheus instant queries (GET or POST
// /api/v1/query) after delay, each with one sample of value 1 whatever
// the query, and hands every other request to next. With it the demo app
// stands in for a metrics backend that answers slowly: the bench points
// triggers at it to load the operator's trigger evaluation while it times
// cold starts (bench/scale.go).
func slowQueries(next http.Handler, delay time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/v1/query" {
			next.ServeHTTP(w, r)
			return
		}
		select {
		case <-time.After(delay):
		case <-r.Context().Done():
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[%.3f,"1"]}]}}`,
			float64(time.Now().UnixMilli())/1000)
	})
}
