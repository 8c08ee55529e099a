package chart

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// argValue is the value of --name= in args, and whether it is there.
func argValue(args []string, name string) (string, bool) {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v, true
		}
	}
	return "", false
}

// caVolume is the ConfigMap volume mounted in the directory of file, or
// nil.
func caVolume(spec corev1.PodSpec, file string) *corev1.ConfigMapVolumeSource {
	for _, m := range spec.Containers[0].VolumeMounts {
		if m.MountPath != filepath.Dir(file) {
			continue
		}
		for _, v := range spec.Volumes {
			if v.Name == m.Name && v.ConfigMap != nil {
				return v.ConfigMap
			}
		}
	}
	return nil
}

// TestActivationTLS: with the webhook on, the resolver calls the operator
// over https and trusts the CA file mounted from the ConfigMap the operator
// is told to publish; the Service says https. With the webhook off, there
// is no certificate: plain HTTP and no CA volume.
func TestActivationTLS(t *testing.T) {
	r := render(t, "")
	var op, res appsv1.Deployment
	r.decode(t, "Deployment/elasti-x-operator", &op)
	r.decode(t, "Deployment/elasti-x-resolver", &res)
	args := res.Spec.Template.Spec.Containers[0].Args
	if url, _ := argValue(args, "operator-url"); url != "https://elasti-x-operator.platform.svc:8013" {
		t.Errorf("resolver --operator-url=%q, want https to the release's operator Service", url)
	}
	caFile, ok := argValue(args, "operator-ca-file")
	if !ok {
		t.Fatal("the resolver is not given --operator-ca-file")
	}
	published, _ := argValue(op.Spec.Template.Spec.Containers[0].Args, "activation-ca-configmap")
	vol := caVolume(res.Spec.Template.Spec, caFile)
	switch {
	case vol == nil:
		t.Errorf("no ConfigMap volume mounted at %s", filepath.Dir(caFile))
	case published == "" || vol.Name != published:
		t.Errorf("the resolver mounts ConfigMap %q, the operator publishes the CA in %q", vol.Name, published)
	case filepath.Base(caFile) != "ca.crt":
		t.Errorf("--operator-ca-file=%s: the ConfigMap's key is ca.crt", caFile)
	}
	var svc corev1.Service
	r.decode(t, "Service/elasti-x-operator", &svc)
	for _, p := range svc.Spec.Ports {
		if p.Name == "activation" && (p.AppProtocol == nil || *p.AppProtocol != "https") {
			t.Errorf("the activation port's appProtocol is %v, want https", p.AppProtocol)
		}
	}

	off := render(t, "webhook.enabled=false")
	off.decode(t, "Deployment/elasti-x-resolver", &res)
	args = res.Spec.Template.Spec.Containers[0].Args
	if url, _ := argValue(args, "operator-url"); !strings.HasPrefix(url, "http://") {
		t.Errorf("webhook off: resolver --operator-url=%q, want plain http", url)
	}
	if vol := caVolume(res.Spec.Template.Spec, "/var/run/elasti/activation-ca/ca.crt"); vol != nil {
		t.Errorf("webhook off: the resolver mounts CA ConfigMap %q, which nobody publishes", vol.Name)
	}
}

// TestKustomizeActivationTLS: the kustomize resolver, and the e2e and bench
// overlays that replace its args, call the operator over https and mount
// the ConfigMap the operator publishes by default.
func TestKustomizeActivationTLS(t *testing.T) {
	var base appsv1.Deployment
	if err := yaml.Unmarshal(read(t, filepath.Join(repoRoot, "config", "resolver", "deployment.yaml")), &base); err != nil {
		t.Fatal(err)
	}
	args := base.Spec.Template.Spec.Containers[0].Args
	caFile, _ := argValue(args, "operator-ca-file")
	if vol := caVolume(base.Spec.Template.Spec, caFile); vol == nil || vol.Name != "elasti-activation-ca" {
		t.Errorf("config/resolver does not mount ConfigMap elasti-activation-ca at --operator-ca-file's directory (%q): %+v", caFile, vol)
	}
	flags := string(read(t, filepath.Join(repoRoot, "cmd", "elasti-operator", "flags.go")))
	if !strings.Contains(flags, `"activation-ca-configmap", "elasti-activation-ca"`) {
		t.Error("the operator's --activation-ca-configmap default is not elasti-activation-ca, which config/resolver mounts")
	}
	for _, f := range []string{"config/resolver/deployment.yaml", "test/e2e/testdata/elasti/resolver.yaml", "bench/testdata/elasti/resolver.yaml"} {
		var d appsv1.Deployment
		b, err := os.ReadFile(filepath.Join(repoRoot, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := yaml.Unmarshal(b, &d); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if url, _ := argValue(d.Spec.Template.Spec.Containers[0].Args, "operator-url"); !strings.HasPrefix(url, "https://") {
			t.Errorf("%s: --operator-url=%q, want https", f, url)
		}
	}
}
