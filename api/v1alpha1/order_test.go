package v1alpha1

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestPrecedes(t *testing.T) {
	at := func(ns, name string, sec int) *ElastiService {
		return &ElastiService{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
			CreationTimestamp: metav1.NewTime(time.Unix(int64(sec), 0))}}
	}
	cases := []struct {
		name string
		a, b *ElastiService
		want bool
	}{
		{"older first", at("z", "z", 1), at("a", "a", 2), true},
		{"newer second", at("a", "a", 2), at("z", "z", 1), false},
		{"same time: namespace", at("a", "z", 1), at("b", "a", 1), true},
		{"same time and namespace: name", at("a", "a", 1), at("a", "b", 1), true},
		{"itself", at("a", "a", 1), at("a", "a", 1), false},
	}
	for _, tc := range cases {
		if got := tc.a.Precedes(tc.b); got != tc.want {
			t.Errorf("%s: Precedes = %v, want %v", tc.name, got, tc.want)
		}
	}
}
