package handler

import (
	"net/http/httptest"
	"net/url"
	"testing"

	"k8s.io/utils/ptr"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
)

// TestMatchStatic covers the conditions one by one, in order and by state.
func TestMatchStatic(t *testing.T) {
	rule := func(name string, when elastiv1alpha1.StaticResponseWhen, m elastiv1alpha1.StaticResponseMatch) elastiv1alpha1.StaticResponse {
		return elastiv1alpha1.StaticResponse{Name: name, Match: m, When: when}
	}
	rules := []elastiv1alpha1.StaticResponse{
		rule("head", "", elastiv1alpha1.StaticResponseMatch{Methods: []elastiv1alpha1.HTTPMethod{"HEAD"}}),
		rule("ready-exact", elastiv1alpha1.StaticResponseAtZero, elastiv1alpha1.StaticResponseMatch{Path: &elastiv1alpha1.PathMatch{Exact: ptr.To("/ready")}}),
		rule("ready-always", elastiv1alpha1.StaticResponseAlways, elastiv1alpha1.StaticResponseMatch{Path: &elastiv1alpha1.PathMatch{Prefix: ptr.To("/ready")}}),
		rule("query", elastiv1alpha1.StaticResponseAlways, elastiv1alpha1.StaticResponseMatch{
			Query: []elastiv1alpha1.QueryMatch{{Name: "probe"}, {Name: "kind", Exact: ptr.To("live ness")}},
		}),
	}
	for _, tc := range []struct {
		name, method, target string
		ready                bool
		want                 string
	}{
		{"method", "HEAD", "/anything", false, "head"},
		{"a rule with no when applies at zero only", "HEAD", "/anything", true, ""},
		{"exact path at zero", "GET", "/ready", false, "ready-exact"},
		{"an AtZero rule stands aside once ready", "GET", "/ready", true, "ready-always"},
		{"prefix", "GET", "/readyz", false, "ready-always"},
		{"exact is not a prefix", "GET", "/ready/", false, "ready-always"},
		{"decoded path", "GET", "/re%61dy", false, "ready-exact"},
		{"no rule", "GET", "/", false, ""},
		{"query present and decoded value", "GET", "/?probe&kind=live+ness", true, "query"},
		{"query value among several", "GET", "/?kind=a&probe=&kind=live%20ness", true, "query"},
		{"query value differs", "GET", "/?probe=1&kind=live", true, ""},
		{"query parameter missing", "GET", "/?kind=live+ness", true, ""},
		{"query that does not parse is read as far as it goes", "GET", "/?x=%zz&probe&kind=live+ness", true, "query"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := httptest.NewRequest(tc.method, tc.target, nil)
			got := ""
			if r := matchStatic(rules, req, tc.ready); r != nil {
				got = r.Name
			}
			if got != tc.want {
				t.Errorf("%s %s (ready %v): rule %q, want %q", tc.method, tc.target, tc.ready, got, tc.want)
			}
		})
	}
	if _, err := url.ParseQuery("x=%zz"); err == nil {
		t.Fatal("the fixture's bad query parses")
	}
}
