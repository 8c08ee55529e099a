//go:build bench

package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// The resolver's own profiles under the bench's loads (the bench overlay
// runs it with --profiling). Each is saved next to latest.md, and its
// heaviest functions go into the report's notes.

// profileResolver fetches /debug/pprof/<query> from the resolver pod at
// podIP, saves it as name in the output directory and returns the top of
// `go tool pprof -top` for it (sample is its -sample_index, or empty).
func (b *bench) profileResolver(ctx context.Context, podIP, query, name, sample string) (string, error) {
	body, err := b.scrape(ctx, "http://"+net.JoinHostPort(podIP, "8012")+"/debug/pprof/"+query)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(b.out, 0o755); err != nil {
		return "", err
	}
	file := filepath.Join(b.out, name)
	if err := os.WriteFile(file, []byte(body), 0o644); err != nil {
		return "", err
	}
	args := []string{"tool", "pprof", "-top", "-nodecount=8"}
	if sample != "" {
		args = append(args, "-sample_index="+sample)
	}
	out, err := exec.CommandContext(ctx, "go", append(args, file)...).Output()
	if err != nil {
		return "", fmt.Errorf("go tool pprof %s: %w", file, err)
	}
	return topLines(string(out)), nil
}

// topLines keeps the function rows of `go tool pprof -top` output, each as
// "flat% function", joined with "; ".
func topLines(out string) string {
	var rows []string
	started := false
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) > 0 && f[0] == "flat" {
			started = true
			continue
		}
		if !started || len(f) < 6 {
			continue
		}
		rows = append(rows, f[1]+" "+strings.Join(f[5:], " "))
	}
	return strings.Join(rows, "; ")
}
