package ledger

import (
	"fmt"
	"sort"
	"time"

	"gopkg.in/inf.v0"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/contract"
	"elasti.dev/elasti/internal/doze"
)

// The ledger (status.ledger, docs/ledger.md) is kept by the status writes
// that record a sleep or a wake: a period at zero is opened when the
// Active condition turns ScaledToZero and closed when it leaves it, and
// its time and savings are added then. No write happens only to keep it.

// Requests are the CPU and memory one replica of the target
// requests, read from its pod template.
type Requests struct {
	cpu, memory resource.Quantity
	// unknown says why they are not known; empty when they are.
	unknown string
}

// Observed is what observe read for the ledger (Observe).
type Observed struct {
	requests Requests
	// looked: a cold start is pending and the Service has a ready
	// endpoint, so the woken pods were read. woken is the pod that ended
	// the cold start (nil when none was found), and missing says why.
	looked  bool
	woken   *corev1.Pod
	missing string
}

// unknownTemplate is Requests.unknown for a target whose pod
// template cannot be read.
const unknownTemplate = "the target has no pod template the operator can read (spec.template); time at zero is counted, savings are not"

// NoTemplate is the requests of a target whose pod template was not read.
var NoTemplate = Requests{unknown: unknownTemplate}

// TemplateRequests reads one replica's requests from a target's
// spec.template.
func TemplateRequests(u *unstructured.Unstructured) Requests {
	raw, found, err := unstructured.NestedMap(u.Object, "spec", "template")
	if err != nil || !found {
		return Requests{unknown: unknownTemplate}
	}
	var tpl corev1.PodTemplateSpec
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(raw, &tpl); err != nil {
		return Requests{unknown: fmt.Sprintf("the target's spec.template is not a pod template: %v", err)}
	}
	return Requests{cpu: podRequest(tpl.Spec, corev1.ResourceCPU), memory: podRequest(tpl.Spec, corev1.ResourceMemory)}
}

// podRequest is what the scheduler reserves for a pod of this spec: the
// pod-level request if set; otherwise the larger of the containers plus the
// sidecars (restartable init containers) and of each other init container
// plus the sidecars started before it; plus the overhead. A container with
// a limit and no request requests its limit, as the API server defaults a
// pod's.
func podRequest(spec corev1.PodSpec, name corev1.ResourceName) resource.Quantity {
	sum := resource.Quantity{}
	if spec.Resources != nil {
		if q, ok := spec.Resources.Requests[name]; ok {
			sum = q.DeepCopy()
			addOverhead(&sum, spec, name)
			return sum
		}
	}
	for _, c := range spec.Containers {
		sum.Add(containerRequest(c, name))
	}
	sidecars, peak := resource.Quantity{}, resource.Quantity{}
	for _, c := range spec.InitContainers {
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			sidecars.Add(containerRequest(c, name))
			continue
		}
		q := containerRequest(c, name)
		q.Add(sidecars)
		if q.Cmp(peak) > 0 {
			peak = q
		}
	}
	sum.Add(sidecars)
	if peak.Cmp(sum) > 0 {
		sum = peak
	}
	addOverhead(&sum, spec, name)
	return sum
}

func addOverhead(q *resource.Quantity, spec corev1.PodSpec, name corev1.ResourceName) {
	if o, ok := spec.Overhead[name]; ok {
		q.Add(o)
	}
}

func containerRequest(c corev1.Container, name corev1.ResourceName) resource.Quantity {
	if q, ok := c.Resources.Requests[name]; ok {
		return q.DeepCopy()
	}
	if q, ok := c.Resources.Limits[name]; ok {
		return q.DeepCopy()
	}
	return resource.Quantity{}
}

// times is q x n, exactly.
func times(q resource.Quantity, n int64) resource.Quantity {
	d := new(inf.Dec).Mul(q.AsDec(), inf.NewDec(n, 0))
	return *resource.NewDecimalQuantity(*d, q.Format)
}

// saved is what one period at zero of secs seconds did not reserve: one
// replica's request x replicas x secs.
func saved(perReplica *resource.Quantity, replicas int32, secs int64) resource.Quantity {
	if perReplica == nil {
		return resource.Quantity{}
	}
	return times(*perReplica, int64(replicas)*secs)
}

// addTo adds q to *total, creating it at the first addition.
func addTo(total **resource.Quantity, q resource.Quantity) {
	if *total == nil {
		z := resource.Quantity{Format: q.Format}
		*total = &z
	}
	(*total).Add(q)
}

// ActiveReason is the reason of a status's Active condition.
func ActiveReason(st elastiv1alpha1.ElastiServiceStatus) string {
	if c := meta.FindStatusCondition(st.Conditions, elastiv1alpha1.ConditionActive); c != nil {
		return c.Reason
	}
	return ""
}

