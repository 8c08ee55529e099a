package e2e

import (
	"context"
	"fmt"

	"golang.org/x/sync/errgroup"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// CreateInParallel creates, for each i from from to to-1, the objects that
// objects(i) returns, in order, workers values of i at a time. It stops at
// the first error and returns it.
func CreateInParallel(ctx context.Context, c client.Client, workers, from, to int, objects func(i int) []client.Object) error {
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(workers)
	for i := from; i < to && ctx.Err() == nil; i++ {
		g.Go(func() error {
			for _, o := range objects(i) {
				if err := c.Create(ctx, o); err != nil {
					return fmt.Errorf("create %T %s/%s: %w", o, o.GetNamespace(), o.GetName(), err)
				}
			}
			return nil
		})
	}
	return g.Wait()
}
