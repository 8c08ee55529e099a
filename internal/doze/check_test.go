package doze

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestCheck(t *testing.T) {
	restartOnCPU := ctr("app", "cpu=100m,memory=64Mi", "memory=128Mi")
	restartOnCPU.ResizePolicy = []corev1.ContainerResizePolicy{{ResourceName: corev1.ResourceCPU, RestartPolicy: corev1.RestartContainer}}
	restartOnMemory := ctr("app", "cpu=100m,memory=64Mi", "memory=128Mi")
	restartOnMemory.ResizePolicy = []corev1.ContainerResizePolicy{{ResourceName: corev1.ResourceMemory, RestartPolicy: corev1.RestartContainer}}

	for _, tc := range []struct {
		name       string
		spec       *corev1.PodSpec
		cpu, mem   string
		wantFields []string
		wantWords  []string
	}{
		{name: "burstable with room", spec: &corev1.PodSpec{Containers: []corev1.Container{ctr("app", "cpu=100m,memory=64Mi", "memory=128Mi")}}, cpu: "5m"},
		{name: "memory floor too", spec: &corev1.PodSpec{Containers: []corev1.Container{ctr("app", "cpu=100m,memory=64Mi", "memory=128Mi")}}, cpu: "5m", mem: "16Mi"},
		{name: "sidecar with no CPU request is left", spec: &corev1.PodSpec{Containers: []corev1.Container{
			ctr("app", "cpu=100m", ""), ctr("log", "memory=16Mi", "")}}, cpu: "5m"},
		{name: "floor equal to a request is accepted", spec: &corev1.PodSpec{Containers: []corev1.Container{
			ctr("app", "cpu=100m", ""), ctr("proxy", "cpu=5m", "")}}, cpu: "5m"},
		{name: "nil template", spec: nil, cpu: "5m",
			wantFields: []string{FieldPod}, wantWords: []string{"no pod template"}},
		{name: "best effort", spec: &corev1.PodSpec{Containers: []corev1.Container{ctr("app", "", "")}}, cpu: "5m",
			wantFields: []string{FieldPod}, wantWords: []string{"BestEffort"}},
		{name: "zero requests are best effort", spec: &corev1.PodSpec{Containers: []corev1.Container{ctr("app", "cpu=0", "")}}, cpu: "5m",
			wantFields: []string{FieldPod}, wantWords: []string{"BestEffort"}},
		{name: "guaranteed", spec: &corev1.PodSpec{Containers: []corev1.Container{ctr("app", "cpu=100m,memory=64Mi", "cpu=100m,memory=64Mi")}}, cpu: "5m",
			wantFields: []string{FieldPod}, wantWords: []string{"Guaranteed"}},
		{name: "guaranteed by limits alone", spec: &corev1.PodSpec{Containers: []corev1.Container{ctr("app", "", "cpu=100m,memory=64Mi")}}, cpu: "5m",
			wantFields: []string{FieldPod}, wantWords: []string{"Guaranteed"}},
		{name: "an init container's requests count for the QoS class", spec: &corev1.PodSpec{
			InitContainers: []corev1.Container{ctr("init", "cpu=10m", "")},
			Containers:     []corev1.Container{ctr("app", "", "cpu=100m,memory=64Mi")}}, cpu: "5m"},
		{name: "pod-level resources", spec: &corev1.PodSpec{Resources: &corev1.ResourceRequirements{Requests: list("cpu=1")},
			Containers: []corev1.Container{ctr("app", "cpu=100m", "")}}, cpu: "5m",
			wantFields: []string{FieldPod}, wantWords: []string{"pod-level resources"}},
		{name: "floor above a CPU request", spec: &corev1.PodSpec{Containers: []corev1.Container{
			ctr("app", "cpu=100m", ""), ctr("proxy", "cpu=2m", "")}}, cpu: "5m",
			wantFields: []string{FieldCPU}, wantWords: []string{`5m is above container "proxy"'s CPU request 2m`, "use at most 2m"}},
		{name: "floor above a CPU request defaulted from the limit", spec: &corev1.PodSpec{Containers: []corev1.Container{
			ctr("app", "memory=64Mi", "cpu=2m")}}, cpu: "5m",
			wantFields: []string{FieldCPU}, wantWords: []string{`container "app"'s CPU request 2m`}},
		{name: "floor above a memory request", spec: &corev1.PodSpec{Containers: []corev1.Container{
			ctr("app", "cpu=100m,memory=16Mi", "")}}, cpu: "5m", mem: "32Mi",
			wantFields: []string{FieldMemory}, wantWords: []string{`32Mi is above container "app"'s memory request 16Mi`}},
		{name: "nothing to free", spec: &corev1.PodSpec{Containers: []corev1.Container{ctr("app", "cpu=5m,memory=64Mi", "")}}, cpu: "5m",
			wantFields: []string{FieldPod}, wantWords: []string{"would free nothing"}},
		{name: "restart on CPU resize", spec: &corev1.PodSpec{Containers: []corev1.Container{restartOnCPU}}, cpu: "5m",
			wantFields: []string{FieldCPU}, wantWords: []string{`container "app" restarts when its CPU is resized`}},
		{name: "restart on memory resize matters only with a memory floor", spec: &corev1.PodSpec{Containers: []corev1.Container{restartOnMemory}}, cpu: "5m"},
		{name: "restart on memory resize with a memory floor", spec: &corev1.PodSpec{Containers: []corev1.Container{restartOnMemory}}, cpu: "5m", mem: "16Mi",
			wantFields: []string{FieldMemory}, wantWords: []string{"resizePolicy RestartContainer"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Check(tc.spec, floorOf(tc.cpu, tc.mem))
			if len(got) != len(tc.wantFields) {
				t.Fatalf("got %d refusals, want %d: %+v", len(got), len(tc.wantFields), got)
			}
			for i, r := range got {
				if r.Field != tc.wantFields[i] {
					t.Errorf("refusal %d is about %q, want %q", i, r.Field, tc.wantFields[i])
				}
				for _, w := range tc.wantWords {
					if !strings.Contains(r.Message, w) {
						t.Errorf("refusal %q does not say %q", r.Message, w)
					}
				}
			}
		})
	}
}
