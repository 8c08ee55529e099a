package chart

import (
	"path/filepath"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"elasti.dev/elasti/internal/memlimit"
)

// memoryLimitFromDownwardAPI reports whether c's env passes its own
// limits.memory as memlimit.Env.
func memoryLimitFromDownwardAPI(c corev1.Container) bool {
	for _, env := range c.Env {
		if env.Name != memlimit.Env || env.ValueFrom == nil || env.ValueFrom.ResourceFieldRef == nil {
			continue
		}
		ref := env.ValueFrom.ResourceFieldRef
		return ref.Resource == "limits.memory" && (ref.ContainerName == "" || ref.ContainerName == c.Name)
	}
	return false
}

// TestMemoryLimitEnv: both installs pass each component's container memory
// limit to its process, which sets the Go runtime's soft limit from it
// (internal/memlimit).
func TestMemoryLimitEnv(t *testing.T) {
	r := render(t, "")
	for _, key := range []string{"Deployment/elasti-x-operator", "Deployment/elasti-x-resolver"} {
		var d appsv1.Deployment
		r.decode(t, key, &d)
		if !memoryLimitFromDownwardAPI(d.Spec.Template.Spec.Containers[0]) {
			t.Errorf("chart %s: no %s from limits.memory in %+v", key, memlimit.Env, d.Spec.Template.Spec.Containers[0].Env)
		}
	}
	for _, f := range []string{"config/operator/deployment.yaml", "config/resolver/deployment.yaml"} {
		var d appsv1.Deployment
		if err := yaml.Unmarshal(read(t, filepath.Join(repoRoot, f)), &d); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if !memoryLimitFromDownwardAPI(d.Spec.Template.Spec.Containers[0]) {
			t.Errorf("%s: no %s from limits.memory in %+v", f, memlimit.Env, d.Spec.Template.Spec.Containers[0].Env)
		}
	}
}
