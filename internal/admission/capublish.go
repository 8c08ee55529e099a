package admission

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// CAKey is the key of the CA certificate in the certificate Secret, and
// the key under which caPublisher publishes it in its ConfigMap.
const CAKey = "ca.crt"

// caPublisher keeps a ConfigMap holding the CA certificate of the
// certificate Secret, and nothing else from it: the resolvers verify the
// activation server with that CA, and may not read the Secret, which also
// holds the CA's private key.
type caPublisher struct {
	reader    client.Reader
	writer    client.Writer
	secret    types.NamespacedName
	configMap string
	clock     clock.Clock
	// fast is the poll interval until the CA has first been published,
	// slow the one after, when only a new CA can change it.
	fast, slow time.Duration
}

var (
	_ manager.Runnable               = (*caPublisher)(nil)
	_ manager.LeaderElectionRunnable = (*caPublisher)(nil)
)

// NeedLeaderElection is false: every replica publishes the same CA, read
// from the same Secret, so the ConfigMap is current as soon as any replica
// runs, leader or not.
func (*caPublisher) NeedLeaderElection() bool { return false }

// Start polls the Secret until ctx ends, logging and retrying errors.
func (p *caPublisher) Start(ctx context.Context) error {
	logger := log.FromContext(ctx).WithName("activation-ca")
	poll(ctx, p.clock, p.fast, p.slow, p.sync, func(err error) {
		logger.Error(err, "publish the activation CA", "secret", p.secret.String(), "configmap", p.configMap)
	})
	return nil
}

// sync writes the Secret's CA into the ConfigMap, creating it if needed,
// when the two differ. It reports whether the ConfigMap holds the CA.
func (p *caPublisher) sync(ctx context.Context) (bool, error) {
	var s corev1.Secret
	if err := p.reader.Get(ctx, p.secret, &s); err != nil {
		return false, fmt.Errorf("get Secret %s: %w", p.secret, err)
	}
	ca := s.Data[CAKey]
	if len(ca) == 0 {
		return false, nil // the rotator has not filled it yet
	}
	want := caConfigMap(&s, p.configMap)
	key := client.ObjectKeyFromObject(want)
	var got corev1.ConfigMap
	switch err := p.reader.Get(ctx, key, &got); {
	case apierrors.IsNotFound(err):
		if err := p.writer.Create(ctx, want); err != nil {
			return false, fmt.Errorf("create ConfigMap %s: %w", key, err)
		}
		return true, nil
	case err != nil:
		return false, fmt.Errorf("get ConfigMap %s: %w", key, err)
	}
	if got.Data[CAKey] == want.Data[CAKey] && len(got.Data) == 1 && len(got.BinaryData) == 0 {
		return true, nil
	}
	got.Data, got.BinaryData = want.Data, nil
	if len(got.OwnerReferences) == 0 {
		got.OwnerReferences = want.OwnerReferences
	}
	if err := p.writer.Update(ctx, &got); err != nil {
		return false, fmt.Errorf("update ConfigMap %s: %w", key, err)
	}
	return true, nil
}

// caConfigMap is the ConfigMap name publishing the CA certificate of the
// certificate Secret s, in s's namespace. s owns it, so that it goes when
// the install that created s is removed.
func caConfigMap(s *corev1.Secret, name string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: s.Namespace,
			Name:      name,
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "v1", Kind: "Secret", Name: s.Name, UID: s.UID,
			}},
		},
		Data: map[string]string{CAKey: string(s.Data[CAKey])},
	}
}
