package cli

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
)

// The status.ledger figures as `status` and `list` word them. The status
// totals cover the periods at zero that have ended; the figures here add
// the period still running, up to now.

// secondsAtZero is the time at zero up to now, the current period included.
func secondsAtZero(l *elastiv1alpha1.Ledger, now time.Time) int64 {
	if l == nil {
		return 0
	}
	s := l.SecondsAtZero
	if l.AtZeroSince != nil {
		s += max(int64(now.Sub(l.AtZeroSince.Time)/time.Second), 0)
	}
	return s
}

// atZeroShare is the AT-ZERO column of `list`: the share of the
// ElastiService's life its target spent at zero, in whole percent (floor);
// "<1%" for a share above zero that rounds to it; "-" before the first
// reconcile.
func atZeroShare(es *elastiv1alpha1.ElastiService, now time.Time) string {
	if es.Status.Mode == "" {
		return none
	}
	life := int64(now.Sub(es.CreationTimestamp.Time) / time.Second)
	zero := secondsAtZero(es.Status.Ledger, now)
	if life <= 0 || zero <= 0 {
		return "0%"
	}
	pct := min(zero*100/life, 100)
	if pct == 0 {
		return "<1%"
	}
	return fmt.Sprintf("%d%%", pct)
}

// savedUpTo is what the ledger saved up to now, the current period
// included, in core-seconds and byte-seconds.
func savedUpTo(l *elastiv1alpha1.Ledger, now time.Time) (cpu, mem float64) {
	f := func(q *resource.Quantity) float64 {
		if q == nil {
			return 0
		}
		return q.AsApproximateFloat64()
	}
	cpu, mem = f(l.Saved.CPUCoreSeconds), f(l.Saved.MemoryByteSeconds)
	if a := l.Asleep; l.AtZeroSince != nil && a != nil && a.Unknown == "" {
		n := float64(a.Replicas) * float64(max(int64(now.Sub(l.AtZeroSince.Time)/time.Second), 0))
		cpu += f(a.CPU) * n
		mem += f(a.Memory) * n
	}
	return cpu, mem
}

// savedLine words the savings in core-hours and GiB-hours.
func savedLine(l *elastiv1alpha1.Ledger, now time.Time) string {
	cpu, mem := savedUpTo(l, now)
	line := fmt.Sprintf("%s core-hours of CPU, %s GiB-hours of memory (requests x replicas x time at zero)",
		hours(cpu), hours(mem/(1<<30)))
	switch {
	case l.Asleep != nil && l.Asleep.Unknown != "":
		line += "; not counted now: " + l.Asleep.Unknown
	case l.Saved.UncountedSeconds > 0:
		line += fmt.Sprintf("; %s at zero not counted: the requests were not known", duration.HumanDuration(time.Duration(l.Saved.UncountedSeconds)*time.Second))
	}
	return line
}

func hours(unitSeconds float64) string {
	return fmt.Sprintf("%.2f", unitSeconds/3600)
}

// coldStartLine words the last cold start and its phases.
func coldStartLine(cs *elastiv1alpha1.ColdStart, now time.Time) string {
	if cs == nil {
		return "none yet"
	}
	since := func(from, to time.Time) string { return fmt.Sprintf("%ds", max(int64(to.Sub(from)/time.Second), 0)) }
	woke := fmt.Sprintf("woken %s ago (%s)", duration.HumanDuration(now.Sub(cs.ScaleWriteTime.Time)), cs.ScaleWriteTime.UTC().Format(time.RFC3339))
	if cs.ReadyTime == nil {
		if cs.Message != "" {
			return woke + "; phases unknown: " + cs.Message
		}
		return woke + "; in progress, no pod Ready yet"
	}
	var phases []string
	prev, prevName := cs.ScaleWriteTime.Time, "scale write"
	for _, p := range []struct {
		name string
		at   *time.Time
	}{
		{"scheduled", timeOf(cs.ScheduledTime)}, {"started", timeOf(cs.StartedTime)}, {"ready", timeOf(cs.ReadyTime)},
	} {
		if p.at == nil {
			continue
		}
		phases = append(phases, fmt.Sprintf("%s->%s %s", prevName, p.name, since(prev, *p.at)))
		prev, prevName = *p.at, p.name
	}
	return fmt.Sprintf("%s to Ready, %s; %s; pod %s", since(cs.ScaleWriteTime.Time, cs.ReadyTime.Time), woke, strings.Join(phases, ", "), cs.Pod)
}

func timeOf(t *metav1.Time) *time.Time {
	if t == nil {
		return nil
	}
	return &t.Time
}

// describeLedger writes the Ledger section of `status`.
func describeLedger(w io.Writer, es *elastiv1alpha1.ElastiService, now time.Time) error {
	fmt.Fprintln(w, "\nLedger:")
	l := es.Status.Ledger
	if l == nil {
		fmt.Fprintln(w, "  none yet: the target has not been at zero")
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	field := func(name, value string) { fmt.Fprintf(tw, "  %s:\t%s\n", name, value) }
	zero := fmt.Sprintf("%s in total, %s of this ElastiService's life", duration.HumanDuration(time.Duration(secondsAtZero(l, now))*time.Second), atZeroShare(es, now))
	if l.AtZeroSince != nil {
		zero += fmt.Sprintf("; at zero now, since %s ago (%s)", duration.HumanDuration(now.Sub(l.AtZeroSince.Time)), l.AtZeroSince.UTC().Format(time.RFC3339))
	}
	field("Time at zero", zero)
	field("Sleeps, wakes", fmt.Sprintf("%d, %d", l.Sleeps, l.Wakes))
	field("Saved", savedLine(l, now))
	field("Last cold start", coldStartLine(l.LastColdStart, now))
	field("Held, shed", "in the resolvers' metrics: elasti_resolver_hold_duration_seconds_count, elasti_resolver_rejected_total{reason=\"queue_full\"} (503), elasti_resolver_timed_out_total (504)")
	return tw.Flush()
}
