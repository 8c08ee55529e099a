package scaling

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
)

// credentials is what a trigger sends in its Authorization header, and where
// it came from, for messages.
type credentials struct {
	// header is the Authorization header's value; empty sends none.
	header string
	// source names the Secret, such as "the bearer token in Secret n/s key
	// token"; empty when there are no credentials.
	source string
}

// readCredentials reads the trigger's authSecretRef (a bearer token) or
// basicAuthSecretRef (a username and password) through secrets, the
// Evaluator's Secrets. The CRD refuses both at once; should both still
// arrive, the bearer token wins.
func readCredentials(ctx context.Context, secrets client.Reader, namespace string, md elastiv1alpha1.TriggerMetadata) (credentials, *Result) {
	switch {
	case md.AuthSecretRef != nil:
		token, res := bearer(ctx, secrets, namespace, md.AuthSecretRef)
		if res != nil {
			return credentials{}, res
		}
		return credentials{
			header: "Bearer " + token,
			source: fmt.Sprintf("the bearer token in Secret %s/%s key %s", namespace, md.AuthSecretRef.Name, md.AuthSecretRef.Key),
		}, nil
	case md.BasicAuthSecretRef != nil:
		user, password, res := basicAuth(ctx, secrets, namespace, md.BasicAuthSecretRef)
		if res != nil {
			return credentials{}, res
		}
		return credentials{
			header: "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+password)),
			source: fmt.Sprintf("the username and password in Secret %s/%s", namespace, md.BasicAuthSecretRef.Name),
		}, nil
	}
	return credentials{}, nil
}

// bearer reads the token from the named Secret key.
func bearer(ctx context.Context, secrets client.Reader, namespace string, ref *elastiv1alpha1.SecretKeySelector) (string, *Result) {
	s, res := secret(ctx, secrets, namespace, ref.Name)
	if res != nil {
		return "", res
	}
	v, res := secretKey(s, ref.Key)
	if res != nil {
		return "", res
	}
	return strings.TrimSpace(string(v)), nil
}

// basicAuth reads the keys username and password of the named Secret, the
// keys of a kubernetes.io/basic-auth Secret (any Secret type holding them
// works). A line ending at the end of either value is dropped, as one is
// easily written into a Secret made from a file; other whitespace is kept,
// since a password may hold it.
func basicAuth(ctx context.Context, secrets client.Reader, namespace string, ref *elastiv1alpha1.LocalSecretReference) (user, password string, _ *Result) {
	s, res := secret(ctx, secrets, namespace, ref.Name)
	if res != nil {
		return "", "", res
	}
	u, res := secretKey(s, corev1.BasicAuthUsernameKey)
	if res != nil {
		return "", "", res
	}
	p, res := secretKey(s, corev1.BasicAuthPasswordKey)
	if res != nil {
		return "", "", res
	}
	user, password = trimLineEnding(string(u)), trimLineEnding(string(p))
	if strings.Contains(user, ":") {
		// RFC 7617: the first colon separates the user from the password.
		r := unhealthy(ReasonAuthSecretUnavailable, fmt.Sprintf("Secret %s/%s key %q holds a colon, which HTTP basic authentication cannot carry in a username", namespace, ref.Name, corev1.BasicAuthUsernameKey))
		return "", "", &r
	}
	return user, password, nil
}

// secret reads a Secret of the ElastiService's namespace.
func secret(ctx context.Context, secrets client.Reader, namespace, name string) (*corev1.Secret, *Result) {
	if secrets == nil {
		r := unhealthy(ReasonAuthSecretUnavailable, "the operator has no Secret reader")
		return nil, &r
	}
	s := &corev1.Secret{}
	if err := secrets.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, s); err != nil {
		msg := fmt.Sprintf("read Secret %s/%s: %v", namespace, name, err)
		if apierrors.IsForbidden(err) {
			msg = fmt.Sprintf("the operator may not read Secret %s/%s: grant it with a Role naming that Secret (see docs/operator.md)", namespace, name)
		}
		r := unhealthy(ReasonAuthSecretUnavailable, msg)
		return nil, &r
	}
	return s, nil
}

// secretKey returns one key of a Secret's data.
func secretKey(s *corev1.Secret, key string) ([]byte, *Result) {
	v, ok := s.Data[key]
	if !ok {
		r := unhealthy(ReasonAuthSecretUnavailable, fmt.Sprintf("Secret %s/%s has no key %q", s.Namespace, s.Name, key))
		return nil, &r
	}
	return v, nil
}

func trimLineEnding(s string) string {
	return strings.TrimSuffix(strings.TrimSuffix(s, "\n"), "\r")
}
