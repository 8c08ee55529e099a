package doze

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
)

var (
	// ErrRefused: the pod cannot doze (podRefusals); the error's text
	// says why. The operator falls back to scaling the target to zero.
	ErrRefused = errors.New("the pod cannot doze")
	// ErrBadFloor: the floor is below 1m CPU or 1Mi memory, which the
	// CRD refuses; a floor that slipped past it is not applied.
	ErrBadFloor = errors.New("the doze floor is below 1m CPU or 1Mi memory")
)

var (
	minCPU    = resource.MustParse("1m")
	minMemory = resource.MustParse("1Mi")
)

// Patch is a resize of some containers' requests: the body of a
// strategic merge patch of the pod's resize subresource. Limits are never
// in it, so a doze never throttles a container or lowers the memory it
// may use.
type Patch struct {
	Containers []ContainerRequests
}

// ContainerRequests are the requests Patch sets on one container; an
// unset one is left as it is.
type ContainerRequests struct {
	Name   string
	CPU    *resource.Quantity
	Memory *resource.Quantity
}

// Empty is true when the patch changes nothing, and need not be sent.
func (p Patch) Empty() bool { return len(p.Containers) == 0 }

// JSON is the patch as a strategic merge patch: containers are merged by
// name, and only the requests named are written.
func (p Patch) JSON() ([]byte, error) {
	type requests struct {
		CPU    *resource.Quantity `json:"cpu,omitempty"`
		Memory *resource.Quantity `json:"memory,omitempty"`
	}
	type container struct {
		Name      string `json:"name"`
		Resources struct {
			Requests requests `json:"requests"`
		} `json:"resources"`
	}
	var body struct {
		Spec struct {
			Containers []container `json:"containers"`
		} `json:"spec"`
	}
	body.Spec.Containers = make([]container, 0, len(p.Containers))
	for _, c := range p.Containers {
		var out container
		out.Name = c.Name
		out.Resources.Requests = requests{CPU: c.CPU, Memory: c.Memory}
		body.Spec.Containers = append(body.Spec.Containers, out)
	}
	data, err := json.Marshal(body)
	if err != nil {
		return nil, fmt.Errorf("encode the resize patch: %w", err)
	}
	return data, nil
}

// Shrink returns the resize that lowers pod's container requests to
// floor, and the record a wake needs to undo it. Each container request
// above the floor goes down to it; one at or below the floor is left, as
// are limits, init containers and sidecars.
//
// prev is this pod's record from an earlier Shrink (same UID), or nil. Its
// requests before the doze are kept rather than read again from the pod,
// which may already be at the floor after an operator restart or a
// resize half done. A prev of another UID is ignored: a recreated pod is
// a new pod at its template's size.
//
// The record's Generation is prev's, or 0: the caller sets it to the
// pod's generation after the patch is written. An empty patch with a
// record of no container means there is nothing to doze in this pod.
func Shrink(pod *corev1.Pod, floor elastiv1alpha1.DozeSpec, prev *elastiv1alpha1.DozedPod) (Patch, elastiv1alpha1.DozedPod, error) {
	if pod == nil {
		return Patch{}, elastiv1alpha1.DozedPod{}, fmt.Errorf("%w: no pod", ErrRefused)
	}
	if floor.CPU.Cmp(minCPU) < 0 || (floor.Memory != nil && floor.Memory.Cmp(minMemory) < 0) {
		return Patch{}, elastiv1alpha1.DozedPod{}, ErrBadFloor
	}
	if prev != nil && prev.UID != string(pod.UID) {
		prev = nil
	}
	if rs := podRefusals(&pod.Spec, floor); len(rs) > 0 {
		msgs := make([]string, 0, len(rs))
		for _, r := range rs {
			msgs = append(msgs, r.Message)
		}
		return Patch{}, elastiv1alpha1.DozedPod{}, fmt.Errorf("%w: pod %s: %s", ErrRefused, pod.Name, strings.Join(msgs, "; "))
	}
	rec := elastiv1alpha1.DozedPod{UID: string(pod.UID), Name: pod.Name}
	if prev != nil {
		rec.Generation = prev.Generation
	}
	var patch Patch
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		before := recordedContainer(prev, c.Name)
		dc := elastiv1alpha1.DozedContainer{Name: c.Name, RestartCount: restartCount(pod, c.Name)}
		if before != nil {
			dc.RestartCount = before.RestartCount
		}
		cr := ContainerRequests{Name: c.Name}
		lowered := false
		for _, r := range floorsOf(floor) {
			orig, ok := originalRequest(c, before, r.name)
			if !ok || orig.Cmp(r.floor) <= 0 {
				continue
			}
			lowered = true
			target := r.floor.DeepCopy()
			setResource(&dc.Requests, r.name, orig)
			setResource(&dc.Dozed, r.name, target)
			if cur, ok := nonZero(c.Resources.Requests, r.name); !ok || cur.Cmp(target) != 0 {
				setRequest(&cr, r.name, target)
			}
		}
		if !lowered {
			continue
		}
		for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			if q, ok := nonZero(c.Resources.Limits, name); ok {
				setResource(&dc.Limits, name, q)
			}
		}
		rec.Containers = append(rec.Containers, dc)
		if cr.CPU != nil || cr.Memory != nil {
			patch.Containers = append(patch.Containers, cr)
		}
	}
	return patch, rec, nil
}

