package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/contract"
)

// defaultWakeTimeout bounds `wake --wait`.
const defaultWakeTimeout = 5 * time.Minute

func newWakeCommand(o Options, kf *kubeFlags) *cobra.Command {
	var (
		waitAwake bool
		timeout   time.Duration
	)
	cmd := &cobra.Command{
		Use:   "wake NAME",
		Short: "Wake an ElastiService's target now, without waiting for a request",
		Long: `wake sets the annotation ` + contract.AnnotationWakeNow + `; the operator scales the target to
minTargetReplicas, records the wake and removes the annotation. The cooldown
counts from the wake. It needs RBAC permission to patch
elastiservices.elasti.dev, and to get them with --wait.`,
		Example: `  kubectl elasti wake httpbin -n demo
  kubectl elasti wake httpbin --wait --timeout 2m`,
		Args: exactlyOneName,
		RunE: func(cmd *cobra.Command, args []string) error {
			if timeout <= 0 {
				return usageError{msg: "--timeout must be positive"}
			}
			s, err := kf.connect()
			if err != nil {
				return err
			}
			key := client.ObjectKey{Namespace: s.namespace, Name: args[0]}
			return runWake(cmd.Context(), o, s.client, key, waitAwake, timeout)
		},
	}
	cmd.Flags().BoolVar(&waitAwake, "wait", false, "wait until the ElastiService is in serve mode with Active=True")
	cmd.Flags().DurationVar(&timeout, "timeout", defaultWakeTimeout, "how long --wait waits")
	return cmd
}

func runWake(ctx context.Context, o Options, c client.Client, key client.ObjectKey, waitAwake bool, timeout time.Duration) error {
	start := o.Clock.Now()
	stamp := start.UTC().Format(time.RFC3339Nano)
	es, err := patchAnnotation(ctx, c, key, contract.AnnotationWakeNow, &stamp)
	if err != nil {
		return err
	}
	fmt.Fprintf(o.Out, "elastiservice %s: wake requested\n", key)
	if !waitAwake {
		return nil
	}
	err = wait.PollUntilContextTimeout(ctx, o.PollInterval, timeout, true, func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, key, es); err != nil {
			if apierrors.IsForbidden(err) || apierrors.IsNotFound(err) {
				return false, explain(err, esCall("get", key.Namespace, key.Name))
			}
			return false, nil // a transient failure: try again
		}
		return isAwake(es), nil
	})
	if err != nil {
		if wait.Interrupted(err) {
			return fmt.Errorf("elastiservice %s did not wake within %s: %s: %w", key, timeout, wakeProgress(es), err)
		}
		return err
	}
	fmt.Fprintf(o.Out, "elastiservice %s: awake (mode %s)\n", key, es.Status.Mode)
	return nil
}

// isAwake: the Service routes straight to a target that has replicas.
func isAwake(es *elastiv1alpha1.ElastiService) bool {
	return es.Status.Mode == elastiv1alpha1.ModeServe &&
		meta.IsStatusConditionTrue(es.Status.Conditions, elastiv1alpha1.ConditionActive)
}

// wakeProgress says where a wake stands, for a --wait that timed out.
func wakeProgress(es *elastiv1alpha1.ElastiService) string {
	if _, pending := es.Annotations[contract.AnnotationWakeNow]; pending {
		return fmt.Sprintf("the operator has not acted on %s yet; is it running?", contract.AnnotationWakeNow)
	}
	msg := "mode " + orNone(string(es.Status.Mode))
	if a := meta.FindStatusCondition(es.Status.Conditions, elastiv1alpha1.ConditionActive); a != nil {
		msg += fmt.Sprintf(", Active=%s (%s): %s", a.Status, a.Reason, a.Message)
	} else if es.Status.Mode == "" {
		msg += ": the operator has written no status yet"
	}
	if r := meta.FindStatusCondition(es.Status.Conditions, elastiv1alpha1.ConditionReady); r != nil && r.Status == metav1.ConditionFalse {
		msg += fmt.Sprintf("; Ready=False (%s): %s", r.Reason, r.Message)
	}
	return msg
}
