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

// spec.scaleDownGracePeriod takes Go durations from 0s to 10m, and the
// CRD's rules alone decide it: no spelling reaches the webhook.
func TestScaleDownGracePeriodIsAccepted(t *testing.T) {
	ctx := context.Background()
	for i, value := range []string{"0s", "0", "2s", "30s", "1m30s", "10m", "+5m", ".5m", "500ms", "99999ms", "0.1666h", "1.5s"} {
		obj := decode(t, validManifest)
		obj.SetName(fmt.Sprintf("grace-ok-%d", i))
		set(obj.Object, value, "spec", "scaleDownGracePeriod")
		if err := k8s.Create(ctx, obj); err != nil {
			t.Errorf("scaleDownGracePeriod %q refused: %v", value, err)
			continue
		}
		got := &elastiv1alpha1.ElastiService{}
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(obj), got); err != nil {
			t.Fatal(err)
		}
		if got.Spec.ScaleDownGracePeriod != value {
			t.Errorf("scaleDownGracePeriod %q stored as %q", value, got.Spec.ScaleDownGracePeriod)
		}
		_ = k8s.Delete(ctx, obj)
	}
}

func TestScaleDownGracePeriodIsRefused(t *testing.T) {
	ctx := context.Background()
	const field = "spec.scaleDownGracePeriod"
	for i, tc := range []struct{ value, want string }{
		{"30", `spec.scaleDownGracePeriod must be a Go duration, numbers each followed by a unit (ns, us, ms, s, m, h), such as 30s, 2m or 1m30s; got "30"`},
		{"forever", `spec.scaleDownGracePeriod must be a Go duration`},
		{"30 s", `spec.scaleDownGracePeriod must be a Go duration`},
		{"-5s", `spec.scaleDownGracePeriod must not be negative, such as 0s, 30s or 2m; got "-5s". Leave scaleDownGracePeriod out to use the operator default (--grace-period)`},
		{"10m1s", `spec.scaleDownGracePeriod must be at most 10m, the longest a scale-down waits with the resolvers in the data path, such as 30s or 2m; got "10m1s"`},
		{"1h", `spec.scaleDownGracePeriod must be at most 10m`},
		// Spellings CEL's duration() might not read are refused by shape,
		// and never reach a bound the webhook would have to check.
		{"100000ms", `spec.scaleDownGracePeriod must write each number with at most five digits before its decimal point, in a larger unit if need be, such as 100s rather than 100000ms; got "100000ms"`},
		{"99999999999h", `spec.scaleDownGracePeriod must write each number with at most five digits`},
		{"-99999999999h", `spec.scaleDownGracePeriod must write each number with at most five digits`},
	} {
		t.Run(tc.value, func(t *testing.T) {
			obj := decode(t, validManifest)
			obj.SetName(fmt.Sprintf("grace-bad-%d", i))
			set(obj.Object, tc.value, "spec", "scaleDownGracePeriod")
			msg := expectRejected(t, ctx, obj, field, tc.want)
			// One message per value: the rules that read a duration stand
			// aside for a value that is not one.
			if n := strings.Count(msg, field+" must"); n != 1 {
				t.Errorf("%d messages, want 1:\n%s", n, msg)
			}
		})
	}
}
