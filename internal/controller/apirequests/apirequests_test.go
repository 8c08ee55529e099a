package apirequests

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestResource(t *testing.T) {
	for path, want := range map[string]string{
		"/api/v1/namespaces/a/pods":                                             "pods",
		"/api/v1/namespaces/a/pods/p-1":                                         "pods",
		"/api/v1/nodes/n-1/proxy/stats/summary":                                 "nodes/proxy",
		"/api/v1/namespaces":                                                    "namespaces",
		"/api/v1/namespaces/a":                                                  "namespaces",
		"/apis/apps/v1/namespaces/a/deployments/web/scale":                      "deployments/scale",
		"/apis/elasti.dev/v1alpha1/namespaces/a/elastiservices/web/status":      "elastiservices/status",
		"/apis/elasti.dev/v1alpha1/elastiservices":                              "elastiservices",
		"/apis/coordination.k8s.io/v1/namespaces/elasti-system/leases/operator": "leases",
		"/apis/authorization.k8s.io/v1/subjectaccessreviews":                    "subjectaccessreviews",
		"/apis/discovery.k8s.io/v1":                                             "other",
		"/apis":                                                                 "other",
		"/api/v1":                                                               "other",
		"/version":                                                              "other",
		"":                                                                      "other",
	} {
		if got := Resource(path); got != want {
			t.Errorf("Resource(%q) = %q, want %q", path, got, want)
		}
	}
}

// Requests through the wrapped transport are counted by method and
// resource, and still reach the server.
func TestWrapCounts(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	defer srv.Close()
	c := &http.Client{Transport: Wrap(http.DefaultTransport)}
	before := testutil.ToFloat64(requests.WithLabelValues(http.MethodPatch, "deployments/scale"))
	for range 2 {
		req, err := http.NewRequest(http.MethodPatch, srv.URL+"/apis/apps/v1/namespaces/a/deployments/web/scale", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNoContent {
			t.Fatalf("status %d", resp.StatusCode)
		}
	}
	if got := testutil.ToFloat64(requests.WithLabelValues(http.MethodPatch, "deployments/scale")) - before; got != 2 {
		t.Errorf("counted %v PATCHes of deployments/scale, want 2", got)
	}
}
