//go:build integration

package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
)

// fallbackManifest is validManifest with a 20m holdTimeout and a fallback.
var fallbackManifest = strings.Replace(validManifest, "  proxy: {holdTimeout: 5m, maxHeldRequests: 1000}\n",
	"  proxy:\n    holdTimeout: 20m\n    maxHeldRequests: 1000\n    fallback: {service: httpbin-static, after: 30s}\n", 1)

// TestLongHoldAndFallbackAccepted: a holdTimeout of tens of minutes, up to
// 1h, and a fallback are stored as written.
func TestLongHoldAndFallbackAccepted(t *testing.T) {
	ctx := context.Background()
	if !strings.Contains(fallbackManifest, "fallback") {
		t.Fatal("validManifest changed: fallbackManifest no longer adds its fallback")
	}
	for i, hold := range []string{"20m", "1h", "59m59s", "3600s"} {
		obj := decode(t, fallbackManifest)
		obj.SetName(fmt.Sprintf("fallback-ok-%d", i))
		obj.Object["spec"].(map[string]any)["proxy"].(map[string]any)["holdTimeout"] = hold
		if err := k8s.Create(ctx, obj); err != nil {
			t.Fatalf("holdTimeout %s: create: %v", hold, err)
		}
		t.Cleanup(func() { _ = k8s.Delete(ctx, obj) })
		got := &elastiv1alpha1.ElastiService{}
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(obj), got); err != nil {
			t.Fatalf("get: %v", err)
		}
		if p := got.Spec.Proxy; p.HoldTimeout != hold || p.Fallback == nil || p.Fallback.Service != "httpbin-static" || p.Fallback.After != "30s" {
			t.Fatalf("stored proxy %+v, fallback %+v", p, p.Fallback)
		}
	}
}

// TestInvalidFallbackAndHoldRejected: each CEL rule on holdTimeout and
// spec.proxy.fallback refuses what it must, with a message naming the
// field, the rule and an example.
func TestInvalidFallbackAndHoldRejected(t *testing.T) {
	ctx := context.Background()
	proxy := func(o map[string]any) map[string]any { return o["spec"].(map[string]any)["proxy"].(map[string]any) }
	fallback := func(o map[string]any) map[string]any { return proxy(o)["fallback"].(map[string]any) }
	cases := []struct {
		name                string
		edit                func(o map[string]any)
		wantField, wantText string
	}{
		{
			name:      "holdTimeout over 1h",
			edit:      func(o map[string]any) { proxy(o)["holdTimeout"] = "61m" },
			wantField: "spec.proxy.holdTimeout",
			wantText:  `spec.proxy.holdTimeout must be at most 1h, the longest a resolver holds a request or connection, such as 20m for a model that takes minutes to load; got "61m"`,
		},
		{
			name:      "after not shorter than holdTimeout",
			edit:      func(o map[string]any) { fallback(o)["after"] = "20m" },
			wantField: "spec.proxy.fallback.after",
			wantText:  "spec.proxy.fallback.after must be shorter than spec.proxy.holdTimeout, or held requests time out before they could go to the fallback; got after 20m with holdTimeout 20m, such as after: 30s with holdTimeout: 10m",
		},
		{
			name:      "after not a duration",
			edit:      func(o map[string]any) { fallback(o)["after"] = "30" },
			wantField: "spec.proxy.fallback.after",
			wantText:  `spec.proxy.fallback.after must be a Go duration, numbers each followed by a unit (ns, us, ms, s, m, h), such as 30s or 2m; got "30"`,
		},
		{
			name:      "after zero",
			edit:      func(o map[string]any) { fallback(o)["after"] = "0s" },
			wantField: "spec.proxy.fallback.after",
			wantText:  `spec.proxy.fallback.after must be positive, such as 30s or 2m; got "0s", which is not above zero`,
		},
		{
			name:      "after missing",
			edit:      func(o map[string]any) { delete(fallback(o), "after") },
			wantField: "spec.proxy.fallback.after",
			wantText:  "Required value",
		},
		{
			name:      "service not a name",
			edit:      func(o map[string]any) { fallback(o)["service"] = "Static_Page" },
			wantField: "spec.proxy.fallback.service",
			wantText:  `spec.proxy.fallback.service must be the name of a Service in the same namespace: lower-case letters, digits and -, starting with a letter and ending with a letter or digit, such as httpbin-static; got "Static_Page"`,
		},
		{
			name:      "service missing",
			edit:      func(o map[string]any) { delete(fallback(o), "service") },
			wantField: "spec.proxy.fallback.service",
			wantText:  "Required value",
		},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			obj := decode(t, fallbackManifest)
			obj.SetName(fmt.Sprintf("fallback-invalid-%d", i))
			tc.edit(obj.Object)
			msg := expectRejected(t, ctx, obj, tc.wantField, tc.wantText)
			t.Logf("rejected: %s", msg)
		})
	}
}
