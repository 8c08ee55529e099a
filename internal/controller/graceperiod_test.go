package controller

import (
	"testing"
	"time"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
)

func TestGracePeriodOf(t *testing.T) {
	def := 2 * time.Second
	for _, tc := range []struct {
		value string
		want  time.Duration
	}{
		{"", def},
		{"30s", 30 * time.Second},
		{"1m30s", 90 * time.Second},
		{"0s", 0},
		{"0", 0},
		{"10m", 10 * time.Minute},
		// What the CRD's rules refuse, should it be stored anyway.
		{"forever", def},
		{"99999999999h", def},
		{"-5s", 0},
		{"1h", 10 * time.Minute},
	} {
		spec := elastiv1alpha1.ElastiServiceSpec{ScaleDownGracePeriod: tc.value}
		if got := gracePeriodOf(spec, def); got != tc.want {
			t.Errorf("scaleDownGracePeriod %q: got %s, want %s", tc.value, got, tc.want)
		}
	}
}
