//go:build bench

package main

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"elasti.dev/elasti/bench/report"
)

// The API server's side of (a): how long it took to answer the /scale
// writes of the tails loop, and how long its etcd writes of Deployments
// took, from its own histograms scraped before and after the loop. A wake's
// (a) ends at the watch event of its /scale write, so a slow write is a
// slow (a) whatever Elasti did.

const (
	apiserverRequests = "apiserver_request_duration_seconds"
	etcdRequests      = "etcd_request_duration_seconds"
)

// apiserverReading is the two histograms at one moment.
type apiserverReading struct {
	scaleWrites, etcdWrites []report.Bucket
}

// apiserverScrape reads the API server's /metrics with the admin
// credentials; nil when it cannot.
func apiserverScrape(ctx context.Context) *apiserverReading {
	raw, err := kube.Clientset.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		logf("API server metrics: %v", err)
		return nil
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(string(raw)))
	if err != nil {
		logf("API server metrics: %v", err)
		return nil
	}
	return &apiserverReading{
		scaleWrites: sumHistograms(families[apiserverRequests], func(l map[string]string) bool {
			return l["resource"] == "deployments" && l["subresource"] == "scale" && l["verb"] == "PATCH"
		}),
		etcdWrites: sumHistograms(families[etcdRequests], func(l map[string]string) bool {
			return l["operation"] == "update" && l["resource"] == "deployments"
		}),
	}
}

// sumHistograms adds up the cumulative buckets of the series of f whose
// labels keep accepts.
func sumHistograms(f *dto.MetricFamily, keep func(map[string]string) bool) []report.Bucket {
	if f == nil {
		return nil
	}
	sums := map[float64]float64{}
	for _, m := range f.GetMetric() {
		labels := map[string]string{}
		for _, lp := range m.GetLabel() {
			labels[lp.GetName()] = lp.GetValue()
		}
		h := m.GetHistogram()
		if h == nil || !keep(labels) {
			continue
		}
		for _, bk := range h.GetBucket() {
			if !math.IsInf(bk.GetUpperBound(), 1) { // the count is +Inf's
				sums[bk.GetUpperBound()] += float64(bk.GetCumulativeCount())
			}
		}
		sums[math.Inf(1)] += float64(h.GetSampleCount())
	}
	out := make([]report.Bucket, 0, len(sums))
	for le, c := range sums {
		out = append(out, report.Bucket{UpperBound: le, Count: c})
	}
	slices.SortFunc(out, func(x, y report.Bucket) int { return cmp.Compare(x.UpperBound, y.UpperBound) })
	return out
}

// addAPIServer adds, for the loop, the share of /scale writes and of etcd
// Deployment writes slower than 25, 50 and 100 ms, and the p99 the
// histogram gives.
func (b *bench) addAPIServer(before, after *apiserverReading) {
	if before == nil || after == nil {
		b.add(skipped(secTails, "API server: /scale writes (the operator's PATCH of deployments/scale) during the loop", "%", nil, "the API server's /metrics could not be read"))
		return
	}
	for _, h := range []struct {
		what, metric  string
		before, after []report.Bucket
	}{
		{"API server: /scale writes (the operator's PATCH of deployments/scale)", apiserverRequests, before.scaleWrites, after.scaleWrites},
		{"API server → etcd: Deployment updates", etcdRequests, before.etcdWrites, after.etcdWrites},
	} {
		delta := report.SubtractBuckets(h.after, h.before)
		slices.SortFunc(delta, func(x, y report.Bucket) int { return cmp.Compare(x.UpperBound, y.UpperBound) })
		if len(delta) == 0 || delta[len(delta)-1].Count <= 0 {
			b.add(skipped(secTails, h.what+" during the loop", "%", nil, "none counted"))
			continue
		}
		total := delta[len(delta)-1].Count
		src := fmt.Sprintf("%.0f in the loop, from the API server's %s histogram scraped before and after", total, h.metric)
		for _, bk := range delta {
			if bk.UpperBound != 0.025 && bk.UpperBound != 0.05 && bk.UpperBound != 0.1 {
				continue
			}
			over := (total - bk.Count) / total * 100
			b.add(fig(secTails, fmt.Sprintf("%s slower than %.0f ms", h.what, bk.UpperBound*1000), "%", []float64{over}, nil, src))
		}
		b.add(fig(secTails, h.what+", p99 (histogram estimate)", "ms", []float64{1000 * report.HistogramQuantile(0.99, delta)}, nil,
			src+"; linear inside the bucket, as histogram_quantile"))
	}
}

// countersBy adds up the series of the counter name in a Prometheus text
// exposition by the key that key gives their labels, leaving out those for
// which it says false. Empty when there is no such counter.
func countersBy(text, name string, key func(labels map[string]string) (string, bool)) map[string]float64 {
	out := map[string]float64{}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(text))
	if err != nil || families[name] == nil {
		return out
	}
	for _, m := range families[name].GetMetric() {
		labels := map[string]string{}
		for _, lp := range m.GetLabel() {
			labels[lp.GetName()] = lp.GetValue()
		}
		if k, ok := key(labels); ok {
			out[k] += m.GetCounter().GetValue()
		}
	}
	return out
}

// sumCounter adds up every series of the counter name; 0 when there is none.
func sumCounter(text, name string) float64 {
	return countersBy(text, name, func(map[string]string) (string, bool) { return "", true })[""]
}
