//go:build integration

package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/controller-runtime/pkg/client"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
)

// staticManifest is validManifest with two static response rules.
var staticManifest = strings.Replace(validManifest, "  proxy: {holdTimeout: 5m, maxHeldRequests: 1000}\n",
	"  proxy:\n    holdTimeout: 5m\n    maxHeldRequests: 1000\n"+staticRules, 1)

const staticRules = `    staticResponses:
    - name: kubelet
      match:
        methods: [GET, HEAD]
        path: {exact: /healthz}
        headers: [{name: user-agent, prefix: kube-probe/}]
        query: [{name: probe}, {name: kind, exact: liveness}]
      respond:
        headers: {Cache-Control: no-store}
        body: ok
    - name: monitors
      match:
        path: {prefix: /status/}
        headers: [{name: User-Agent, contains: UptimeRobot}]
      respond: {status: 204}
      when: Always
    - name: bare
      match: {methods: [OPTIONS]}
`

// TestStaticResponsesAcceptedAndDefaulted: a full rule set is stored, with
// respond.status defaulted to 200 (also for a rule without respond) and
// when to AtZero.
func TestStaticResponsesAcceptedAndDefaulted(t *testing.T) {
	ctx := context.Background()
	if !strings.Contains(staticManifest, "staticResponses") {
		t.Fatal("validManifest changed: staticManifest no longer adds its rules")
	}
	obj := decode(t, staticManifest)
	obj.SetName("static-defaults")
	if err := k8s.Create(ctx, obj); err != nil {
		t.Fatalf("create: %v", err)
	}
	t.Cleanup(func() { _ = k8s.Delete(ctx, obj) })
	got := &elastiv1alpha1.ElastiService{}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(obj), got); err != nil {
		t.Fatalf("get: %v", err)
	}
	rules := got.Spec.Proxy.StaticResponses
	if len(rules) != 3 {
		t.Fatalf("stored %d rules, want 3: %+v", len(rules), got.Spec.Proxy)
	}
	type summary struct {
		Name   string
		Status int32
		When   elastiv1alpha1.StaticResponseWhen
	}
	want := []summary{
		{"kubelet", 200, elastiv1alpha1.StaticResponseAtZero},
		{"monitors", 204, elastiv1alpha1.StaticResponseAlways},
		{"bare", 200, elastiv1alpha1.StaticResponseAtZero},
	}
	var gotSummary []summary
	for _, r := range rules {
		gotSummary = append(gotSummary, summary{r.Name, r.Respond.Status, r.When})
	}
	if diff := cmp.Diff(want, gotSummary); diff != "" {
		t.Errorf("stored rules (-want +got):\n%s", diff)
	}
}