// Next is the ledger after a reconcile: prev is the status as it
// was, st the one about to be written (its conditions already set), now
// the reconcile's time and replicas the target's replicas observe read. It
// opens a period at zero when Active turns ScaledToZero and closes it when
// Active leaves it; a wake (Active back to True) starts a cold start,
// which the first woken pod found Ready completes.
func Next(es *elastiv1alpha1.ElastiService, st elastiv1alpha1.ElastiServiceStatus, at time.Time, replicas int32, lo Observed) *elastiv1alpha1.Ledger {
	prev := es.Status
	wasAtZero := ActiveReason(prev) == contract.ReasonScaledToZero || dozing(prev)
	atZero := ActiveReason(st) == contract.ReasonScaledToZero || dozing(st)
	if prev.Ledger == nil && !wasAtZero && !atZero {
		return nil
	}
	l := &elastiv1alpha1.Ledger{}
	if prev.Ledger != nil {
		l = prev.Ledger.DeepCopy()
	}
	now := metav1.NewTime(at.Truncate(time.Second))
	if replicas <= 0 {
		replicas = max(es.Spec.MinTargetReplicas, 1)
	}
	if wasAtZero && l.AtZeroSince == nil {
		// At zero before the ledger existed (an upgrade): the period counts
		// from the scale-down the status recorded.
		since := now
		if prev.LastScaledDownTime != nil {
			since = metav1.NewTime(prev.LastScaledDownTime.Truncate(time.Second))
		}
		l.AtZeroSince, l.Asleep = &since, asleep(replicas, lo.requests)
	}
	switch {
	case atZero && !wasAtZero:
		l.Sleeps++
		l.AtZeroSince, l.Asleep = &now, asleep(replicas, lo.requests)
		if dozing(st) {
			l.Asleep = dozeAsleep(st.Doze)
		}
		if PendingColdStart(l) {
			l.LastColdStart.Message = "the target went back to zero before a woken pod was Ready"
		}
	case wasAtZero && !atZero:
		closePeriod(l, now.Time)
		if c := meta.FindStatusCondition(st.Conditions, elastiv1alpha1.ConditionActive); c != nil && c.Status == metav1.ConditionTrue {
			l.Wakes++
			if dozing(prev) {
				// The pods never stopped: a wake from a doze is no
				// cold start.
				return l
			}
			l.LastColdStart = &elastiv1alpha1.ColdStart{ScaleWriteTime: now}
			return l
		}
	}
	if PendingColdStart(l) && lo.looked {
		*l.LastColdStart = coldStartPhases(*l.LastColdStart, lo.woken, lo.missing)
	}
	return l
}

func asleep(replicas int32, req Requests) *elastiv1alpha1.LedgerAsleep {
	a := &elastiv1alpha1.LedgerAsleep{Replicas: replicas}
	if req.unknown != "" {
		a.Unknown = req.unknown
		return a
	}
	cpu, mem := req.cpu.DeepCopy(), req.memory.DeepCopy()
	a.CPU, a.Memory = &cpu, &mem
	return a
}

// dozing reports whether st records a doze (sleepMode Doze): its pods
// keep running with lowered requests, and the ledger counts the time as
// asleep, with what the doze freed as its savings.
func dozing(st elastiv1alpha1.ElastiServiceStatus) bool {
	return st.Doze != nil && len(st.Doze.Pods) > 0 && ActiveReason(st) == contract.ReasonDozing
}

// dozeAsleep is what a doze freed: its pods, and the requests one of them
// gave back on average (doze.Freed over all of them), so that replicas ×
// requests × seconds is the doze's saving as for a scale to zero.
func dozeAsleep(d *elastiv1alpha1.DozeStatus) *elastiv1alpha1.LedgerAsleep {
	n := int64(len(d.Pods))
	freed := doze.Freed(d.Pods)
	var cpu, mem resource.Quantity
	if freed.CPU != nil {
		cpu = *resource.NewMilliQuantity(freed.CPU.MilliValue()/n, resource.DecimalSI)
	}
	if freed.Memory != nil {
		mem = *resource.NewQuantity(freed.Memory.Value()/n, resource.BinarySI)
	}
	return &elastiv1alpha1.LedgerAsleep{Replicas: int32(n), CPU: &cpu, Memory: &mem}
}

// closePeriod ends the period at zero at now: its whole seconds go to the
// time at zero, and its savings to the totals.
func closePeriod(l *elastiv1alpha1.Ledger, now time.Time) {
	if l.AtZeroSince != nil {
		secs := max(int64(now.Sub(l.AtZeroSince.Time)/time.Second), 0)
		l.SecondsAtZero += secs
		switch a := l.Asleep; {
		case a == nil || a.Unknown != "":
			l.Saved.UncountedSeconds += secs
		default:
			addTo(&l.Saved.CPUCoreSeconds, saved(a.CPU, a.Replicas, secs))
			addTo(&l.Saved.MemoryByteSeconds, saved(a.Memory, a.Replicas, secs))
		}
	}
	l.AtZeroSince, l.Asleep = nil, nil
}

