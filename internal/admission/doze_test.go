package admission

import (
	"context"
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/testenv/estest"
)

// templates answers PodTemplate from a fixed template, or with err.
type templates struct {
	tmpl *corev1.PodTemplateSpec
	err  error
}

func (s templates) PodTemplate(context.Context, string, elastiv1alpha1.ScaleTargetRef) (*corev1.PodTemplateSpec, error) {
	return s.tmpl, s.err
}

func dozing(cpu, memory string) estest.Option {
	return func(es *elastiv1alpha1.ElastiService) {
		es.Spec.SleepMode = elastiv1alpha1.SleepModeDoze
		es.Spec.Doze = &elastiv1alpha1.DozeSpec{CPU: resource.MustParse(cpu)}
		if memory != "" {
			m := resource.MustParse(memory)
			es.Spec.Doze.Memory = &m
		}
	}
}

func template(containers ...corev1.Container) *corev1.PodTemplateSpec {
	return &corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: containers}}
}

func container(name string, requests, limits corev1.ResourceList) corev1.Container {
	return corev1.Container{Name: name, Resources: corev1.ResourceRequirements{Requests: requests, Limits: limits}}
}

func TestValidatorDozeTemplate(t *testing.T) {
	cpu := func(s string) corev1.ResourceList {
		return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(s)}
	}
	burstable := template(container("app", cpu("100m"), nil))
	for _, tc := range []struct {
		name  string
		opts  []estest.Option
		tmpls PodTemplates
		// want is each error as the webhook words it; nil: accepted.
		want []string
	}{
		{name: "scale to zero reads no template", tmpls: templates{err: errors.New("must not be read")}},
		{name: "burstable target", opts: []estest.Option{dozing("5m", "")}, tmpls: templates{tmpl: burstable}},
		{name: "target not created yet", opts: []estest.Option{dozing("5m", "")}, tmpls: templates{}},
		{name: "no template reader", opts: []estest.Option{dozing("5m", "")}},
		{name: "best effort target", opts: []estest.Option{dozing("5m", "")}, tmpls: templates{tmpl: template(container("app", nil, nil))},
			want: []string{"spec.doze: Deployment web: the target's pods are BestEffort"}},
		{name: "floor above a request", opts: []estest.Option{dozing("200m", "")}, tmpls: templates{tmpl: burstable},
			want: []string{`spec.doze.cpu: 200m is above container "app"'s CPU request 100m in the target's pod template; a doze only lowers requests: use at most 100m`}},
		{name: "memory floor above a request", opts: []estest.Option{dozing("5m", "64Mi")},
			tmpls: templates{tmpl: template(container("app", corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("32Mi")}, nil))},
			want:  []string{`spec.doze.memory: 64Mi is above container "app"'s memory request 32Mi`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			es := estest.New("ns", "web", tc.opts...)
			_, err := Validator{Templates: tc.tmpls}.ValidateCreate(context.Background(), es)
			if tc.want == nil {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if !apierrors.IsInvalid(err) {
				t.Fatalf("want Invalid, got %v", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("refusal does not say %q:\n%v", w, err)
				}
			}
		})
	}

	// A template that cannot be read is the webhook's failure, not the
	// object's: the API server is told so, and its failurePolicy decides.
	_, err := Validator{Templates: templates{err: errors.New("etcd is down")}}.ValidateCreate(context.Background(), estest.New("ns", "web", dozing("5m", "")))
	if !apierrors.IsInternalError(err) || !strings.Contains(err.Error(), "etcd is down") {
		t.Errorf("an unreadable template: %v, want an internal error that says why", err)
	}
}
