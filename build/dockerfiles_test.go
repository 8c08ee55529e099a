package build

import (
	"encoding/json"
	"os"
	"os/exec"
	"path"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"elasti.dev/elasti/test/cluster"
)

// binaryName mirrors test/cluster's Image.baseName: the image repository's
// last element ("elasti/operator:dev" -> "operator") is both the binary's
// name and, as /<name>, its path and entrypoint.
func binaryName(ref string) string {
	repo := ref
	if i := strings.LastIndexByte(repo, ':'); i > 0 {
		repo = repo[:i]
	}
	return path.Base(repo)
}

// dockerImages are the images of `make images` that ship: every main package
// under ./cmd. The demo app is a test fixture and has no Dockerfile.
func dockerImages(t *testing.T) []cluster.Image {
	t.Helper()
	var out []cluster.Image
	for _, im := range cluster.ProjectImages() {
		if strings.HasPrefix(im.Pkg, "./cmd/") {
			out = append(out, im)
		}
	}
	if len(out) < 2 {
		t.Fatalf("test/cluster.ProjectImages lists %d images under ./cmd, want the operator and the resolver", len(out))
	}
	return out
}

// finalBases are the bases a shipped image may run on: nothing but the
// binary, or distroless's static image for the nonroot user (optionally
// pinned by digest).
var finalBases = regexp.MustCompile(`^(scratch|gcr\.io/distroless/static(-debian\d+)?:nonroot(@sha256:[0-9a-f]{64})?)$`)

// goBuildOutput finds "-o <path>" in a go build command line.
var goBuildOutput = regexp.MustCompile(`(?:^|\s)-o[ =](\S+)`)

func TestDockerfilesMatchMakeImages(t *testing.T) {
	for _, im := range dockerImages(t) {
		name := binaryName(im.Ref)
		file := name + ".Dockerfile"
		t.Run(file, func(t *testing.T) {
			text, err := os.ReadFile(file)
			if err != nil {
				t.Fatalf("%s builds %s from %s and needs a Dockerfile: %v", im.Ref, name, im.Pkg, err)
			}
			stages, err := parseDockerfile(string(text))
			if err != nil {
				t.Fatalf("parse %s: %v", file, err)
			}
			if len(stages) < 2 {
				t.Fatalf("%s has %d stages; want a multi-stage build", file, len(stages))
			}
			builder, final := stages[0], stages[len(stages)-1]

			// The builder: the project's Go, a static, reproducible build of
			// the same package make images builds.
			if !strings.HasPrefix(builder.image, "golang:1.26") {
				t.Errorf("builder image = %q, want golang:1.26", builder.image)
			}
			if builder.name == "" {
				t.Error("the builder stage needs a name for COPY --from")
			}
			env := strings.Join(argsOf(builder.find("ENV")), " ") + " " + strings.Join(argsOf(builder.find("RUN")), " ")
			for _, want := range []string{"CGO_ENABLED=0", "GOTOOLCHAIN=local"} {
				if !strings.Contains(env, want) {
					t.Errorf("the builder does not set %s", want)
				}
			}
			var built string
			for _, run := range builder.find("RUN") {
				if !strings.Contains(run.args, "go build") {
					continue
				}
				if !strings.HasSuffix(run.args, " "+im.Pkg) {
					t.Errorf("line %d: go build must build %s (as make images does): %s", run.line, im.Pkg, run.args)
				}
				if !strings.Contains(run.args, "-trimpath") {
					t.Errorf("line %d: go build lacks -trimpath: %s", run.line, run.args)
				}
				if m := goBuildOutput.FindStringSubmatch(run.args); m != nil {
					built = m[1]
				}
			}
			if built == "" {
				t.Fatalf("no `go build -o <path> %s` in the builder stage", im.Pkg)
			}

			// The final stage: a minimal base, the binary at /<name>, the
			// user and entrypoint of make images' image.
			if !finalBases.MatchString(final.image) {
				t.Errorf("final base = %q, want scratch or gcr.io/distroless/static:nonroot", final.image)
			}
			copied := false
			for _, c := range final.find("COPY") {
				from, _ := c.flag("from")
				if from == builder.name && c.args == built+" /"+name {
					copied = true
				}
			}
			if !copied {
				t.Errorf("the final stage must COPY --from=%s %s /%s", builder.name, built, name)
			}
			users := argsOf(final.find("USER"))
			if len(users) != 1 || users[0] != im.User {
				t.Errorf("final USER = %q, want %q as make images sets", users, im.User)
			}
			if strings.HasPrefix(im.User, "0:") || im.User == "0" || strings.HasPrefix(im.User, "root") {
				t.Errorf("images must not run as root, got %q", im.User)
			}
			entry := final.find("ENTRYPOINT")
			if len(entry) != 1 {
				t.Fatalf("want one ENTRYPOINT in the final stage, got %d", len(entry))
			}
			var argv []string
			if err := json.Unmarshal([]byte(entry[0].args), &argv); err != nil {
				t.Fatalf("ENTRYPOINT must be exec form (a JSON array), so no shell is needed: %v", err)
			}
			if diff := cmp.Diff([]string{"/" + name}, argv); diff != "" {
				t.Errorf("ENTRYPOINT (-want +got):\n%s", diff)
			}
		})
	}
}

