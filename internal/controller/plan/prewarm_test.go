package plan

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
)

// TestPreWarmFiring: which firing a reconcile acts on, given the object's
// creation, its status and what this process recorded.
func TestPreWarmFiring(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	firing := time.Date(2026, 3, 30, 8, 55, 0, 0, berlin) // a Monday, CEST
	tomorrow := firing.AddDate(0, 0, 1)
	es := func(created time.Time, last *time.Time) *elastiv1alpha1.ElastiService {
		e := &elastiv1alpha1.ElastiService{
			ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(created)},
			Spec:       elastiv1alpha1.ElastiServiceSpec{PreWarm: &elastiv1alpha1.PreWarm{Schedule: "55 8 * * 1-5", TimeZone: "Europe/Berlin"}},
		}
		if last != nil {
			e.Status.LastPreWarmTime = &metav1.Time{Time: *last}
		}
		return e
	}
	longAgo := firing.AddDate(0, -1, 0)
	for _, tc := range []struct {
		name              string
		es                *elastiv1alpha1.ElastiService
		now, recorded     time.Time
		wantDue, wantNext time.Time
	}{
		{"due", es(longAgo, nil), firing.Add(time.Minute), time.Time{}, firing, tomorrow},
		{"recorded in the status", es(longAgo, &firing), firing.Add(time.Minute), time.Time{}, time.Time{}, tomorrow},
		{"recorded by this process, the cache not yet", es(longAgo, nil), firing.Add(time.Minute), firing, time.Time{}, tomorrow},
		{"a firing before creation is not the object's", es(firing.Add(30*time.Second), nil), firing.Add(time.Minute), time.Time{}, time.Time{}, tomorrow},
		{"too late", es(longAgo, nil), firing.Add(5 * time.Minute), time.Time{}, time.Time{}, tomorrow},
		{"no pre-warm", &elastiv1alpha1.ElastiService{}, firing, time.Time{}, time.Time{}, time.Time{}},
		{"unreadable pre-warm never fires", &elastiv1alpha1.ElastiService{Spec: elastiv1alpha1.ElastiServiceSpec{
			PreWarm: &elastiv1alpha1.PreWarm{Schedule: "55 8 * * 1-5", TimeZone: "Nowhere/Town"}}}, firing, time.Time{}, time.Time{}, time.Time{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			due, next := PreWarmFiring(context.Background(), tc.es, tc.now, tc.recorded)
			if !due.Equal(tc.wantDue) || !next.Equal(tc.wantNext) {
				t.Errorf("got (%s, %s), want (%s, %s)", due, next, tc.wantDue, tc.wantNext)
			}
		})
	}
}

// TestPreWarmStatus: a wake that acted on a firing records the firing, not
// the wake's time; a wake without a firing leaves the record alone.
func TestPreWarmStatus(t *testing.T) {
	firing := time.Date(2026, 3, 30, 6, 55, 0, 0, time.UTC)
	now := firing.Add(40 * time.Second)
	es := &elastiv1alpha1.ElastiService{}
	st := DesiredStatus(es, Observed{Now: now, Demand: Demand{PreWarm: firing}, Service: ServiceObserved{Found: true}, Target: TargetObserved{Found: true}}, Plan{Mode: elastiv1alpha1.ModeServe}, Effects{Woke: true, Replicas: 1}, "ns")
	if st.LastPreWarmTime == nil || !st.LastPreWarmTime.Time.Equal(firing) || !st.LastScaledUpTime.Time.Equal(now) {
		t.Errorf("lastPreWarmTime %v, lastScaledUpTime %v; want the firing %s and the wake %s", st.LastPreWarmTime, st.LastScaledUpTime, firing, now)
	}
	st = DesiredStatus(es, Observed{Now: now, Service: ServiceObserved{Found: true}, Target: TargetObserved{Found: true}}, Plan{Mode: elastiv1alpha1.ModeServe}, Effects{Woke: true, Replicas: 1}, "ns")
	if st.LastPreWarmTime != nil {
		t.Errorf("a wake without a firing recorded lastPreWarmTime %v", st.LastPreWarmTime)
	}
}
