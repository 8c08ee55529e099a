package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// Pod annotations that ask the cluster's Prometheus to scrape a pod.
const (
	AnnotationScrape = "prometheus.io/scrape"
	AnnotationPort   = "prometheus.io/port"
	AnnotationPath   = "prometheus.io/path"
)

// PrometheusSDAddress is where the pod discovery for Prometheus listens, on
// the node namespace's loopback.
const PrometheusSDAddress = "127.0.0.1:9091"

// The Debian package's Prometheus is built without kubernetes_sd_configs, so
// the cluster discovers pods itself and hands them to Prometheus through
// http_sd_configs: the same targets and labels a role: pod discovery with the
// usual prometheus.io/* relabelling would give.

// targetGroup is one entry of Prometheus's HTTP service discovery format.
type targetGroup struct {
	Targets []string          `json:"targets"`
	Labels  map[string]string `json:"labels"`
}

// scrapeTargets turns pods into target groups: running pods with an IP that
// are annotated prometheus.io/scrape: "true" and a valid prometheus.io/port.
func scrapeTargets(pods []corev1.Pod) []targetGroup {
	groups := []targetGroup{}
	for _, p := range pods {
		if p.Annotations[AnnotationScrape] != "true" || p.Status.Phase != corev1.PodRunning || p.Status.PodIP == "" || p.DeletionTimestamp != nil {
			continue
		}
		port, err := strconv.ParseUint(p.Annotations[AnnotationPort], 10, 16)
		if err != nil || port == 0 {
			continue
		}
		labels := map[string]string{"namespace": p.Namespace, "pod": p.Name}
		if app := p.Labels["app"]; app != "" {
			labels["app"] = app
		}
		if path := p.Annotations[AnnotationPath]; path != "" {
			labels["__metrics_path__"] = path
		}
		groups = append(groups, targetGroup{
			Targets: []string{net.JoinHostPort(p.Status.PodIP, strconv.FormatUint(port, 10))},
			Labels:  labels,
		})
	}
	return groups
}

// ServePrometheusSD answers Prometheus's HTTP service discovery at addr with
// the scrapeable pods, read from the API server with kubeconfig on every
// refresh. It returns when ctx ends.
func ServePrometheusSD(ctx context.Context, kubeconfig, addr string) error {
	rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	rc.Timeout = 5 * time.Second
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/targets", func(w http.ResponseWriter, r *http.Request) {
		pods, err := cs.CoreV1().Pods("").List(r.Context(), metav1.ListOptions{})
		if err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(scrapeTargets(pods.Items))
	})
	srv := &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	if err := srv.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