// TestDockerfilesCopyEveryPackage: the builder copies only some directories
// of the repository; every project package the binary imports must be among
// them, or the image build fails where `go build` works.
func TestDockerfilesCopyEveryPackage(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command on PATH")
	}
	const module = "elasti.dev/elasti/"
	for _, im := range dockerImages(t) {
		file := binaryName(im.Ref) + ".Dockerfile"
		t.Run(file, func(t *testing.T) {
			text, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			stages, err := parseDockerfile(string(text))
			if err != nil {
				t.Fatal(err)
			}
			var dirs []string
			for _, c := range stages[0].find("COPY") {
				words := strings.Fields(c.args)
				for _, src := range words[:len(words)-1] {
					dirs = append(dirs, strings.TrimSuffix(src, "/"))
				}
			}
			cmd := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", im.Pkg)
			cmd.Dir = ".."
			cmd.Env = append(os.Environ(), "GOTOOLCHAIN=local", "CGO_ENABLED=0", "GOOS=linux")
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("go list %s: %v\n%s", im.Pkg, err, out)
			}
			for _, pkg := range strings.Fields(string(out)) {
				rel, ok := strings.CutPrefix(pkg, module)
				if !ok {
					continue
				}
				if !underAny(rel, dirs) {
					t.Errorf("%s imports %s, but %s copies only %v into the builder", im.Pkg, pkg, file, dirs)
				}
			}
		})
	}
}

func underAny(rel string, dirs []string) bool {
	for _, d := range dirs {
		if rel == d || strings.HasPrefix(rel, d+"/") {
			return true
		}
	}
	return false
}

func argsOf(ins []instruction) []string {
	out := make([]string, 0, len(ins))
	for _, in := range ins {
		out = append(out, in.args)
	}
	return out
}

// The parser must read what Docker reads, or the checks above mean nothing.
func TestParseDockerfile(t *testing.T) {
	text := `# syntax=docker/dockerfile:1
ARG GO=1.26
FROM --platform=$BUILDPLATFORM golang:1.26 AS build
# a comment
RUN a \
    b
FROM scratch
COPY --from=build /x /y
`
	stages, err := parseDockerfile(text)
	if err != nil {
		t.Fatal(err)
	}
	type flat struct{ Image, Name, Body string }
	var got []flat
	for _, s := range stages {
		var body []string
		for _, in := range s.body {
			body = append(body, in.cmd+" "+strings.Join(in.flags, " ")+"|"+in.args)
		}
		got = append(got, flat{Image: s.image, Name: s.name, Body: strings.Join(body, ";")})
	}
	want := []flat{
		{Image: "golang:1.26", Name: "build", Body: "RUN |a  b"},
		{Image: "scratch", Body: "COPY --from=build|/x /y"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("stages (-want +got):\n%s", diff)
	}
	if _, err := parseDockerfile("FROM scratch\nRUN a \\\n"); err == nil {
		t.Error("an unterminated continuation must be an error")
	}
}
