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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"
	"sigs.k8s.io/controller-runtime/pkg/client"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/scaling"
)

func newStatusCommand(o Options, kf *kubeFlags) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "status NAME",
		Short: "Explain an ElastiService: conditions, ports, triggers and why it is or is not scaling down",
		Example: `  kubectl elasti status httpbin -n demo
  kubectl elasti status httpbin -o yaml`,
		Args: exactlyOneName,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(output, outputTable, outputJSON, outputYAML); err != nil {
				return err
			}
			s, err := kf.connect()
			if err != nil {
				return err
			}
			return runStatus(cmd.Context(), o, s.client, client.ObjectKey{Namespace: s.namespace, Name: args[0]}, output)
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "output format: json or yaml (the ElastiService object)")
	return cmd
}

func runStatus(ctx context.Context, o Options, c client.Client, key client.ObjectKey, output string) error {
	es := &elastiv1alpha1.ElastiService{}
	if err := c.Get(ctx, key, es); err != nil {
		return explain(err, esCall("get", key.Namespace, key.Name))
	}
	if output == outputJSON || output == outputYAML {
		return printObject(o.Out, es, output)
	}
	return describe(o.Out, es, readScale(ctx, c, es), o.Clock.Now())
}

// describe writes the human report of `status`.
func describe(w io.Writer, es *elastiv1alpha1.ElastiService, sc scaleReading, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	field := func(name, value string) { fmt.Fprintf(tw, "%s:\t%s\n", name, value) }
	ref := es.Spec.ScaleTargetRef

	field("Name", es.Name)
	field("Namespace", es.Namespace)
	field("Service", es.Spec.Service)
	field("Target", fmt.Sprintf("%s/%s (%s)", ref.Kind, ref.Name, ref.APIVersion))
	if sc.err != nil {
		field("Replicas", fmt.Sprintf("unknown (min %d): %v", es.Spec.MinTargetReplicas, sc.err))
	} else {
		field("Replicas", fmt.Sprintf("%d current, %d desired, min %d", sc.current, sc.desired, es.Spec.MinTargetReplicas))
	}
	field("Mode", orNone(string(es.Status.Mode)))
	if wp := es.Status.WakeProgress; wp != nil {
		field("Waking", wakingLine(*wp, now))
	}
	field("Cooldown", fmt.Sprintf("%ds", es.Spec.CooldownPeriod))
	if g := es.Spec.ScaleDownGracePeriod; g != "" {
		field("Grace period", g+" before a scale-down, instead of the operator's --grace-period")
	}
	if p := es.Spec.EnabledPeriod; p != nil {
		field("Enabled period", fmt.Sprintf("%q for %s (%s)", p.Schedule, p.Duration, scaling.ZoneName(p.TimeZone)))
	}
	if p := es.Spec.PreWarm; p != nil {
		field("Pre-warm", preWarmLine(*p, now))
	}
	if es.Spec.PreWarm != nil || es.Status.LastPreWarmTime != nil {
		field("Last pre-warm", ago(now, es.Status.LastPreWarmTime))
	}
	if a := es.Spec.Autoscaler; a != nil {
		field("Autoscaler", fmt.Sprintf("%s %s", a.Type, a.Name))
	}
	if anns := elastiAnnotations(es); anns != "" {
		field("Annotations", anns)
	}
	field("Last wake", ago(now, es.Status.LastScaledUpTime))
	field("Last sleep", ago(now, es.Status.LastScaledDownTime))
	if t := es.Status.LastSleepCancelledTime; t != nil {
		field("Last sleep cancelled", ago(now, t)+": traffic seen during the confirmation window")
	}
	field("Last reconcile", ago(now, es.Status.LastReconciledTime))
	if es.Status.ObservedGeneration != 0 && es.Status.ObservedGeneration != es.Generation {
		field("Observed", fmt.Sprintf("generation %d of %d: the operator has not caught up with the latest spec", es.Status.ObservedGeneration, es.Generation))
	}
	field("Scaling down", scaleDownVerdict(es, now))
	if err := tw.Flush(); err != nil {
		return err
	}

	fmt.Fprintln(w, "\nConditions:")
	if len(es.Status.Conditions) == 0 {
		fmt.Fprintln(w, "  none yet")
	} else {
		tw = tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
		fmt.Fprintln(tw, "  TYPE\tSTATUS\tREASON\tAGE\tMESSAGE")
		for _, c := range es.Status.Conditions {
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", c.Type, c.Status, orNone(c.Reason), age(now, &c.LastTransitionTime), c.Message)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}

	fmt.Fprintln(w, "\nProxy ports:")
	if len(es.Status.ProxyPorts) == 0 {
		fmt.Fprintln(w, "  none allocated")
	} else {
		tw = tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
		fmt.Fprintln(tw, "  NAME\tPORT\tPROTOCOL\tAPP-PROTOCOL\tRESOLVER-PORT")
		for _, p := range es.Status.ProxyPorts {
			fmt.Fprintf(tw, "  %s\t%d\t%s\t%s\t%d\n", orNone(p.Name), p.Port, orNone(p.Protocol), orNone(p.AppProtocol), p.ResolverPort)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}

	if err := describeLedger(w, es, now); err != nil {
		return err
	}

	fmt.Fprintln(w, "\nTriggers:")
	if len(es.Spec.Triggers) == 0 {
		fmt.Fprintln(w, "  none: the target never sleeps on its own")
		return nil
	}
	for i, t := range es.Spec.Triggers {
		fmt.Fprintf(w, "  [%d] %s\n", i, t.Type)
		tw = tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
		sub := func(name, value string) { fmt.Fprintf(tw, "      %s:\t%s\n", name, value) }
		switch t.Type {
		case elastiv1alpha1.TriggerTypePodMetrics:
			// A podMetrics trigger scrapes the pods: no query or server.
			md := t.Metadata
			path := orDefault(md.Path, "/metrics")
			labels := ""
			if len(md.Labels) > 0 {
				labels = scaling.LabelText(md.Labels)
			}
			sub("Scrapes", fmt.Sprintf("%s%s from port %d of each ready pod", md.MetricName, labels, md.Port)+", at "+path)
			threshold := "none: the trigger is unhealthy until one is set"
			if md.Threshold != nil {
				threshold = string(*md.Threshold) + " per second; a rate below it over the cooldown is idle"
			}
			sub("Threshold", threshold)
		case elastiv1alpha1.TriggerTypeNetwork:
			// A network trigger has no query or server: only a threshold.
			threshold := fmt.Sprintf("the operator's --network-threshold (%g B/s unless set)", float64(scaling.DefaultNetworkThreshold))
			if t.Metadata.Threshold != nil {
				threshold = string(*t.Metadata.Threshold) + " B/s"
			}
			sub("Reads", "bytes the ready pods received, from their nodes' kubelets, beyond their probes")
			sub("Threshold", threshold+"; a rate below it over the cooldown is idle")
		default:
			sub("Query", orNone(t.Metadata.Query))
			threshold := "0 (default)"
			if t.Metadata.Threshold != nil {
				threshold = string(*t.Metadata.Threshold)
			}
			sub("Threshold", threshold+"; a value below it is idle")
			sub("Server", orDefault(t.Metadata.ServerAddress, "the operator's --prometheus-address"))
			if t.Metadata.UptimeFilter != "" {
				sub("Uptime filter", t.Metadata.UptimeFilter)
			}
		}
		sub("Last result", triggerResult(es.Status.Conditions, i))
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return nil
}

// preWarmLine words a pre-warm schedule and its next firing, with the
// operator's own parser, in the schedule's zone.
func preWarmLine(p elastiv1alpha1.PreWarm, now time.Time) string {
	line := fmt.Sprintf("%q (%s)", p.Schedule, scaling.ZoneName(p.TimeZone))
	pw, err := scaling.ParsePreWarm(p)
	if err != nil {
		return line + "; invalid, never fires: " + err.Error()
	}
	next := pw.Next(now)
	if next.IsZero() {
		return line + "; never fires again"
	}
	return fmt.Sprintf("%s; next in %s (%s)", line, duration.HumanDuration(next.Sub(now)), next.Format("2006-01-02 15:04 MST"))
}

// wakingLine words status.wakeProgress: the phase, the time since the
// wake's scale write, what the phase waits for and the pod it was read from.
func wakingLine(wp elastiv1alpha1.WakeProgress, now time.Time) string {
	line := fmt.Sprintf("%s (%s)", wp.Phase, duration.HumanDuration(max(now.Sub(wp.StartTime.Time), 0)))
	if wp.Message != "" {
		line += " — " + wp.Message
	}
	if wp.Pod != "" {
		line += "; pod " + wp.Pod
	}
	return line
}

func ago(now time.Time, t *metav1.Time) string {
	if t == nil || t.IsZero() {
		return "never"
	}
	return fmt.Sprintf("%s ago (%s)", age(now, t), t.UTC().Format(time.RFC3339))
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// elastiAnnotations lists the elasti.dev annotations a user set, sorted.
func elastiAnnotations(es *elastiv1alpha1.ElastiService) string {
	var out []string
	for k, v := range es.Annotations {
		if strings.HasPrefix(k, elastiGroup+"/") {
			out = append(out, k+"="+v)
		}
	}
	sort.Strings(out)
	return strings.Join(out, ", ")
}

// triggerResult says what the last evaluation found for trigger i, read from
// the Idle and TriggersHealthy conditions. The operator prefixes a message
// that concerns one trigger with "trigger <i>: ".
func triggerResult(conds []metav1.Condition, i int) string {
	prefix := fmt.Sprintf("trigger %d: ", i)
	health := meta.FindStatusCondition(conds, elastiv1alpha1.ConditionTriggersHealthy)
	idle := meta.FindStatusCondition(conds, elastiv1alpha1.ConditionIdle)
	if health != nil && health.Status == metav1.ConditionFalse {
		if rest, ok := strings.CutPrefix(health.Message, prefix); ok {
			return fmt.Sprintf("unhealthy (%s): %s", health.Reason, rest)
		}
	}
	if idle != nil {
		switch idle.Status {
		case metav1.ConditionTrue:
			return "idle: " + idle.Message
		case metav1.ConditionFalse:
			if rest, ok := strings.CutPrefix(idle.Message, prefix); ok {
				return "active: " + rest
			}
		}
	}
	if health != nil && health.Status == metav1.ConditionFalse {
		return fmt.Sprintf("no result recorded: the evaluation stopped at an unhealthy trigger (%s)", health.Reason)
	}
	if idle != nil && idle.Status == metav1.ConditionFalse {
		return fmt.Sprintf("no result recorded: Idle=False (%s): %s", idle.Reason, idle.Message)
	}
	if idle != nil && idle.Message != "" {
		return "unknown: " + idle.Message
	}
	return "unknown: not evaluated yet"
}
