package cluster

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// Image is a single-binary image: an empty base, one layer holding the static
// binary at /<name> and an empty /tmp, and a config naming the entrypoint.
type Image struct {
	// Ref is the image name and tag, never "latest" (elasti/demoapp:dev).
	Ref string
	// Pkg is the Go main package to build, relative to the module root
	// (./test/demoapp). Empty when Binary is set.
	Pkg string
	// Binary is a prebuilt static binary (CoreDNS from the cache).
	Binary string
	// User is the uid:gid the image runs as.
	User string
}

// nonRoot is the conventional unprivileged uid:gid of distroless images.
const nonRoot = "65532:65532"

// ProjectImages are the images `make images` builds: the demo app, and the
// operator and resolver when their main packages exist.
func ProjectImages() []Image {
	return []Image{
		{Ref: "elasti/demoapp:dev", Pkg: "./test/demoapp", User: nonRoot},
		{Ref: "elasti/operator:dev", Pkg: "./cmd/elasti-operator", User: nonRoot},
		{Ref: "elasti/resolver:dev", Pkg: "./cmd/elasti-resolver", User: nonRoot},
	}
}

// systemImages are the images the cluster itself runs.
func (c Config) systemImages(corednsBin string) []Image {
	return []Image{
		{Ref: PauseImage, Pkg: "./test/cluster/cmd/pause", User: nonRoot},
		{Ref: CoreDNSImage, Binary: corednsBin, User: nonRoot},
	}
}

func (im Image) baseName() string {
	repo := im.Ref
	if i := strings.LastIndexByte(repo, ':'); i > 0 {
		repo = repo[:i]
	}
	return filepath.Base(repo)
}

// hasMain reports whether the image's package exists in the module.
func (c Config) hasMain(im Image) bool {
	if im.Pkg == "" {
		return true
	}
	matches, _ := filepath.Glob(filepath.Join(c.RepoRoot, im.Pkg, "*.go"))
	for _, m := range matches {
		if strings.HasSuffix(m, "_test.go") {
			continue
		}
		if b, err := os.ReadFile(m); err == nil && bytes.Contains(b, []byte("package main")) {
			return true
		}
	}
	return false
}

func (c Config) imageDir() string { return filepath.Join(c.CacheDir, "images") }

// BuildImage builds im into a docker-archive tarball under the cache and
// returns its path.
func (c Config) BuildImage(ctx context.Context, im Image) (string, error) {
	dir := c.imageDir()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	bin := im.Binary
	if bin == "" {
		bin = filepath.Join(dir, im.baseName())
		if err := goBuild(ctx, c.RepoRoot, im.Pkg, bin); err != nil {
			return "", err
		}
	}
	tag, err := name.NewTag(im.Ref)
	if err != nil {
		return "", err
	}
	img, err := singleBinaryImage(bin, "/"+im.baseName(), im.User)
	if err != nil {
		return "", fmt.Errorf("build image %s: %w", im.Ref, err)
	}
	out := filepath.Join(dir, im.baseName()+".tar")
	if err := tarball.WriteToFile(out+".tmp", tag, img); err != nil {
		return "", fmt.Errorf("write image %s: %w", im.Ref, err)
	}
	return out, os.Rename(out+".tmp", out)
}

func singleBinaryImage(bin, target, user string) (v1.Image, error) {
	data, err := os.ReadFile(bin)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	// A fixed timestamp keeps the layer digest stable across builds.
	mtime := time.Unix(0, 0)
	entries := []struct {
		hdr  tar.Header
		body []byte
	}{
		{hdr: tar.Header{Name: "tmp/", Typeflag: tar.TypeDir, Mode: 0o1777}},
		{hdr: tar.Header{Name: strings.TrimPrefix(target, "/"), Typeflag: tar.TypeReg, Mode: 0o755, Size: int64(len(data))}, body: data},
	}
	for _, e := range entries {
		e.hdr.ModTime = mtime
		if err := tw.WriteHeader(&e.hdr); err != nil {
			return nil, err
		}
		if _, err := tw.Write(e.body); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	layerBytes := buf.Bytes()
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerBytes)), nil
	}, tarball.WithCompressionLevel(gzip.BestSpeed))
	if err != nil {
		return nil, err
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return nil, err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture = "linux", "amd64"
	cfg.Created = v1.Time{Time: mtime}
	cfg.Config.Entrypoint = []string{target}
	cfg.Config.User = user
	cfg.Config.WorkingDir = "/"
	cfg.Config.Env = []string{"PATH=/"}
	return mutate.ConfigFile(img, cfg)
}

// ImportImage imports a docker-archive tarball into every node's containerd,
// in the k8s.io namespace the kubelet uses.
func (c Config) ImportImage(ctx context.Context, tarPath string) error {
	if err := c.importImage(ctx, tarPath); err != nil {
		return err
	}
	for _, w := range c.existingWorkers() {
		if err := w.importImage(ctx, tarPath); err != nil {
			return fmt.Errorf("%s: %w", w.NodeName, err)
		}
	}
	return nil
}

// importImage imports a tarball into this node's containerd.
func (c Config) importImage(ctx context.Context, tarPath string) error {
	cmd := exec.CommandContext(ctx, "ctr", "--address", c.ContainerdSocket(), "-n", "k8s.io", "images", "import", tarPath)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("import %s: %w: %s", tarPath, err, out)
	}
	return nil
}

// Prebuild builds every image the cluster and the project need (pause,
// CoreDNS, the demo app, the operator, the resolver) into the cache, and
// imports none. It needs neither a cluster nor the Kubernetes binaries, so
// `make demo` runs it while those build; Up and BuildImages then find the
// builds cached.
func (c Config) Prebuild(ctx context.Context, logf func(string, ...any)) error {
	if _, err := c.systemImageTarballs(ctx, Logf(logf)); err != nil {
		return err
	}
	return c.BuildImages(ctx, logf)
}

// BuildImages builds the project's images and, when the cluster runs, imports
// them. It skips images whose main package does not exist yet.
func (c Config) BuildImages(ctx context.Context, logf func(string, ...any)) error {
	running := c.Running()
	for _, im := range ProjectImages() {
		if !c.hasMain(im) {
			logf("skip %s: no main package in %s yet", im.Ref, im.Pkg)
			continue
		}
		logf("build %s from %s", im.Ref, im.Pkg)
		tarPath, err := c.BuildImage(ctx, im)
		if err != nil {
			return err
		}
		if !running {
			logf("cluster not running: %s built at %s, not imported", im.Ref, tarPath)
			continue
		}
		if err := c.ImportImage(ctx, tarPath); err != nil {
			return err
		}
		logf("imported %s", im.Ref)
	}
	return nil
}