// Restore returns the resize that writes rec's requests back on pod: the
// wake. Containers already at their recorded requests are left out, so a
// wake that was cut short is finished by calling it again. A rec of
// another pod (UID) gives an empty patch: a recreated pod is already at
// its template's size.
func Restore(pod *corev1.Pod, rec elastiv1alpha1.DozedPod) Patch {
	var patch Patch
	if pod == nil || rec.UID != string(pod.UID) {
		return patch
	}
	for _, dc := range rec.Containers {
		c := container(pod, dc.Name)
		if c == nil {
			continue
		}
		cr := ContainerRequests{Name: dc.Name}
		for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			want := getResource(dc.Requests, name)
			if want == nil {
				continue
			}
			if cur, ok := nonZero(c.Resources.Requests, name); !ok || cur.Cmp(*want) != 0 {
				setRequest(&cr, name, want.DeepCopy())
			}
		}
		if cr.CPU != nil || cr.Memory != nil {
			patch.Containers = append(patch.Containers, cr)
		}
	}
	return patch
}

// Freed is what the doze of the pods recorded in recs frees: the requests
// before the doze minus the requests set, summed over containers and pods.
// A resource no container lowered is nil.
func Freed(recs []elastiv1alpha1.DozedPod) elastiv1alpha1.Resources {
	var out elastiv1alpha1.Resources
	for _, p := range recs {
		for _, c := range p.Containers {
			for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
				before, after := getResource(c.Requests, name), getResource(c.Dozed, name)
				if before == nil || after == nil {
					continue
				}
				d := before.DeepCopy()
				d.Sub(*after)
				if cur := getResource(out, name); cur != nil {
					d.Add(*cur)
				}
				setResource(&out, name, d)
			}
		}
	}
	return out
}

// Restarted names the containers of pod that restarted since rec was
// taken. A restarted container starts at the dozing size, where a slow
// start can fail its probes again; the operator wakes such a pod.
func Restarted(pod *corev1.Pod, rec elastiv1alpha1.DozedPod) []string {
	if pod == nil || rec.UID != string(pod.UID) {
		return nil
	}
	var out []string
	for _, dc := range rec.Containers {
		if restartCount(pod, dc.Name) > dc.RestartCount {
			out = append(out, dc.Name)
		}
	}
	return out
}

// originalRequest is the container's request for name before the doze:
// the record's when there is one, else the pod's (a missing request
// defaulted from the limit, as the API server does).
func originalRequest(c *corev1.Container, before *elastiv1alpha1.DozedContainer, name corev1.ResourceName) (resource.Quantity, bool) {
	if before != nil {
		if q := getResource(before.Requests, name); q != nil {
			return *q, true
		}
	}
	return request(c, name)
}

func recordedContainer(rec *elastiv1alpha1.DozedPod, name string) *elastiv1alpha1.DozedContainer {
	if rec == nil {
		return nil
	}
	for i := range rec.Containers {
		if rec.Containers[i].Name == name {
			return &rec.Containers[i]
		}
	}
	return nil
}

func container(pod *corev1.Pod, name string) *corev1.Container {
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == name {
			return &pod.Spec.Containers[i]
		}
	}
	return nil
}

func containerStatus(pod *corev1.Pod, name string) *corev1.ContainerStatus {
	for i := range pod.Status.ContainerStatuses {
		if pod.Status.ContainerStatuses[i].Name == name {
			return &pod.Status.ContainerStatuses[i]
		}
	}
	return nil
}

func restartCount(pod *corev1.Pod, name string) int32 {
	if s := containerStatus(pod, name); s != nil {
		return s.RestartCount
	}
	return 0
}

func getResource(r elastiv1alpha1.Resources, name corev1.ResourceName) *resource.Quantity {
	if name == corev1.ResourceCPU {
		return r.CPU
	}
	return r.Memory
}

func setResource(r *elastiv1alpha1.Resources, name corev1.ResourceName, q resource.Quantity) {
	if name == corev1.ResourceCPU {
		r.CPU = &q
		return
	}
	r.Memory = &q
}

func setRequest(c *ContainerRequests, name corev1.ResourceName, q resource.Quantity) {
	if name == corev1.ResourceCPU {
		c.CPU = &q
		return
	}
	c.Memory = &q
}
