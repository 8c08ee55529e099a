//go:build bench

package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	"elasti.dev/elasti/test/e2e"
)

// Process memory, read from /proc on this machine: the cluster's containers
// are processes of this host.

// memMiB returns a process' VmRSS and VmHWM (peak RSS) in MiB.
func memMiB(pid int) (rss, peak float64, err error) {
	f, err := os.Open(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok || (k != "VmRSS" && k != "VmHWM") {
			continue
		}
		kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
		if err != nil {
			return 0, 0, err
		}
		if k == "VmRSS" {
			rss = kb / 1024
		} else {
			peak = kb / 1024
		}
	}
	return rss, peak, sc.Err()
}

// rssParts returns a process' anonymous and file-backed resident memory in
// MiB (RssAnon, RssFile): the heap and stacks, and the binary's pages it has
// touched.
func rssParts(pid int) (anon, file float64, err error) {
	data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		return 0, 0, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok || (k != "RssAnon" && k != "RssFile") {
			continue
		}
		kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
		if err != nil {
			return 0, 0, err
		}
		if k == "RssAnon" {
			anon = kb / 1024
		} else {
			file = kb / 1024
		}
	}
	return anon, file, nil
}

// resetPeak resets a process' VmHWM to its current RSS (clear_refs 5).
func resetPeak(pid int) error {
	return os.WriteFile(filepath.Join("/proc", strconv.Itoa(pid), "clear_refs"), []byte("5"), 0)
}

// componentPID returns the PID of the only pod of an Elasti component.
func componentPID(ctx context.Context, component labels.Set) (int, *corev1.Pod, error) {
	pods, err := kube.Pods(ctx, e2e.ElastiNamespace, component)
	if err != nil {
		return 0, nil, err
	}
	var running []corev1.Pod
	for _, p := range pods {
		if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
			running = append(running, p)
		}
	}
	if len(running) != 1 {
		return 0, nil, fmt.Errorf("%d running pods for %s, want 1", len(running), component)
	}
	pid, err := e2e.ContainerPID(&running[0])
	return pid, &running[0], err
}

// sampleRSS reads a component's RSS n times, one second apart.
func sampleRSS(ctx context.Context, component labels.Set, n int) ([]float64, error) {
	pid, _, err := componentPID(ctx, component)
	if err != nil {
		return nil, err
	}
	var xs []float64
	for i := range n {
		if i > 0 {
			select {
			case <-ctx.Done():
				return xs, ctx.Err()
			case <-time.After(time.Second):
			}
		}
		rss, _, err := memMiB(pid)
		if err != nil {
			return xs, err
		}
		xs = append(xs, rss)
	}
	return xs, nil
}
