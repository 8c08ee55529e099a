package cluster

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// LocalConfig is DefaultConfig completed for this checkout: the module root
// found from the working directory, and binDir (when empty, the directory
// hack/k8s-binaries.sh builds or reuses).
func LocalConfig(binDir string) (Config, error) {
	cfg := DefaultConfig()
	root, err := moduleRoot()
	if err != nil {
		return cfg, err
	}
	cfg.RepoRoot = root
	if binDir == "" {
		cmd := exec.Command(filepath.Join(root, "hack", "k8s-binaries.sh"))
		cmd.Stderr = os.Stderr
		out, err := cmd.Output()
		if err != nil {
			return cfg, fmt.Errorf("hack/k8s-binaries.sh: %w", err)
		}
		binDir = strings.TrimSpace(string(out))
	}
	cfg.BinDir = binDir
	return cfg, nil
}

// moduleRoot walks up from the working directory to elasti's go.mod.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && strings.Contains(string(b), "module elasti.dev/elasti") {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("not inside the elasti module")
		}
		dir = parent
	}
}