// TestInvalidStaticResponsesAreRejected: every rule on
// spec.proxy.staticResponses refuses what it must, with a message that
// names the field, the rule and a valid example.
func TestInvalidStaticResponsesAreRejected(t *testing.T) {
	ctx := context.Background()
	first := func(o map[string]any) map[string]any {
		return o["spec"].(map[string]any)["proxy"].(map[string]any)["staticResponses"].([]any)[0].(map[string]any)
	}
	match := func(o map[string]any) map[string]any { return first(o)["match"].(map[string]any) }
	respond := func(o map[string]any) map[string]any { return first(o)["respond"].(map[string]any) }
	header := func(o map[string]any) map[string]any { return match(o)["headers"].([]any)[0].(map[string]any) }
	cases := []struct {
		name                string
		edit                func(o map[string]any)
		wantField, wantText string
	}{
		{
			name:      "duplicate names",
			edit:      func(o map[string]any) { first(o)["name"] = "monitors" },
			wantField: "spec.proxy.staticResponses",
			wantText:  "spec.proxy.staticResponses[].name must be unique in the list, and two rules share a name; give each rule its own name, such as healthz and readyz",
		},
		{
			name:      "name not a DNS label",
			edit:      func(o map[string]any) { first(o)["name"] = "Kube_Probe" },
			wantField: "spec.proxy.staticResponses[0].name",
			wantText:  `spec.proxy.staticResponses[].name must be a DNS label: lower-case letters, digits and -, starting and ending with a letter or digit, such as healthz; got "Kube_Probe"`,
		},
		{
			name:      "empty match",
			edit:      func(o map[string]any) { first(o)["match"] = map[string]any{} },
			wantField: "spec.proxy.staticResponses[0].match",
			wantText:  "spec.proxy.staticResponses[].match must set at least one of methods, path, headers or query, such as path: {exact: /healthz}",
		},
		{
			name: "match of empty lists only",
			edit: func(o map[string]any) {
				first(o)["match"] = map[string]any{"methods": []any{}, "headers": []any{}, "query": []any{}}
			},
			wantField: "spec.proxy.staticResponses[0].match",
			wantText:  "must set at least one of methods, path, headers or query",
		},
		{
			name:      "method in lower case",
			edit:      func(o map[string]any) { match(o)["methods"] = []any{"get"} },
			wantField: "spec.proxy.staticResponses[0].match.methods[0]",
			wantText:  `spec.proxy.staticResponses[].match.methods must list HTTP methods in capitals, such as GET or HEAD; got "get"`,
		},
		{
			name:      "path with exact and prefix",
			edit:      func(o map[string]any) { match(o)["path"] = map[string]any{"exact": "/healthz", "prefix": "/health"} },
			wantField: "spec.proxy.staticResponses[0].match.path",
			wantText:  "spec.proxy.staticResponses[].match.path must set exactly one of exact or prefix, such as exact: /healthz or prefix: /health/",
		},
		{
			name:      "path with neither",
			edit:      func(o map[string]any) { match(o)["path"] = map[string]any{} },
			wantField: "spec.proxy.staticResponses[0].match.path",
			wantText:  "must set exactly one of exact or prefix",
		},
		{
			name:      "exact path without a slash",
			edit:      func(o map[string]any) { match(o)["path"] = map[string]any{"exact": "healthz"} },
			wantField: "spec.proxy.staticResponses[0].match.path.exact",
			wantText:  `spec.proxy.staticResponses[].match.path.exact must start with /, such as /healthz; got "healthz"`,
		},
		{
			name:      "path prefix without a slash",
			edit:      func(o map[string]any) { match(o)["path"] = map[string]any{"prefix": "health"} },
			wantField: "spec.proxy.staticResponses[0].match.path.prefix",
			wantText:  `spec.proxy.staticResponses[].match.path.prefix must start with /, such as /health/; got "health"`,
		},
		{
			name:      "header with prefix and contains",
			edit:      func(o map[string]any) { header(o)["contains"] = "probe" },
			wantField: "spec.proxy.staticResponses[0].match.headers[0]",
			wantText:  "spec.proxy.staticResponses[].match.headers[] must set exactly one of exact, prefix or contains, such as {name: User-Agent, prefix: kube-probe/}",
		},
		{
			name:      "header with no value condition",
			edit:      func(o map[string]any) { delete(header(o), "prefix") },
			wantField: "spec.proxy.staticResponses[0].match.headers[0]",
			wantText:  "must set exactly one of exact, prefix or contains",
		},
		{
			name:      "header name with a space",
			edit:      func(o map[string]any) { header(o)["name"] = "User Agent" },
			wantField: "spec.proxy.staticResponses[0].match.headers[0].name",
			wantText:  `spec.proxy.staticResponses[].match.headers[].name must be an HTTP header name: letters, digits and !#$%&*+.^_|~-, such as User-Agent; got "User Agent"`,
		},
		{
			name:      "status below 200",
			edit:      func(o map[string]any) { respond(o)["status"] = int64(100) },
			wantField: "spec.proxy.staticResponses[0].respond.status",
			wantText:  "greater than or equal to 200",
		},
		{
			name:      "status above 599",
			edit:      func(o map[string]any) { respond(o)["status"] = int64(600) },
			wantField: "spec.proxy.staticResponses[0].respond.status",
			wantText:  "less than or equal to 599",
		},
		{
			name:      "body with 204",
			edit:      func(o map[string]any) { respond(o)["status"] = int64(204) },
			wantField: "spec.proxy.staticResponses[0].respond",
			wantText:  "spec.proxy.staticResponses[].respond.body must be empty with status 204 or 304, which carry no body; use status 200 with a body such as ok",
		},
		{
			name:      "body too long",
			edit:      func(o map[string]any) { respond(o)["body"] = strings.Repeat("x", 4097) },
			wantField: "spec.proxy.staticResponses[0].respond.body",
			wantText:  "may not be more than 4096",
		},
		{
			name:      "response header name with a colon",
			edit:      func(o map[string]any) { respond(o)["headers"] = map[string]any{"X-Bad:": "1"} },
			wantField: "spec.proxy.staticResponses[0].respond.headers",
			wantText:  "spec.proxy.staticResponses[].respond.headers must have HTTP header names of at most 256 characters: letters, digits and !#$%&*+.^_|~-, such as Cache-Control",
		},
		{
			name:      "response header that frames the body",
			edit:      func(o map[string]any) { respond(o)["headers"] = map[string]any{"content-length": "2"} },
			wantField: "spec.proxy.staticResponses[0].respond.headers",
			wantText:  "spec.proxy.staticResponses[].respond.headers must not set Connection, Content-Length, Keep-Alive, Proxy-Connection, TE, Trailer, Transfer-Encoding or Upgrade, which the resolver sets itself; set others, such as Cache-Control: no-store",
		},
		{
			name:      "response header value with a line break",
			edit:      func(o map[string]any) { respond(o)["headers"] = map[string]any{"X-Note": "a\r\nSet-Cookie: b"} },
			wantField: "spec.proxy.staticResponses[0].respond.headers[X-Note]",
			wantText:  "spec.proxy.staticResponses[].respond.headers values must not contain control characters such as line breaks; write them on one line, such as no-store",
		},
		{
			name:      "unknown when",
			edit:      func(o map[string]any) { first(o)["when"] = "Never" },
			wantField: "spec.proxy.staticResponses[0].when",
			wantText:  `supported values: "AtZero", "Always"`,
		},
		{
			name: "more than 16 rules",
			edit: func(o map[string]any) {
				proxy := o["spec"].(map[string]any)["proxy"].(map[string]any)
				var rules []any
				for i := range 17 {
					rules = append(rules, map[string]any{"name": fmt.Sprintf("r%d", i), "match": map[string]any{"path": map[string]any{"exact": "/healthz"}}})
				}
				proxy["staticResponses"] = rules
			},
			wantField: "spec.proxy.staticResponses",
			wantText:  "must have at most 16 items",
		},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			obj := decode(t, staticManifest)
			obj.SetName(fmt.Sprintf("static-invalid-%d", i))
			tc.edit(obj.Object)
			msg := expectRejected(t, ctx, obj, tc.wantField, tc.wantText)
			t.Logf("rejected: %s", msg)
		})
	}
}
