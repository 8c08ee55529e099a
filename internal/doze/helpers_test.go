package doze

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
)

// ctr is a container with the given requests and limits, each written as
// "cpu=100m,memory=64Mi" ("" for none).
func ctr(name, requests, limits string) corev1.Container {
	return corev1.Container{Name: name, Resources: corev1.ResourceRequirements{Requests: list(requests), Limits: list(limits)}}
}

func list(s string) corev1.ResourceList {
	if s == "" {
		return nil
	}
	out := corev1.ResourceList{}
	for _, kv := range strings.Split(s, ",") {
		k, v, _ := strings.Cut(kv, "=")
		out[corev1.ResourceName(k)] = resource.MustParse(v)
	}
	return out
}

func q(s string) *resource.Quantity {
	v := resource.MustParse(s)
	return &v
}

func floorOf(cpu, memory string) elastiv1alpha1.DozeSpec {
	f := elastiv1alpha1.DozeSpec{CPU: resource.MustParse(cpu)}
	if memory != "" {
		f.Memory = q(memory)
	}
	return f
}

func podOf(uid string, containers ...corev1.Container) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "web-" + uid, UID: types.UID(uid), Generation: 1},
		Spec:       corev1.PodSpec{Containers: containers},
	}
	for _, c := range containers {
		p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{Name: c.Name})
	}
	return p
}
