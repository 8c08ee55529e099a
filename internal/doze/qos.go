package doze

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// qosClass is the pod's QoS class as the API server computes it, read
// from a spec that may not have been defaulted yet (a pod template): a
// container's missing request counts as its limit, as the API server
// fills it in at creation. A resize may not change it, which is why a
// doze can only lower requests of Burstable pods.
func qosClass(spec *corev1.PodSpec) corev1.PodQOSClass {
	requested, guaranteed := false, true
	for _, c := range allContainers(spec) {
		for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			req, hasReq := request(c, name)
			lim, hasLim := nonZero(c.Resources.Limits, name)
			if hasReq || hasLim {
				requested = true
			}
			if !hasLim || !hasReq || req.Cmp(lim) != 0 {
				guaranteed = false
			}
		}
	}
	switch {
	case !requested:
		return corev1.PodQOSBestEffort
	case guaranteed:
		return corev1.PodQOSGuaranteed
	default:
		return corev1.PodQOSBurstable
	}
}

// request is c's request for name, or its limit when it sets none (the
// API server's defaulting); false when neither is set or both are zero.
func request(c *corev1.Container, name corev1.ResourceName) (resource.Quantity, bool) {
	if q, ok := nonZero(c.Resources.Requests, name); ok {
		return q, true
	}
	if _, set := c.Resources.Requests[name]; set {
		return resource.Quantity{}, false
	}
	return nonZero(c.Resources.Limits, name)
}

func nonZero(l corev1.ResourceList, name corev1.ResourceName) (resource.Quantity, bool) {
	q, ok := l[name]
	if !ok || q.IsZero() {
		return resource.Quantity{}, false
	}
	return q, true
}

// allContainers lists the init containers, then the containers, as
// pointers into spec.
func allContainers(spec *corev1.PodSpec) []*corev1.Container {
	out := make([]*corev1.Container, 0, len(spec.InitContainers)+len(spec.Containers))
	for i := range spec.InitContainers {
		out = append(out, &spec.InitContainers[i])
	}
	for i := range spec.Containers {
		out = append(out, &spec.Containers[i])
	}
	return out
}
