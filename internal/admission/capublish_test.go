package admission

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

func TestCAPublisherSync(t *testing.T) {
	ctx := context.Background()
	key := types.NamespacedName{Namespace: "elasti-system", Name: "elasti-webhook-cert"}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name, UID: "secret-uid"}}
	c := fake.NewClientBuilder().WithObjects(secret).Build()
	p := &caPublisher{reader: c, writer: c, secret: key, configMap: "elasti-activation-ca"}
	cmKey := client.ObjectKey{Namespace: key.Namespace, Name: "elasti-activation-ca"}

	// Empty, as the install creates it: nothing to publish yet.
	if done, err := p.sync(ctx); err != nil || done {
		t.Fatalf("empty Secret: done %v, err %v", done, err)
	}
	var cm corev1.ConfigMap
	if err := c.Get(ctx, cmKey, &cm); err == nil {
		t.Fatalf("ConfigMap created from an empty Secret: %+v", cm.Data)
	}

	setCA := func(ca string) {
		t.Helper()
		if err := c.Get(ctx, key, secret); err != nil {
			t.Fatal(err)
		}
		secret.Data = map[string][]byte{"ca.crt": []byte(ca), "ca.key": []byte("secret key"), "tls.crt": []byte("crt"), "tls.key": []byte("key")}
		if err := c.Update(ctx, secret); err != nil {
			t.Fatal(err)
		}
	}
	expect := func(ca string) {
		t.Helper()
		if done, err := p.sync(ctx); err != nil || !done {
			t.Fatalf("sync: done %v, err %v", done, err)
		}
		if err := c.Get(ctx, cmKey, &cm); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(map[string]string{"ca.crt": ca}, cm.Data); diff != "" {
			t.Errorf("ConfigMap data (-want +got)\n%s", diff)
		}
		if refs := cm.OwnerReferences; len(refs) != 1 || refs[0].UID != "secret-uid" {
			t.Errorf("owner references %+v, want the Secret", refs)
		}
	}
	setCA("ca-1")
	expect("ca-1") // created
	rv := cm.ResourceVersion
	expect("ca-1") // unchanged: no write
	if cm.ResourceVersion != rv {
		t.Errorf("ConfigMap rewritten although the CA did not change")
	}
	setCA("ca-2")
	expect("ca-2") // a new CA replaces the old

	// Edited by hand, with extra keys: put back to the CA alone.
	cm.Data["extra"] = "x"
	cm.Data["ca.crt"] = "forged"
	if err := c.Update(ctx, &cm); err != nil {
		t.Fatal(err)
	}
	expect("ca-2")
}
