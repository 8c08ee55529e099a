//go:build integration

package controller

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/controller/plan"
	"elasti.dev/elasti/internal/scaling"
	"elasti.dev/elasti/internal/scaling/scalingtest"
)

// TestPrometheusTriggers runs the real Prometheus binary against a loopback
// exporter: an active trigger keeps the target up, an idle one puts it to
// sleep, and triggers that cannot be evaluated never do.
func TestPrometheusTriggers(t *testing.T) {
	exp, prom := scalingtest.StartForTest(t, 5)

	op := startOperator(t, operatorOptions{triggers: &scaling.Evaluator{Secrets: k8s, DefaultServerAddress: prom.URL}})
	createResolver(t, op.resolverNS, "r1", true, "10.0.0.1")
	trigger := func(query, threshold string) func(*elastiv1alpha1.ElastiService) {
		return func(es *elastiv1alpha1.ElastiService) {
			es.Spec.Triggers = []elastiv1alpha1.ScaleTrigger{{Type: elastiv1alpha1.TriggerTypePrometheus, Metadata: elastiv1alpha1.TriggerMetadata{
				Query: query, Threshold: ptr.To(elastiv1alpha1.Threshold(threshold)),
			}}}
		}
	}
	for _, name := range []string{"busy", "empty", "broken", "down"} {
		createDeployment(t, op.ns, name, 1)
		createService(t, op.ns, name)
	}
	createES(t, op.ns, "busy", "busy", "busy", trigger("elasti_test_value", "1"))
	createES(t, op.ns, "empty", "empty", "empty", trigger("elasti_metric_that_does_not_exist", "1"))
	createES(t, op.ns, "broken", "broken", "broken", trigger("sum(", "1"))
	createES(t, op.ns, "down", "down", "down", func(es *elastiv1alpha1.ElastiService) {
		trigger("elasti_test_value", "1")(es)
		es.Spec.Triggers[0].Metadata.ServerAddress = "http://127.0.0.1:1"
	})

	eventually(t, wait, "busy is active", wantCondition(op.ns, "busy", elastiv1alpha1.ConditionIdle, metav1.ConditionFalse, plan.ReasonTriggerActive))
	for name, reason := range map[string]string{
		"empty":  scaling.ReasonEmptyResult,
		"broken": scaling.ReasonQueryFailed,
		"down":   scaling.ReasonPrometheusUnreachable,
	} {
		eventually(t, wait, name+" is unhealthy", wantCondition(op.ns, name, elastiv1alpha1.ConditionTriggersHealthy, metav1.ConditionFalse, reason))
	}
	eventually(t, wait, "TriggerUnhealthy event", func() error {
		list := &eventsv1.EventList{}
		if err := k8s.List(context.Background(), list, client.InNamespace(op.ns)); err != nil {
			return err
		}
		for _, e := range list.Items {
			if e.Reason == EventTriggerUnhealthy && e.Regarding.Name == "empty" {
				return nil
			}
		}
		return fmt.Errorf("no %s event among %d", EventTriggerUnhealthy, len(list.Items))
	})

	// The value drops below the threshold: busy sleeps, the unhealthy ones
	// stay up.
	exp.Set(0)
	eventually(t, wait, "busy asleep", wantReplicas(op.ns, "busy", 0))
	for _, name := range []string{"empty", "broken", "down"} {
		if err := wantReplicas(op.ns, name, 1)(); err != nil {
			t.Errorf("unhealthy trigger scaled %s: %v", name, err)
		}
	}

	// A threshold written as a YAML/JSON number, with an uptime filter on
	// Prometheus' own up series.
	createDeployment(t, op.ns, "numeric", 1)
	createService(t, op.ns, "numeric")
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": elastiv1alpha1.GroupVersion.String(), "kind": "ElastiService",
		"metadata": map[string]any{"name": "numeric", "namespace": op.ns},
		"spec": map[string]any{
			"service": "numeric", "cooldownPeriod": int64(3),
			"scaleTargetRef": map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "name": "numeric"},
			"triggers": []any{map[string]any{"type": "prometheus", "metadata": map[string]any{
				"query": "sum(elasti_test_value) or vector(0)", "threshold": 0.5, "uptimeFilter": `job="prometheus"`,
			}}},
		},
	}}
	mustCreate(t, u)
	eventually(t, wait, "numeric threshold idle", wantReplicas(op.ns, "numeric", 0))
	never(t, 2*time.Second, "unhealthy targets stay up", func() error {
		for _, name := range []string{"empty", "broken", "down"} {
			if err := wantReplicas(op.ns, name, 1)(); err != nil {
				return err
			}
		}
		return nil
	})
}

