package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// ExternalMetricsAPIService is the aggregation layer's one registration of
// external.metrics.k8s.io.
const ExternalMetricsAPIService = "v1beta1.external.metrics.k8s.io"

// TakeAPIService registers the APIService in file as name (one of the
// aggregation layer's group-versions, which have one server each) and waits
// until it is Available through service. restore registers the server of
// before again, as it was, and waits for it; or removes the new one when
// there was none. The tests and the bench use it to hand
// external.metrics.k8s.io from the Prometheus adapter to Elasti's operator
// for a while.
func (c Config) TakeAPIService(ctx context.Context, name, file, service string) (restore func(context.Context) error, err error) {
	before, err := c.Kubectl(ctx, "", "get", "apiservice", name, "-o", "json", "--ignore-not-found")
	if err != nil {
		return nil, err
	}
	restore = func(ctx context.Context) error {
		if before == "" {
			_, err := c.Kubectl(ctx, "", "delete", "apiservice", name, "--ignore-not-found")
			return err
		}
		var obj map[string]any
		if err := json.Unmarshal([]byte(before), &obj); err != nil {
			return fmt.Errorf("APIService %s as it was: %w", name, err)
		}
		meta, _ := obj["metadata"].(map[string]any)
		obj["metadata"] = map[string]any{"name": name, "labels": meta["labels"]}
		delete(obj, "status")
		svc := ""
		if spec, ok := obj["spec"].(map[string]any); ok {
			if s, ok := spec["service"].(map[string]any); ok {
				svc, _ = s["name"].(string)
			}
		}
		b, err := json.Marshal(obj)
		if err != nil {
			return err
		}
		if _, err := c.Kubectl(ctx, string(b), "apply", "--server-side", "--force-conflicts", "-f", "-"); err != nil {
			return err
		}
		return c.WaitAPIServiceAvailable(ctx, name, svc)
	}
	if _, err := c.Kubectl(ctx, "", "apply", "--server-side", "--force-conflicts", "-f", file); err != nil {
		return nil, err
	}
	if err := c.WaitAPIServiceAvailable(ctx, name, service); err != nil {
		return restore, err
	}
	return restore, nil
}

// WaitAPIServiceAvailable waits up to 2 minutes until APIService name
// reaches service and is Available.
func (c Config) WaitAPIServiceAvailable(ctx context.Context, name, service string) error {
	return c.waitFor(ctx, "APIService "+name, 2*time.Minute, func(ctx context.Context) error {
		out, err := c.Kubectl(ctx, "", "get", "apiservice", name,
			"-o", `jsonpath={.spec.service.name} {.status.conditions[?(@.type=="Available")].status}`)
		if err == nil && out != service+" True" {
			err = fmt.Errorf("APIService %s: %q, want %q", name, out, service+" True")
		}
		return err
	})
}
