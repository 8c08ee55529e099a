package proxyslices

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func pod(name string, ready bool, ips ...string) corev1.Pod {
	p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name)}, Spec: corev1.PodSpec{NodeName: "node-1"}}
	st := corev1.ConditionFalse
	if ready {
		st = corev1.ConditionTrue
	}
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: st}}
	for _, ip := range ips {
		p.Status.PodIPs = append(p.Status.PodIPs, corev1.PodIP{IP: ip})
	}
	return p
}

func TestReadyResolvers(t *testing.T) {
	deleting := pod("d", true, "10.0.0.9")
	deleting.DeletionTimestamp = &metav1.Time{Time: time.Unix(1, 0)}
	got := ReadyResolvers([]corev1.Pod{
		pod("b", true, "10.0.0.2", "fd00::2"),
		pod("a", true, "10.0.0.1"),
		pod("not-ready", false, "10.0.0.3"),
		pod("no-ip", true),
		pod("v6", true, "fd00::6"),
		deleting,
	})
	want := []Resolver{
		{Name: "a", UID: "uid-a", NodeName: "node-1", IPv4: "10.0.0.1"},
		{Name: "b", UID: "uid-b", NodeName: "node-1", IPv4: "10.0.0.2", IPv6: "fd00::2"},
		{Name: "v6", UID: "uid-v6", NodeName: "node-1", IPv6: "fd00::6"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got)\n%s", diff)
	}
}
