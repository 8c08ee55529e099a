package cli

import (
	"fmt"

	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"elasti.dev/elasti/internal/contract"
)

func newKeepAwakeCommand(o Options, kf *kubeFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "keep-awake NAME",
		Short: "Keep an ElastiService's target from being scaled to zero",
		Long: `keep-awake sets the annotation ` + contract.AnnotationKeepAwake + `=` + contract.KeepAwakeOn + `. While it is set the
operator never scales the target to zero, and wakes it if it is asleep.
It needs RBAC permission to patch elastiservices.elasti.dev.`,
		Example: `  kubectl elasti keep-awake httpbin -n demo`,
		Args:    exactlyOneName,
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := kf.connect()
			if err != nil {
				return err
			}
			key := client.ObjectKey{Namespace: s.namespace, Name: args[0]}
			on := contract.KeepAwakeOn
			if _, err := patchAnnotation(cmd.Context(), s.client, key, contract.AnnotationKeepAwake, &on); err != nil {
				return err
			}
			fmt.Fprintf(o.Out, "elastiservice %s kept awake: %s=%s; `kubectl elasti allow-sleep %s -n %s` lets it sleep again\n",
				key, contract.AnnotationKeepAwake, contract.KeepAwakeOn, key.Name, key.Namespace)
			return nil
		},
	}
}

func newAllowSleepCommand(o Options, kf *kubeFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "allow-sleep NAME",
		Short: "Undo keep-awake: let the operator scale the target to zero again",
		Long: `allow-sleep removes the annotation ` + contract.AnnotationKeepAwake + `. The target sleeps again
once its triggers report idle for the cooldown. It needs RBAC permission to
patch elastiservices.elasti.dev.`,
		Example: `  kubectl elasti allow-sleep httpbin -n demo`,
		Args:    exactlyOneName,
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := kf.connect()
			if err != nil {
				return err
			}
			key := client.ObjectKey{Namespace: s.namespace, Name: args[0]}
			if _, err := patchAnnotation(cmd.Context(), s.client, key, contract.AnnotationKeepAwake, nil); err != nil {
				return err
			}
			fmt.Fprintf(o.Out, "elastiservice %s may sleep: %s removed\n", key, contract.AnnotationKeepAwake)
			return nil
		},
	}
}
