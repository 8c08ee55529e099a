package refusals

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
)

func es(name string, created int64, service, target string) elastiv1alpha1.ElastiService {
	return elastiv1alpha1.ElastiService{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name), CreationTimestamp: metav1.Unix(created, 0), Generation: 3},
		Spec: elastiv1alpha1.ElastiServiceSpec{Service: service, ScaleTargetRef: elastiv1alpha1.ScaleTargetRef{
			APIVersion: "apps/v1", Kind: "Deployment", Name: target,
		}},
	}
}

// TestRival: the oldest other claimant wins (creation time, then name),
// the ElastiService itself and younger ones never do, and the reason says
// whether the winner holds the Service or only the target.
func TestRival(t *testing.T) {
	self := es("self", 100, "web", "web")
	for _, tc := range []struct {
		name      string
		claimants []elastiv1alpha1.ElastiService
		want, why string
	}{
		{"alone", []elastiv1alpha1.ElastiService{self}, "", ""},
		{"only younger ones", []elastiv1alpha1.ElastiService{self, es("young", 200, "web", "web")}, "", ""},
		{"an older one on the Service", []elastiv1alpha1.ElastiService{es("old", 50, "web", "other"), self}, "old", ReasonServiceClaimed},
		{"an older one on the target", []elastiv1alpha1.ElastiService{es("old", 50, "api", "web")}, "old", ReasonTargetClaimed},
		{"the oldest of two", []elastiv1alpha1.ElastiService{es("older", 50, "api", "web"), es("oldest", 10, "web", "web")}, "oldest", ReasonServiceClaimed},
		{"same age: the name decides", []elastiv1alpha1.ElastiService{es("b", 100, "web", "web"), es("a", 100, "web", "web")}, "a", ReasonServiceClaimed},
		{"same age, later name: no rival", []elastiv1alpha1.ElastiService{es("z", 100, "web", "web")}, "", ""},
	} {
		got, why := Rival(&self, tc.claimants)
		name := ""
		if got != nil {
			name = got.Name
		}
		if name != tc.want || why != tc.why {
			t.Errorf("%s: got %q %q, want %q %q", tc.name, name, why, tc.want, tc.why)
		}
	}
}

// TestStandDownStatus: the ElastiService that stands down reads as serve,
// with no ports and no wake, and Ready=False names the rival and what it
// claims; the rest of the status is kept.
func TestStandDownStatus(t *testing.T) {
	self, rival := es("self", 100, "web", "web"), es("old", 50, "web", "web")
	self.Status = elastiv1alpha1.ElastiServiceStatus{
		Mode:         elastiv1alpha1.ModeProxy,
		ProxyPorts:   []elastiv1alpha1.ProxyPort{{Name: "http", Port: 80, ResolverPort: 20001}},
		WakeProgress: &elastiv1alpha1.WakeProgress{Phase: elastiv1alpha1.WakePhaseScaling},
		Conditions:   []metav1.Condition{{Type: elastiv1alpha1.ConditionActive, Status: metav1.ConditionTrue, Reason: "Serving"}},
	}
	now := time.Unix(1000, 0)
	st, f := StandDownStatus(&self, &rival, ReasonServiceClaimed, now)
	if st.Mode != elastiv1alpha1.ModeServe || st.ProxyPorts != nil || st.WakeProgress != nil || st.ObservedGeneration != 3 {
		t.Errorf("status %+v", st)
	}
	c := meta.FindStatusCondition(st.Conditions, elastiv1alpha1.ConditionReady)
	if c == nil || c.Status != metav1.ConditionFalse || c.Reason != ReasonServiceClaimed || c.Message != f.Message || !c.LastTransitionTime.Time.Equal(now) {
		t.Fatalf("Ready %+v", c)
	}
	if f.Reason != ReasonServiceClaimed || !strings.Contains(f.Message, "ElastiService old") || !strings.Contains(f.Message, "Service web") {
		t.Errorf("refusal %+v", f)
	}
	if meta.FindStatusCondition(st.Conditions, elastiv1alpha1.ConditionActive) == nil {
		t.Error("the Active condition was dropped")
	}
	if self.Status.Mode != elastiv1alpha1.ModeProxy || len(self.Status.ProxyPorts) != 1 {
		t.Error("the ElastiService's own status was changed")
	}
	if _, f := StandDownStatus(&self, &rival, ReasonTargetClaimed, now); !strings.Contains(f.Message, "Deployment web") || Claimed(ReasonTargetClaimed) != "scale target" {
		t.Errorf("target claim: %+v", f)
	}
}
