package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"elasti.dev/elasti/internal/contract"
	"elasti.dev/elasti/test/cluster"
)

// DemoAppImage is the demo app (test/demoapp) as `make images` builds it.
const DemoAppImage = "elasti/demoapp:dev"

// Demo app ports: the Service's port and the container's.
const (
	DemoHTTPPort, DemoHTTPTarget = 80, 8080
	DemoGRPCPort                 = 9090
	DemoTCPPort                  = 9000
)

// DemoAppDeployment returns a Deployment of the demo app with a 1 s readiness
// period, so scale-ups become Ready in about a second.
func DemoAppDeployment(ns, name string, replicas int32) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				// The cluster's Prometheus scrapes http_requests_total here.
				ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: map[string]string{
					cluster.AnnotationScrape: "true",
					cluster.AnnotationPort:   fmt.Sprint(DemoHTTPTarget),
				}},
				Spec: corev1.PodSpec{
					// Longer than the app's 3 s drain after SIGTERM
					// (test/demoapp), so the kubelet never cuts it short.
					TerminationGracePeriodSeconds: ptr.To[int64](10),
					Containers: []corev1.Container{{
						Name:            "demoapp",
						Image:           DemoAppImage,
						ImagePullPolicy: corev1.PullNever,
						Ports: []corev1.ContainerPort{
							{Name: "http", ContainerPort: DemoHTTPTarget},
							{Name: "grpc", ContainerPort: DemoGRPCPort},
							{Name: "tcp", ContainerPort: DemoTCPPort},
						},
						ReadinessProbe: &corev1.Probe{
							ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromString("http")}},
							PeriodSeconds: 1,
						},
						SecurityContext: &corev1.SecurityContext{
							RunAsNonRoot:             ptr.To(true),
							AllowPrivilegeEscalation: ptr.To(false),
							ReadOnlyRootFilesystem:   ptr.To(true),
							Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
						},
					}},
				},
			},
		},
	}
}

// DemoAppService returns the Service in front of DemoAppDeployment: HTTP on
// 80, gRPC (h2c) on 9090, TCP echo on 9000.
func DemoAppService(ns, name string) *corev1.Service {
	svc := DemoAppHTTPService(ns, name)
	svc.Spec.Ports = append(svc.Spec.Ports,
		corev1.ServicePort{Name: "grpc", Port: DemoGRPCPort, TargetPort: intstr.FromString("grpc"), AppProtocol: ptr.To("kubernetes.io/h2c")},
		corev1.ServicePort{Name: "tcp", Port: DemoTCPPort, TargetPort: intstr.FromString("tcp")},
	)
	return svc
}

// DemoAppHTTPService is DemoAppService with its HTTP port only, so an
// ElastiService for it takes one resolver port.
func DemoAppHTTPService(ns, name string) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": name},
			Ports: []corev1.ServicePort{
				{Name: "http", Port: DemoHTTPPort, TargetPort: intstr.FromString("http"), AppProtocol: ptr.To("http")},
			},
		},
	}
}

// Create creates objs and fails the test on error.
func (e *Env) Create(t testing.TB, objs ...client.Object) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, o := range objs {
		if err := e.Client.Create(ctx, o); err != nil {
			t.Fatalf("create %T %s: %v", o, o.GetName(), err)
		}
	}
}

// Scale sets a Deployment's replicas through its /scale subresource, and
// fails the test if it cannot.
func (e *Env) Scale(t testing.TB, ns, name string, replicas int32) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := e.ScaleTo(ctx, ns, name, replicas); err != nil {
		t.Fatal(err)
	}
}

// ScaleTo sets a Deployment's replicas through its /scale subresource, as
// `kubectl scale` does. The read and the write carry the Deployment's
// resourceVersion, so a status update by the deployment controller in
// between makes the write conflict: it is read and written again.
func (e *Env) ScaleTo(ctx context.Context, ns, name string, replicas int32) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		scale, err := e.Clientset.AppsV1().Deployments(ns).GetScale(ctx, name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("get scale of %s/%s: %w", ns, name, err)
		}
		scale.Spec.Replicas = replicas
		if _, err := e.Clientset.AppsV1().Deployments(ns).UpdateScale(ctx, name, scale, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("scale %s/%s to %d: %w", ns, name, replicas, err)
		}
		return nil
	})
}

// ReadyEndpoints counts the ready endpoints (contract.EndpointReady) in the
// EndpointSlices of Service ns/name.
func (e *Env) ReadyEndpoints(ctx context.Context, ns, name string) (int, error) {
	var slices discoveryv1.EndpointSliceList
	if err := e.Client.List(ctx, &slices, client.InNamespace(ns), client.MatchingLabels{discoveryv1.LabelServiceName: name}); err != nil {
		return 0, err
	}
	n := 0
	for _, s := range slices.Items {
		for _, ep := range s.Endpoints {
			if contract.EndpointReady(ep.Conditions) {
				n++
			}
		}
	}
	return n, nil
}

// WaitReadyEndpoints waits until Service ns/name has exactly want ready
// endpoints.
func (e *Env) WaitReadyEndpoints(t testing.TB, ns, name string, want int, timeout time.Duration) {
	t.Helper()
	Eventually(t, timeout, 100*time.Millisecond, func(ctx context.Context) error {
		n, err := e.ReadyEndpoints(ctx, ns, name)
		if err != nil {
			return err
		}
		if n != want {
			return fmt.Errorf("service %s/%s has %d ready endpoints, want %d", ns, name, n, want)
		}
		return nil
	})
}

// HTTPGet GETs url from inside the node's network and returns the body of a
// 200 answer.
func (e *Env) HTTPGet(ctx context.Context, url string) (string, error) {
	return GetWith(ctx, e.HTTPClient(), url, "")
}
