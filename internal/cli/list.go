package cli

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
)

func newListCommand(o Options, kf *kubeFlags) *cobra.Command {
	var (
		allNamespaces bool
		output        string
	)
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List ElastiServices with their mode, replicas and idle time",
		Example: `  kubectl elasti list
  kubectl elasti list -A -o wide
  kubectl elasti list -n demo -o yaml`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(output, outputTable, outputWide, outputJSON, outputYAML); err != nil {
				return err
			}
			s, err := kf.connect()
			if err != nil {
				return err
			}
			ns := s.namespace
			if allNamespaces {
				ns = ""
			}
			return runList(cmd.Context(), o, s.client, ns, output)
		},
	}
	cmd.Flags().BoolVarP(&allNamespaces, "all-namespaces", "A", false, "list ElastiServices in every namespace")
	cmd.Flags().StringVarP(&output, "output", "o", "", "output format: wide, json or yaml")
	return cmd
}

// runList lists the ElastiServices of namespace ns ("" for all) and prints
// them. A target whose /scale cannot be read shows "?" and a warning; it does
// not fail the whole list.
func runList(ctx context.Context, o Options, c client.Client, ns, output string) error {
	list := &elastiv1alpha1.ElastiServiceList{}
	var opts []client.ListOption
	if ns != "" {
		opts = append(opts, client.InNamespace(ns))
	}
	if err := c.List(ctx, list, opts...); err != nil {
		return explain(err, esCall("list", ns, ""))
	}
	sort.Slice(list.Items, func(i, j int) bool {
		a, b := list.Items[i], list.Items[j]
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		return a.Name < b.Name
	})
	if output == outputJSON || output == outputYAML {
		return printObject(o.Out, list, output)
	}
	if len(list.Items) == 0 {
		if ns == "" {
			fmt.Fprintln(o.ErrOut, "No ElastiServices found.")
		} else {
			fmt.Fprintf(o.ErrOut, "No ElastiServices found in namespace %s.\n", ns)
		}
		return nil
	}
	now := o.Clock.Now()
	rows := make([]listRow, 0, len(list.Items))
	for i := range list.Items {
		es := &list.Items[i]
		sc := readScale(ctx, c, es)
		if sc.err != nil {
			fmt.Fprintf(o.ErrOut, "warning: %s/%s: replicas unknown: %v\n", es.Namespace, es.Name, sc.err)
		}
		rows = append(rows, newListRow(es, sc, now))
	}
	return writeTable(o.Out, rows, output == outputWide)
}

// listRow is one line of `list`, every cell already formatted.
type listRow struct {
	Namespace, Name, Service, Target, Mode, Replicas, IdleFor, LastWake string
	// AtZero is the share of the ElastiService's life spent at zero
	// (status.ledger).
	AtZero string
	// Columns added by -o wide.
	Desired, Ready, Idle, Ports, Age string
}

// unknownReplicas is the REPLICAS cell of a target whose /scale failed.
const unknownReplicas = "?"

// newListRow formats one ElastiService.
func newListRow(es *elastiv1alpha1.ElastiService, sc scaleReading, now time.Time) listRow {
	r := listRow{
		Namespace: es.Namespace,
		Name:      es.Name,
		Service:   es.Spec.Service,
		Target:    es.Spec.ScaleTargetRef.Kind + "/" + es.Spec.ScaleTargetRef.Name,
		Mode:      orNone(string(es.Status.Mode)),
		IdleFor:   none,
		LastWake:  age(now, es.Status.LastScaledUpTime),
		AtZero:    atZeroShare(es, now),
		Ready:     conditionStatus(es, elastiv1alpha1.ConditionReady),
		Idle:      conditionStatus(es, elastiv1alpha1.ConditionIdle),
		Ports:     formatPorts(es.Status.ProxyPorts),
		Age:       age(now, &es.CreationTimestamp),
	}
	if sc.err != nil {
		r.Replicas = fmt.Sprintf("%s/%d", unknownReplicas, es.Spec.MinTargetReplicas)
		r.Desired = unknownReplicas
	} else {
		r.Replicas = fmt.Sprintf("%d/%d", sc.current, es.Spec.MinTargetReplicas)
		r.Desired = fmt.Sprint(sc.desired)
	}
	if es.Status.Mode == elastiv1alpha1.ModeProxy {
		r.IdleFor = age(now, es.Status.LastScaledDownTime)
	}
	return r
}

func orNone(s string) string {
	if s == "" {
		return none
	}
	return s
}

func conditionStatus(es *elastiv1alpha1.ElastiService, typ string) string {
	if c := meta.FindStatusCondition(es.Status.Conditions, typ); c != nil {
		return string(c.Status)
	}
	return none
}

// formatPorts writes proxy ports as name:port->resolverPort, comma separated.
func formatPorts(ports []elastiv1alpha1.ProxyPort) string {
	if len(ports) == 0 {
		return none
	}
	parts := make([]string, 0, len(ports))
	for _, p := range ports {
		s := fmt.Sprintf("%d->%d", p.Port, p.ResolverPort)
		if p.Name != "" {
			s = p.Name + ":" + s
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, ",")
}

// writeTable prints rows in kubectl's column layout.
func writeTable(w io.Writer, rows []listRow, wide bool) error {
	tw := tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)
	header := []string{"NAMESPACE", "NAME", "SERVICE", "TARGET", "MODE", "REPLICAS", "IDLE-FOR", "LAST-WAKE", "AT-ZERO"}
	if wide {
		header = append(header, "DESIRED", "READY", "IDLE", "PORTS", "AGE")
	}
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	for _, r := range rows {
		cells := []string{r.Namespace, r.Name, r.Service, r.Target, r.Mode, r.Replicas, r.IdleFor, r.LastWake, r.AtZero}
		if wide {
			cells = append(cells, r.Desired, r.Ready, r.Idle, r.Ports, r.Age)
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	return tw.Flush()
}
