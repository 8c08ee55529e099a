package cli

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
)

func TestNewListRow(t *testing.T) {
	cases := []struct {
		name string
		es   *elastiv1alpha1.ElastiService
		sc   scaleReading
		want listRow
	}{
		{
			name: "serving",
			es:   testES(),
			sc:   scaleReading{current: 2, desired: 2},
			want: listRow{
				Namespace: "demo", Name: "httpbin", Service: "httpbin", Target: "Deployment/httpbin",
				Mode: "serve", Replicas: "2/1", IdleFor: "-", LastWake: "3h", AtZero: "0%",
				Desired: "2", Ready: "True", Idle: "True", Ports: "http:80->20013", Age: "24h",
			},
		},
		{
			name: "asleep",
			es:   testES(asleep(2*time.Hour), atZero(3600, 2*time.Hour)),
			sc:   scaleReading{},
			want: listRow{
				Namespace: "demo", Name: "httpbin", Service: "httpbin", Target: "Deployment/httpbin",
				Mode: "proxy", Replicas: "0/1", IdleFor: "120m", LastWake: "3h", AtZero: "12%",
				Desired: "0", Ready: "True", Idle: "True", Ports: "http:80->20013", Age: "24h",
			},
		},
		{
			name: "scale unreadable and never reconciled",
			es: testES(func(es *elastiv1alpha1.ElastiService) {
				es.Status = elastiv1alpha1.ElastiServiceStatus{}
				es.Spec.MinTargetReplicas = 3
			}),
			sc: scaleReading{err: errors.New("forbidden")},
			want: listRow{
				Namespace: "demo", Name: "httpbin", Service: "httpbin", Target: "Deployment/httpbin",
				Mode: "-", Replicas: "?/3", IdleFor: "-", LastWake: "-", AtZero: "-",
				Desired: "?", Ready: "-", Idle: "-", Ports: "-", Age: "24h",
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, newListRow(tc.es, tc.sc, testNow)); diff != "" {
				t.Errorf("newListRow (-want +got):\n%s", diff)
			}
		})
	}
}

func TestFormatPorts(t *testing.T) {
	cases := []struct {
		name  string
		ports []elastiv1alpha1.ProxyPort
		want  string
	}{
		{name: "none", want: "-"},
		{name: "unnamed", ports: []elastiv1alpha1.ProxyPort{{Port: 8080, ResolverPort: 20000}}, want: "8080->20000"},
		{
			name:  "several",
			ports: []elastiv1alpha1.ProxyPort{{Name: "http", Port: 80, ResolverPort: 20001}, {Name: "grpc", Port: 9090, ResolverPort: 20002}},
			want:  "http:80->20001,grpc:9090->20002",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := formatPorts(tc.ports); got != tc.want {
				t.Errorf("formatPorts = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestWriteTable(t *testing.T) {
	rows := []listRow{
		newListRow(testES(), scaleReading{current: 1, desired: 1}, testNow),
		newListRow(testES(asleep(10*time.Minute), atZero(64800, 10*time.Minute), func(es *elastiv1alpha1.ElastiService) {
			es.Namespace, es.Name, es.Spec.Service = "shop", "checkout-api", "checkout"
			es.Spec.ScaleTargetRef.Kind, es.Spec.ScaleTargetRef.Name = "StatefulSet", "checkout"
		}), scaleReading{}, testNow),
	}
	cases := []struct {
		name string
		wide bool
		want string
	}{
		{
			name: "default",
			want: `NAMESPACE   NAME           SERVICE    TARGET                 MODE    REPLICAS   IDLE-FOR   LAST-WAKE   AT-ZERO
demo        httpbin        httpbin    Deployment/httpbin     serve   1/1        -          3h          0%
shop        checkout-api   checkout   StatefulSet/checkout   proxy   0/1        10m        3h          75%
`,
		},
		{
			name: "wide",
			wide: true,
			want: `NAMESPACE   NAME           SERVICE    TARGET                 MODE    REPLICAS   IDLE-FOR   LAST-WAKE   AT-ZERO   DESIRED   READY   IDLE   PORTS            AGE
demo        httpbin        httpbin    Deployment/httpbin     serve   1/1        -          3h          0%        1         True    True   http:80->20013   24h
shop        checkout-api   checkout   StatefulSet/checkout   proxy   0/1        10m        3h          75%       0         True    True   http:80->20013   24h
`,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := writeTable(&b, rows, tc.wide); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, b.String()); diff != "" {
				t.Errorf("table (-want +got):\n%s", diff)
			}
		})
	}
}