// PendingColdStart reports whether the ledger's last cold start waits for
// a woken pod to turn Ready.
func PendingColdStart(l *elastiv1alpha1.Ledger) bool {
	cs := l.LastColdStart
	return cs != nil && cs.ReadyTime == nil && cs.Message == ""
}

// coldStartPhases fills a cold start's phases from the pod that ended it.
func coldStartPhases(cs elastiv1alpha1.ColdStart, pod *corev1.Pod, missing string) elastiv1alpha1.ColdStart {
	if pod == nil {
		cs.Message = missing
		return cs
	}
	cs.Pod = pod.Name
	cs.ScheduledTime = conditionTime(pod, corev1.PodScheduled)
	cs.ReadyTime = conditionTime(pod, corev1.PodReady)
	cs.StartedTime = containersStarted(pod)
	return cs
}

// conditionTime is when the pod's condition typ turned True; nil when it
// is not True.
func conditionTime(pod *corev1.Pod, typ corev1.PodConditionType) *metav1.Time {
	for _, c := range pod.Status.Conditions {
		if c.Type == typ && c.Status == corev1.ConditionTrue {
			t := c.LastTransitionTime
			return &t
		}
	}
	return nil
}

// containersStarted is when the last of the pod's containers started
// running; nil while one is not running.
func containersStarted(pod *corev1.Pod) *metav1.Time {
	if len(pod.Status.ContainerStatuses) == 0 {
		return nil
	}
	var last *metav1.Time
	for _, s := range pod.Status.ContainerStatuses {
		if s.State.Running == nil {
			return nil
		}
		if t := s.State.Running.StartedAt; last == nil || t.After(last.Time) {
			last = &t
		}
	}
	return last
}

// ClockSkew is how far before the wake a woken pod's Ready time may lie:
// the wake is stamped by the operator's clock, Ready by the node's. The
// operator's other readers of pod and event times allow the same.
const ClockSkew = 5 * time.Second

// wokenPod picks the pod that ended a cold start begun at wake: among the
// pods that are not terminating, the first to turn Ready at or after the
// wake (then the first created, then by name). A pod Ready before the wake
// cannot have ended it. Creation times are not compared with the wake:
// the API server stamps them with its own clock.
func wokenPod(pods []corev1.Pod, wake time.Time) *corev1.Pod {
	var cands []*corev1.Pod
	for i := range pods {
		p := &pods[i]
		ready := conditionTime(p, corev1.PodReady)
		if p.DeletionTimestamp != nil || ready == nil || ready.Time.Before(wake.Add(-ClockSkew)) {
			continue
		}
		cands = append(cands, p)
	}
	if len(cands) == 0 {
		return nil
	}
	sort.Slice(cands, func(i, j int) bool {
		a, b := conditionTime(cands[i], corev1.PodReady).Time, conditionTime(cands[j], corev1.PodReady).Time
		if !a.Equal(b) {
			return a.Before(b)
		}
		if ca, cb := cands[i].CreationTimestamp.Time, cands[j].CreationTimestamp.Time; !ca.Equal(cb) {
			return ca.Before(cb)
		}
		return cands[i].Name < cands[j].Name
	})
	return cands[0]
}

// coldStartPhase is one phase of a cold start, named for the
// elasti_operator_cold_start_phase_seconds phase label.
type coldStartPhase struct {
	name    string
	seconds float64
}

// Names of the cold-start phases.
const (
	phaseScheduling = "scheduling" // scale write -> pod scheduled
	phaseStarting   = "starting"   // scheduled -> containers running
	phaseReadying   = "readiness"  // running -> pod Ready
	phaseTotal      = "total"      // scale write -> pod Ready
)

// coldStartPhaseSeconds splits a completed cold start into its phases.
// A phase whose end is missing is left out; a negative one (clocks of
// different machines) counts as zero.
func coldStartPhaseSeconds(cs elastiv1alpha1.ColdStart) []coldStartPhase {
	var out []coldStartPhase
	add := func(name string, from, to *metav1.Time) {
		if from != nil && to != nil {
			out = append(out, coldStartPhase{name, max(to.Sub(from.Time).Seconds(), 0)})
		}
	}
	start := cs.ScaleWriteTime
	add(phaseScheduling, &start, cs.ScheduledTime)
	add(phaseStarting, cs.ScheduledTime, cs.StartedTime)
	add(phaseReadying, cs.StartedTime, cs.ReadyTime)
	add(phaseTotal, &start, cs.ReadyTime)
	return out
}
