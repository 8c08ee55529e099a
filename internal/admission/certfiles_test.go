package admission

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

func TestCertFilesSync(t *testing.T) {
	ctx := context.Background()
	key := types.NamespacedName{Namespace: "elasti-system", Name: "elasti-webhook-cert"}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
	c := fake.NewClientBuilder().WithObjects(secret).Build()
	dir := t.TempDir()
	cf := &certFiles{reader: c, secret: key, dir: dir}

	// Empty, as the install creates it: nothing to write yet.
	if written, err := cf.sync(ctx); err != nil || written {
		t.Fatalf("empty Secret: written %v, err %v", written, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "tls.crt")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("tls.crt written from an empty Secret (%v)", err)
	}

	fill := func(crt, k string) {
		t.Helper()
		if err := c.Get(ctx, key, secret); err != nil {
			t.Fatal(err)
		}
		secret.Data = map[string][]byte{"ca.crt": []byte("ca"), "tls.crt": []byte(crt), "tls.key": []byte(k)}
		if err := c.Update(ctx, secret); err != nil {
			t.Fatal(err)
		}
	}
	expect := func(crt, k string) {
		t.Helper()
		if written, err := cf.sync(ctx); err != nil || !written {
			t.Fatalf("sync: written %v, err %v", written, err)
		}
		for name, want := range map[string]string{"tls.crt": crt, "tls.key": k} {
			got, err := os.ReadFile(filepath.Join(dir, name))
			if err != nil || string(got) != want {
				t.Errorf("%s = %q (%v), want %q", name, got, err, want)
			}
		}
		entries, _ := os.ReadDir(dir)
		if len(entries) != 2 {
			t.Errorf("%d files in the directory, want tls.crt and tls.key only: %v", len(entries), entries)
		}
	}

	fill("cert-1", "key-1")
	expect("cert-1", "key-1")
	// Unchanged: the files are left alone (their modification time too).
	before, _ := os.Stat(filepath.Join(dir, "tls.crt"))
	time.Sleep(10 * time.Millisecond)
	expect("cert-1", "key-1")
	if after, _ := os.Stat(filepath.Join(dir, "tls.crt")); !after.ModTime().Equal(before.ModTime()) {
		t.Error("an unchanged certificate was rewritten")
	}
	// Renewed by the rotator: the new pair replaces the old.
	fill("cert-2", "key-2")
	expect("cert-2", "key-2")

	// A Secret that is gone is an error, and the files stay.
	if err := c.Delete(ctx, secret); err != nil {
		t.Fatal(err)
	}
	if _, err := cf.sync(ctx); err == nil {
		t.Error("sync of a missing Secret: no error")
	}
}

// TestCertFilesStart: Start polls fast until the pair is written, then
// slowly, and returns when its context ends.
func TestCertFilesStart(t *testing.T) {
	key := types.NamespacedName{Namespace: "elasti-system", Name: "cert"}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
	gets := make(chan struct{}, 100)
	c := fake.NewClientBuilder().WithObjects(secret).Build()
	counting := &countingReader{Reader: c, gets: gets}
	clk := clocktesting.NewFakeClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	dir := t.TempDir()
	cf := &certFiles{reader: counting, secret: key, dir: dir, clock: clk, fast: time.Second, slow: time.Minute}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- cf.Start(ctx) }()

	waitGet := func() {
		t.Helper()
		select {
		case <-gets:
		case <-time.After(10 * time.Second):
			t.Fatal("no poll of the Secret")
		}
		for !clk.HasWaiters() {
			time.Sleep(time.Millisecond)
		}
	}
	waitGet() // the first poll is immediate
	clk.Step(time.Second)
	waitGet() // still empty: the next poll a second later
	secret.Data = map[string][]byte{"tls.crt": []byte("c"), "tls.key": []byte("k")}
	if err := c.Update(context.Background(), secret); err != nil {
		t.Fatal(err)
	}
	clk.Step(time.Second)
	waitGet() // writes the pair
	if _, err := os.Stat(filepath.Join(dir, "tls.crt")); err != nil {
		t.Fatalf("the pair was not written: %v", err)
	}
	clk.Step(time.Second)
	select {
	case <-gets:
		t.Fatal("polled a second after the pair was written; want the slow interval")
	case <-time.After(100 * time.Millisecond):
	}
	clk.Step(time.Minute)
	waitGet()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Start returned %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Start did not return after its context ended")
	}
}

type countingReader struct {
	client.Reader
	gets chan<- struct{}
}

func (r *countingReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	err := r.Reader.Get(ctx, key, obj, opts...)
	r.gets <- struct{}{}
	return err
}
