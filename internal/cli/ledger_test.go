package cli

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
)

// atZero gives the ElastiService a ledger with closed seconds at zero and,
// if since > 0, a period at zero that began since ago.
func atZero(closed int64, since time.Duration) func(*elastiv1alpha1.ElastiService) {
	return func(es *elastiv1alpha1.ElastiService) {
		l := &elastiv1alpha1.Ledger{SecondsAtZero: closed}
		if since > 0 {
			l.AtZeroSince = timeAgo(since)
		}
		es.Status.Ledger = l
	}
}

func TestAtZeroShare(t *testing.T) {
	cases := []struct {
		name string
		es   *elastiv1alpha1.ElastiService
		want string
	}{
		{"never at zero", testES(), "0%"},
		{"closed periods only", testES(atZero(43200, 0)), "50%"},
		{"the current period counts", testES(atZero(0, 6*time.Hour)), "25%"},
		{"a sliver", testES(atZero(60, 0)), "<1%"},
		{"never more than all of it", testES(atZero(200000, 0)), "100%"},
		{"not reconciled", testES(func(es *elastiv1alpha1.ElastiService) { es.Status = elastiv1alpha1.ElastiServiceStatus{} }), "-"},
	}
	for _, tc := range cases {
		if got := atZeroShare(tc.es, testNow); got != tc.want {
			t.Errorf("%s: atZeroShare = %s, want %s", tc.name, got, tc.want)
		}
	}
}

// TestDescribeLedger: a day with two wakes, asleep again for the last
// hour: the totals with the current period added, the savings in
// core-hours and GiB-hours, and the last cold start's phases.
func TestDescribeLedger(t *testing.T) {
	wake := testNow.Add(-3 * time.Hour)
	at := func(d time.Duration) *metav1.Time { return ptr.To(metav1.NewTime(wake.Add(d))) }
	es := testES(asleep(time.Hour), func(es *elastiv1alpha1.ElastiService) {
		es.Status.Ledger = &elastiv1alpha1.Ledger{
			AtZeroSince:   timeAgo(time.Hour),
			SecondsAtZero: 14 * 3600,
			Sleeps:        3,
			Wakes:         2,
			Asleep:        &elastiv1alpha1.LedgerAsleep{Replicas: 2, CPU: ptr.To(resource.MustParse("500m")), Memory: ptr.To(resource.MustParse("512Mi"))},
			Saved: elastiv1alpha1.LedgerSavings{
				CPUCoreSeconds:    ptr.To(resource.MustParse("50400")),   // 500m x 2 x 14 h
				MemoryByteSeconds: ptr.To(resource.MustParse("50400Gi")), // 512Mi x 2 x 14 h
			},
			LastColdStart: &elastiv1alpha1.ColdStart{
				ScaleWriteTime: metav1.NewTime(wake), Pod: "httpbin-7d9f8-abcde",
				ScheduledTime: at(2 * time.Second), StartedTime: at(9 * time.Second), ReadyTime: at(14 * time.Second),
			},
		}
	})
	var b bytes.Buffer
	if err := describe(&b, es, scaleReading{}, testNow); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	want := `Ledger:
  Time at zero:     15h in total, 62% of this ElastiService's life; at zero now, since 60m ago (2026-03-02T11:00:00Z)
  Sleeps, wakes:    3, 2
  Saved:            15.00 core-hours of CPU, 15.00 GiB-hours of memory (requests x replicas x time at zero)
  Last cold start:  14s to Ready, woken 3h ago (2026-03-02T09:00:00Z); scale write->scheduled 2s, scheduled->started 7s, started->ready 5s; pod httpbin-7d9f8-abcde
  Held, shed:       in the resolvers' metrics: elasti_resolver_hold_duration_seconds_count, elasti_resolver_rejected_total{reason="queue_full"} (503), elasti_resolver_timed_out_total (504)
`
	if !strings.Contains(out, want) {
		t.Errorf("output lacks\n%s\ngot:\n%s", want, out)
	}
}

func TestDescribeLedgerUnknownRequestsAndPendingColdStart(t *testing.T) {
	es := testES(func(es *elastiv1alpha1.ElastiService) {
		es.Status.Ledger = &elastiv1alpha1.Ledger{
			SecondsAtZero: 7200, Sleeps: 1, Wakes: 1,
			Saved:         elastiv1alpha1.LedgerSavings{UncountedSeconds: 7200},
			LastColdStart: &elastiv1alpha1.ColdStart{ScaleWriteTime: *timeAgo(30 * time.Second)},
		}
	})
	var b bytes.Buffer
	if err := describe(&b, es, scaleReading{current: 1, desired: 1}, testNow); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"Saved:            0.00 core-hours of CPU, 0.00 GiB-hours of memory (requests x replicas x time at zero); 120m at zero not counted: the requests were not known",
		"Last cold start:  woken 30s ago (2026-03-02T11:59:30Z); in progress, no pod Ready yet",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, b.String())
		}
	}
}
