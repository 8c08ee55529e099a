package cluster

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// goEnv is the environment every build the harness starts runs with: the local
// toolchain only, no VCS stamping, and static binaries.
func goEnv(extra ...string) []string {
	env := append(os.Environ(), "GOTOOLCHAIN=local", "GOFLAGS=-buildvcs=false", "CGO_ENABLED=0", "GOOS=linux")
	return append(env, extra...)
}

// goBuild builds pkg (run from dir) into out as a static, stripped binary.
func goBuild(ctx context.Context, dir, pkg, out string, extraFlags ...string) error {
	args := append([]string{"build", "-trimpath", "-ldflags=-s -w", "-o", out}, extraFlags...)
	args = append(args, pkg)
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	cmd.Env = goEnv()
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %w\n%s", pkg, err, b)
	}
	return nil
}

// CoreDNSVersion is the CoreDNS release the cluster's DNS runs.
const CoreDNSVersion = "v1.15.0"

// corednsPlugins are the only plugins compiled in. There is deliberately no
// forward plugin: the cluster's DNS answers for cluster.local and nothing else.
var corednsPlugins = []string{"errors", "health", "ready", "kubernetes", "cache", "loadbalance", "log"}

// EnsureCoreDNS builds CoreDNS from the Go module proxy, in a throwaway module,
// into cacheDir/coredns-<version>/coredns, unless it is already there. It
// returns the binary's path.
func EnsureCoreDNS(ctx context.Context, cacheDir string, logf func(string, ...any)) (string, error) {
	dir := filepath.Join(cacheDir, "coredns-"+CoreDNSVersion)
	bin := filepath.Join(dir, "coredns")
	stamp := filepath.Join(dir, ".stamp")
	want := CoreDNSVersion + " plugins=" + strings.Join(corednsPlugins, ",")
	if b, err := os.ReadFile(stamp); err == nil && string(b) == want {
		if _, err := os.Stat(bin); err == nil {
			return bin, nil
		}
	}
	logf("building CoreDNS %s (once: about a minute on 2 CPUs; cached afterwards in %s)", CoreDNSVersion, dir)
	start := time.Now()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	work, err := os.MkdirTemp("", "elasti-coredns-build-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(work)
	gomod := fmt.Sprintf("module elasti.local/coredns-build\n\ngo 1.26\n\nrequire github.com/coredns/coredns %s\n", CoreDNSVersion)
	var imports strings.Builder
	for _, p := range corednsPlugins {
		fmt.Fprintf(&imports, "\t_ \"github.com/coredns/coredns/plugin/%s\"\n", p)
	}
	main := "// Command coredns is CoreDNS with only the plugins the local cluster uses.\npackage main\n\nimport (\n" +
		imports.String() + "\n\t\"github.com/coredns/coredns/coremain\"\n)\n\nfunc main() { coremain.Run() }\n"
	if err := os.WriteFile(filepath.Join(work, "go.mod"), []byte(gomod), 0o644); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(work, "main.go"), []byte(main), 0o644); err != nil {
		return "", err
	}
	stopTicker := tickEvery(time.Minute, func(d time.Duration) { logf("  still building CoreDNS: %s so far", d.Round(time.Second)) })
	err = goBuild(ctx, work, ".", bin+".tmp", "-mod=mod")
	stopTicker()
	if err != nil {
		return "", fmt.Errorf("build CoreDNS: %w", err)
	}
	if err := os.Rename(bin+".tmp", bin); err != nil {
		return "", err
	}
	logf("built CoreDNS in %s", time.Since(start).Round(time.Second))
	return bin, os.WriteFile(stamp, []byte(want), 0o644)
}

// tickEvery calls f with the time elapsed every period until the returned
// stop is called, so that a long first build does not look hung.
func tickEvery(period time.Duration, f func(elapsed time.Duration)) (stop func()) {
	start, done := time.Now(), make(chan struct{})
	t := time.NewTicker(period)
	go func() {
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				f(time.Since(start))
			}
		}
	}()
	return func() { close(done) }
}
