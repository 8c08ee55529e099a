package controller

import (
	"context"
	"errors"

	"sigs.k8s.io/controller-runtime/pkg/client"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/controller/plan"
	"elasti.dev/elasti/internal/controller/ports"
	"elasti.dev/elasti/internal/controller/refusals"
	"elasti.dev/elasti/internal/scaling"
)

// claim makes the claims in this process's memory that a reconcile needs
// before it decides, from what observe read, and adds what they give to o:
//   - the resolver ports of the Service's ports (package ports): allocated,
//     or given back when the Service's shape is refused, since such a
//     Service never enters the data path;
//   - the watch of the target's kind (package targets), started once the
//     target was read through /scale, so that a kind the API server does not
//     serve is reported as a target not found rather than watched; then
//     whether that watch can serve.
//
// Neither writes to the API server. They stand apart from observe so that
// observe only reads (docs/architecture.md, "One reconcile").
func (r *Reconciler) claim(ctx context.Context, es *elastiv1alpha1.ElastiService, l listed, o *plan.Observed) error {
	if l.service != nil {
		if refusals.Service(l.service).Refused() {
			r.ports.Release(client.ObjectKeyFromObject(es))
		} else {
			o.Service.Ports, o.Service.PortsErr = r.ports.Allocate(ctx, es, l.service)
			if o.Service.PortsErr != nil && !errors.Is(o.Service.PortsErr, ports.ErrPortsExhausted) {
				return o.Service.PortsErr
			}
		}
	}
	if !o.Target.Found {
		return nil
	}
	gvk, err := scaling.TargetGVK(es.Spec.ScaleTargetRef)
	if err != nil {
		return nil
	}
	if err := r.targets.Ensure(gvk); err != nil {
		return err
	}
	o.Target.WatchReason, o.Target.WatchErr = r.targets.Problem(ctx, es.Namespace, gvk)
	return nil
}
