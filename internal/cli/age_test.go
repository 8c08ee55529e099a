package cli

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The ages must read exactly like kubectl's AGE column, so that the plugin's
// output lines up with `kubectl get`.
func TestAge(t *testing.T) {
	cases := []struct {
		name string
		t    *metav1.Time
		want string
	}{
		{name: "unset", t: nil, want: "-"},
		{name: "zero", t: &metav1.Time{}, want: "-"},
		{name: "seconds", t: timeAgo(45 * time.Second), want: "45s"},
		{name: "minutes and seconds under ten minutes", t: timeAgo(5*time.Minute + 30*time.Second), want: "5m30s"},
		{name: "whole minutes", t: timeAgo(5 * time.Minute), want: "5m"},
		{name: "minutes up to three hours", t: timeAgo(2 * time.Hour), want: "120m"},
		{name: "hours", t: timeAgo(3 * time.Hour), want: "3h"},
		{name: "hours and minutes", t: timeAgo(3*time.Hour + 20*time.Minute), want: "3h20m"},
		{name: "days", t: timeAgo(48 * time.Hour), want: "2d"},
		{name: "days and hours", t: timeAgo(50 * time.Hour), want: "2d2h"},
		{name: "slightly in the future (clock skew)", t: timeAgo(-500 * time.Millisecond), want: "0s"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := age(testNow, tc.t); got != tc.want {
				t.Errorf("age = %q, want %q", got, tc.want)
			}
		})
	}
}
