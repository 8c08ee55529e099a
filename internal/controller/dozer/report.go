package dozer

import (
	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/doze"
)

// Report is what the target's pods say of a doze or a wake in progress,
// as lists of pod names, each sorted as the pods were.
type Report struct {
	// Done: every recorded pod's resize is done (doze.Done).
	Done bool
	// Restored: every recorded pod still there has its requests from
	// before the doze in its spec again; with Done, the wake is over.
	Restored bool
	// Waiting are the recorded pods whose resize is still in progress.
	Waiting []string
	// Deferred, Infeasible and Failed are the recorded pods whose resize
	// the kubelet reported so (doze.Progress). Infeasible while dozing
	// means falling back to scale to zero; Deferred on a wake means
	// scaling out a fresh pod.
	Deferred, Infeasible, Failed []string
	// Restarted are the recorded pods with a container restarted since
	// the doze: it runs at the dozing size, and the pod is woken.
	Restarted []string
	// Gone are the UIDs of recorded pods that no longer exist: a pod
	// recreated from the template is at full size, and its record is
	// dropped.
	Gone []string
	// Unrecorded are the target's pods without a record: new pods of a
	// scale-out, a rollout or a recreation, at their template's size.
	Unrecorded []string
	// TemplateChanged: the target's pod template is not the one the doze
	// began with. Its new pods come at full size; the target is woken.
	TemplateChanged bool
}

// Observe compares the target as read now with the doze's status: each
// recorded pod's resize toward its spec, restarts, pods gone and pods new.
// It reads the pods' own spec as the goal, so it serves a doze and a wake
// alike.
func Observe(t Target, st *elastiv1alpha1.DozeStatus) Report {
	r := Report{Done: true, Restored: true}
	if st == nil {
		for _, p := range t.Pods {
			r.Unrecorded = append(r.Unrecorded, p.Name)
		}
		return r
	}
	r.TemplateChanged = st.TemplateHash != "" && t.TemplateHash != st.TemplateHash
	byUID := recordsByUID(st.Pods)
	seen := make(map[string]bool, len(t.Pods))
	for i := range t.Pods {
		p := &t.Pods[i]
		rec, ok := byUID[string(p.UID)]
		if !ok {
			r.Unrecorded = append(r.Unrecorded, p.Name)
			continue
		}
		seen[rec.UID] = true
		if !doze.Restore(p, rec).Empty() {
			r.Restored = false
		}
		if len(doze.Restarted(p, rec)) > 0 {
			r.Restarted = append(r.Restarted, p.Name)
		}
		state, _ := doze.Progress(p, rec.Generation)
		if state != doze.Done {
			r.Done = false
		}
		switch state {
		case doze.InProgress:
			r.Waiting = append(r.Waiting, p.Name)
		case doze.Deferred:
			r.Deferred = append(r.Deferred, p.Name)
		case doze.Infeasible:
			r.Infeasible = append(r.Infeasible, p.Name)
		case doze.Failed:
			r.Failed = append(r.Failed, p.Name)
		}
	}
	for _, rec := range st.Pods {
		if !seen[rec.UID] {
			r.Gone = append(r.Gone, rec.UID)
		}
	}
	return r
}
