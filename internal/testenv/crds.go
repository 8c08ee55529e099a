package testenv

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// Pinned versions of the modules whose CRDs Options.KEDAAndRollouts installs.
// They are not Go dependencies of Elasti: `go mod download` fetches them into
// the module cache.
const (
	KEDAModule     = "github.com/kedacore/keda/v2@v2.17.2"
	RolloutsModule = "github.com/argoproj/argo-rollouts@v1.8.3"
)

// kedaAndRolloutCRDs returns the paths of KEDA's ScaledObject CRD and Argo
// Rollouts' Rollout CRD.
func kedaAndRolloutCRDs() ([]string, error) {
	keda, err := moduleFile(KEDAModule, "config/crd/bases/keda.sh_scaledobjects.yaml")
	if err != nil {
		return nil, err
	}
	rollouts, err := moduleFile(RolloutsModule, "manifests/crds/rollout-crd.yaml")
	if err != nil {
		return nil, err
	}
	return []string{keda, rollouts}, nil
}

// moduleFile downloads module@version into the module cache (a no-op when it
// is there) and returns the path of one of its files.
func moduleFile(moduleAtVersion, path string) (string, error) {
	cmd := exec.Command("go", "mod", "download", "-json", moduleAtVersion)
	// Outside the main module, so go.mod is never touched.
	cmd.Dir = os.TempDir()
	cmd.Env = append(os.Environ(), "GOTOOLCHAIN=local", "GOFLAGS=")
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go mod download %s: %w: %s%s", moduleAtVersion, err, errOut.String(), out.String())
	}
	var info struct{ Dir, Error string }
	if err := json.Unmarshal(out.Bytes(), &info); err != nil {
		return "", fmt.Errorf("decode go mod download output for %s: %w", moduleAtVersion, err)
	}
	if info.Error != "" || info.Dir == "" {
		return "", fmt.Errorf("go mod download %s: %s", moduleAtVersion, info.Error)
	}
	p := filepath.Join(info.Dir, filepath.FromSlash(path))
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("file %s of %s: %w", path, moduleAtVersion, err)
	}
	return p, nil
}
