package cluster

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// goEnv is the environment every build the harness starts runs with: the Go
// settings of hack/lib/goenv.sh (the local toolchain only, no VCS stamping, no
// DWARF), and static binaries.
func goEnv(extra ...string) []string {
	env := append(os.Environ(), "GOTOOLCHAIN=local", "GOFLAGS=-buildvcs=false -gcflags=all=-dwarf=false", "CGO_ENABLED=0", "GOOS=linux")
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
//
// With repoRoot set, the modules CoreDNS shares with Elasti (k8s.io/api,
// client-go, x/net, protobuf, ...) are raised to Elasti's versions where
// Elasti's are newer, so that the build reuses the packages Go has already
// compiled for Elasti's images (the same flags, goBuild's) instead of
// compiling a second set: on a first run on 2 CPUs that is most of CoreDNS's
// build.
func EnsureCoreDNS(ctx context.Context, cacheDir, repoRoot string, logf func(string, ...any)) (string, error) {
	dir := filepath.Join(cacheDir, "coredns-"+CoreDNSVersion)
	bin := filepath.Join(dir, "coredns")
	stamp := filepath.Join(dir, ".stamp")
	want := CoreDNSVersion + " plugins=" + strings.Join(corednsPlugins, ",")
	if b, err := os.ReadFile(stamp); err == nil && string(b) == want {
		if _, err := os.Stat(bin); err == nil {
			return bin, nil
		}
	}
	logf("building CoreDNS %s (once: about a minute alone on 2 CPUs, longer beside other builds; cached afterwards in %s)", CoreDNSVersion, dir)
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
	if repoRoot != "" {
		if err := alignModules(ctx, work, repoRoot); err != nil {
			logf("CoreDNS builds with its own module versions: %v", err)
		}
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

// alignModules adds to the module in dir a requirement of each module it
// shares with the module in repoRoot at repoRoot's version (minimal version
// selection keeps the newer of the two).
func alignModules(ctx context.Context, dir, repoRoot string) error {
	theirs, err := moduleVersions(ctx, dir, "-mod=mod")
	if err != nil {
		return err
	}
	ours, err := moduleVersions(ctx, repoRoot)
	if err != nil {
		return err
	}
	args := []string{"mod", "edit"}
	for _, r := range sharedRequirements(theirs, ours) {
		args = append(args, "-require="+r)
	}
	if len(args) == 2 {
		return nil
	}
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	cmd.Env = goEnv()
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go mod edit: %w\n%s", err, b)
	}
	return nil
}

// moduleVersions lists the build list of the module in dir: path -> version.
func moduleVersions(ctx context.Context, dir string, flags ...string) (map[string]string, error) {
	args := append([]string{"list", "-m"}, flags...)
	args = append(args, "-f", "{{if not .Main}}{{.Path}} {{.Version}}{{end}}", "all")
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	cmd.Env = goEnv()
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list -m all in %s: %w", dir, err)
	}
	versions := map[string]string{}
	for _, line := range strings.Split(string(out), "\n") {
		if path, version, ok := strings.Cut(strings.TrimSpace(line), " "); ok && version != "" {
			versions[path] = version
		}
	}
	return versions, nil
}

// sharedRequirements are the path@version requirements that give each module
// in theirs that ours also has ours' version, where the two differ, sorted.
func sharedRequirements(theirs, ours map[string]string) []string {
	var reqs []string
	for path, v := range theirs {
		if o, ok := ours[path]; ok && o != v {
			reqs = append(reqs, path+"@"+o)
		}
	}
	slices.Sort(reqs)
	return reqs
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
