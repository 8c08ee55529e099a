package cluster

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestScrapeTargets(t *testing.T) {
	pod := func(name string, ann map[string]string, phase corev1.PodPhase, ip string) corev1.Pod {
		return corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", Labels: map[string]string{"app": "demo"}, Annotations: ann},
			Status:     corev1.PodStatus{Phase: phase, PodIP: ip},
		}
	}
	scrape := map[string]string{AnnotationScrape: "true", AnnotationPort: "8080"}
	withPath := map[string]string{AnnotationScrape: "true", AnnotationPort: "9000", AnnotationPath: "/m"}
	pods := []corev1.Pod{
		pod("a", scrape, corev1.PodRunning, "10.244.0.5"),
		pod("b", withPath, corev1.PodRunning, "10.244.0.6"),
		pod("pending", scrape, corev1.PodPending, ""),
		pod("no-annotation", nil, corev1.PodRunning, "10.244.0.7"),
		pod("bad-port", map[string]string{AnnotationScrape: "true", AnnotationPort: "http"}, corev1.PodRunning, "10.244.0.8"),
		pod("off", map[string]string{AnnotationScrape: "false", AnnotationPort: "8080"}, corev1.PodRunning, "10.244.0.9"),
	}
	want := []targetGroup{
		{Targets: []string{"10.244.0.5:8080"}, Labels: map[string]string{"namespace": "ns", "pod": "a", "app": "demo"}},
		{Targets: []string{"10.244.0.6:9000"}, Labels: map[string]string{"namespace": "ns", "pod": "b", "app": "demo", "__metrics_path__": "/m"}},
	}
	if diff := cmp.Diff(want, scrapeTargets(pods)); diff != "" {
		t.Errorf("scrapeTargets (-want +got):\n%s", diff)
	}
}