// TestTriggerServerCannotSpeakThroughStatusWithRBAC: the operator runs with
// real RBAC that lets it read one Secret of the namespace, "token", as a
// cluster admin grants it for a trigger's bearer token. Three triggers send
// that token to servers that try to use the operator as a messenger: one
// redirects to another host, one answers a Prometheus error whose type
// echoes the request's Authorization, one an error page that echoes it.
// The other host never hears from the operator, and neither the
// ElastiServices' conditions nor the namespace's Events carry a word the
// servers wrote. A fourth trigger names a Secret the operator may not read:
// the API server refuses it, and the trigger says so without calling its
// server.
func TestTriggerServerCannotSpeakThroughStatusWithRBAC(t *testing.T) {
	const token = "t0ken-only-the-operator-reads"
	elsewhere := make(chan string, 16)
	other := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		elsewhere <- r.Header.Get("Authorization")
	}))
	t.Cleanup(other.Close)
	calls, forbiddenCalls := make(chan string, 256), make(chan string, 256)
	hostile := func(answer func(w http.ResponseWriter, r *http.Request)) string {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			select {
			case calls <- r.Header.Get("Authorization"):
			default:
			}
			answer(w, r)
		}))
		t.Cleanup(srv.Close)
		return srv.URL
	}
	servers := map[string]string{
		"redirect": hostile(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, other.URL+r.URL.RequestURI(), http.StatusTemporaryRedirect)
		}),
		"errortype": hostile(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnprocessableEntity)
			fmt.Fprintf(w, `{"status":"error","errorType":"ECHO %s","error":"ECHO %s"}`, r.Header.Get("Authorization"), r.Header.Get("Authorization"))
		}),
		"errorpage": hostile(func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "ECHO "+r.Header.Get("Authorization"), http.StatusInternalServerError)
		}),
	}
	forbidden := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		forbiddenCalls <- r.Header.Get("Authorization")
	}))
	t.Cleanup(forbidden.Close)
	servers["forbidden"] = forbidden.URL

	user := fmt.Sprintf("elasti-one-secret-%d", time.Now().UnixNano()%100000)
	cfg := restrictedOperator(t, user)
	secrets, err := client.New(cfg, client.Options{Scheme: k8s.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	policy, err := scaling.NewServerPolicy([]string{"127.0.0.1/32"}, "")
	if err != nil {
		t.Fatal(err)
	}
	op := startOperator(t, operatorOptions{rest: cfg, triggers: &scaling.Evaluator{Secrets: secrets, Servers: policy, Timeout: 5 * time.Second}})
	createResolver(t, op.resolverNS, "r1", true, "10.0.0.1")
	for _, name := range []string{"token", "other"} {
		mustCreate(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: op.ns, Name: name}, Data: map[string][]byte{"token": []byte(token)}})
	}
	mustCreate(t, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Namespace: op.ns, Name: user},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{"token"}, Verbs: []string{"get"}}},
	})
	mustCreate(t, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: op.ns, Name: user},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: user},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
	})
	for name, url := range servers {
		secret := "token"
		if name == "forbidden" {
			secret = "other"
		}
		createDeployment(t, op.ns, name, 1)
		createService(t, op.ns, name)
		createES(t, op.ns, name, name, name, func(es *elastiv1alpha1.ElastiService) {
			es.Spec.Triggers = []elastiv1alpha1.ScaleTrigger{{Type: elastiv1alpha1.TriggerTypePrometheus, Metadata: elastiv1alpha1.TriggerMetadata{
				ServerAddress: url, Query: "up", Threshold: ptr.To(elastiv1alpha1.Threshold("1")),
				AuthSecretRef: &elastiv1alpha1.SecretKeySelector{Name: secret, Key: "token"},
			}}}
		})
	}
	for name, reason := range map[string]string{
		"redirect":  scaling.ReasonPrometheusUnreachable,
		"errortype": scaling.ReasonQueryFailed,
		"errorpage": scaling.ReasonPrometheusUnreachable,
		"forbidden": scaling.ReasonAuthSecretUnavailable,
	} {
		eventually(t, wait, name+" is unhealthy", wantCondition(op.ns, name, elastiv1alpha1.ConditionTriggersHealthy, metav1.ConditionFalse, reason))
	}
	// The three conditions above came from their servers' answers; each
	// query carried the token the operator may read.
	for len(calls) > 0 {
		if got := <-calls; got != "Bearer "+token {
			t.Errorf("a server got Authorization %q, want the token the operator may read", got)
		}
	}
	select {
	case got := <-forbiddenCalls:
		t.Errorf("the server of the trigger whose Secret the operator may not read was called, Authorization %q", got)
	default:
	}

	leaked := func(s string) bool { return strings.Contains(s, "ECHO") || strings.Contains(s, token) }
	for name := range servers {
		for _, c := range getES(t, op.ns, name).Status.Conditions {
			if leaked(c.Message) {
				t.Errorf("%s: condition %s carries what its server wrote: %q", name, c.Type, c.Message)
			}
		}
	}
	list := &eventsv1.EventList{}
	if err := k8s.List(context.Background(), list, client.InNamespace(op.ns)); err != nil {
		t.Fatal(err)
	}
	for _, e := range list.Items {
		if leaked(e.Note) {
			t.Errorf("Event %s on %s carries what a server wrote: %q", e.Reason, e.Regarding.Name, e.Note)
		}
	}
	select {
	case got := <-elsewhere:
		t.Errorf("the host the redirect pointed at got a request, Authorization %q", got)
	default:
	}
	t.Logf("TriggersHealthy of errortype: %s", meta.FindStatusCondition(getES(t, op.ns, "errortype").Status.Conditions, elastiv1alpha1.ConditionTriggersHealthy).Message)
	t.Logf("TriggersHealthy of forbidden: %s", meta.FindStatusCondition(getES(t, op.ns, "forbidden").Status.Conditions, elastiv1alpha1.ConditionTriggersHealthy).Message)
}
