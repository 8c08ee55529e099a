package main

import (
	"flag"
	"io"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"elasti.dev/elasti/internal/admission"
)

func TestParseFlags(t *testing.T) {
	env := map[string]string{"POD_NAMESPACE": "platform"}
	getenv := func(k string) string { return env[k] }
	parse := func(args ...string) (options, error) {
		fs := flag.NewFlagSet("test", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		return parseFlags(fs, args, getenv, nil)
	}
	o, err := parse()
	if err != nil {
		t.Fatal(err)
	}
	got := []any{o.controller.ResolverNamespace, o.resolverServiceAccount, o.leaderElectionNamespace, o.controller.PortRangeStart, o.controller.PortRangeEnd, o.controller.PortQuarantine, o.controller.PollingInterval, o.activationAddr, o.activationAudiences}
	want := []any{"platform", "platform/elasti-resolver", "platform", int32(20000), int32(20999), 2 * time.Minute, 30 * time.Second, ":8013", []string{"elasti.dev/activation"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("defaults (-want +got)\n%s", diff)
	}
	if o.kubeAPIQPS != 200 || o.kubeAPIBurst != 400 || o.controller.TriggerWorkers != 16 || o.controller.TriggerEvaluationTimeout != 2*time.Minute {
		t.Errorf("API rate limit %v/%d, trigger workers %d, evaluation timeout %s; want 200/400, 16, 2m",
			o.kubeAPIQPS, o.kubeAPIBurst, o.controller.TriggerWorkers, o.controller.TriggerEvaluationTimeout)
	}
	o, err = parse("--port-range=30000-30009", "--watch-namespaces=a, b", "--grace-period=5s", "--activation-audiences=elasti", "--port-quarantine=0s")
	if err != nil {
		t.Fatal(err)
	}
	if o.controller.PortRangeStart != 30000 || o.controller.PortRangeEnd != 30009 || cmp.Diff([]string{"a", "b"}, o.controller.WatchNamespaces) != "" ||
		o.controller.GracePeriod != 5*time.Second || cmp.Diff([]string{"elasti"}, o.activationAudiences) != "" || o.controller.PortQuarantine != 0 {
		t.Errorf("parsed %+v", o)
	}
	// An empty list turns the audience requirement off.
	if o, err := parse("--activation-audiences="); err != nil || o.activationAudiences != nil {
		t.Errorf("--activation-audiences= gave %q, %v; want no audiences", o.activationAudiences, err)
	}
	if o.controller.MeasureRate {
		t.Error("the rate is measured while sleep gates hold with the metrics API off")
	}
	env["POD_NAME"] = "elasti-operator-0"
	if o, err := parse("--metrics-api-port=6443"); err != nil || !o.controller.MeasureRate {
		t.Errorf("--metrics-api-port=6443: MeasureRate %v, %v; want true", o.controller.MeasureRate, err)
	}
	for _, bad := range [][]string{{"--port-range=20999-20000"}, {"--port-range=x"}, {"--port-range=0-10"}, {"--resolver-service-account=nobody"}, {"--polling-interval=0s"}, {"--port-quarantine=-1s"},
		{"--trigger-workers=0"}, {"--trigger-evaluation-timeout=0s"}, {"--kube-api-qps=0"}, {"--kube-api-burst=0"}} {
		if _, err := parse(bad...); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}

func TestParseWebhookFlags(t *testing.T) {
	parse := func(args ...string) (options, error) {
		fs := flag.NewFlagSet("test", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		return parseFlags(fs, args, func(k string) string { return map[string]string{"POD_NAMESPACE": "platform"}[k] }, nil)
	}
	o, err := parse()
	if err != nil {
		t.Fatal(err)
	}
	// The defaults are the kustomize install's names (config/webhook,
	// config/operator), so its Deployment need not pass them.
	want := admission.Config{Port: 9443, CertDir: "/var/run/elasti/webhook", Namespace: "platform",
		SecretName: "elasti-webhook-cert", ServiceName: "elasti-operator", ConfigurationName: "elasti-webhook",
		CAConfigMapName: "elasti-activation-ca", ReviewAccess: true,
		Limits: admission.Limits{MaxHeldRequests: 1000, MaxHoldTimeout: time.Hour}}
	got := o.webhook
	servers := got.Limits.TriggerServers
	got.Limits.TriggerServers = nil
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("defaults (-want +got)\n%s", diff)
	}
	if servers == nil || servers.String() != "*.svc,*.svc.cluster.local" || servers != o.triggerServers {
		t.Errorf("--trigger-servers default: webhook has %v, evaluator %v; want the same *.svc,*.svc.cluster.local", servers, o.triggerServers)
	}
	if o, err := parse("--trigger-servers=*", "--max-held-requests-ceiling=0", "--hold-timeout-ceiling=5m"); err != nil ||
		o.triggerServers.String() != "*" || o.webhook.Limits.MaxHeldRequests != 0 || o.webhook.Limits.MaxHoldTimeout != 5*time.Minute {
		t.Errorf("limits set by flags: %+v, %v", o.webhook.Limits, err)
	}
	if o, err := parse("--admission-access-review=false"); err != nil || o.webhook.ReviewAccess {
		t.Errorf("--admission-access-review=false: %+v, %v; want the access review off", o.webhook, err)
	}
	if o, err := parse("--webhook-port=0", "--webhook-secret="); err != nil || o.webhook.Port != 0 {
		t.Errorf("--webhook-port=0 turns the webhook off, its other flags unchecked: %+v, %v", o.webhook, err)
	}
	for _, bad := range [][]string{{"--webhook-port=70000"}, {"--webhook-secret="}, {"--webhook-cert-dir="}, {"--webhook-configuration="},
		{"--trigger-servers=10.0.0.0/40"}, {"--max-held-requests-ceiling=-1"}} {
		if _, err := parse(bad...); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}
