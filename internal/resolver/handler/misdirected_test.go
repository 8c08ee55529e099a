package handler

import (
	"net/netip"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	"elasti.dev/elasti/internal/resolver/route"
)

type knownNamespaces map[string]bool

func (k knownNamespaces) Known(ns string) bool { return k[ns] }

func TestMisdirected(t *testing.T) {
	target := route.Route{Target: route.Target{Service: types.NamespacedName{Namespace: "shop", Name: "web"}}, Mapped: true,
		Local: netip.MustParseAddr("10.244.0.7")}
	known := knownNamespaces{"shop": true, "billing": true}
	for host, want := range map[string]bool{
		// Its own names, in every form, and what names no Service.
		"web": false, "web:8080": false, "WEB.shop": false, "web.shop.svc": false,
		"web.shop.svc.cluster.local": false, "web.shop.svc.cluster.local.:80": false,
		"web-0.web.shop.svc.cluster.local": false,
		"10.96.0.12":                       false, "10.96.0.12:80": false, "[fd00::12]:80": false,
		"shop.example.com": false, "www.example.com": false, "api.unknown-ns": false, "": false,
		// Another Service.
		"api": true, "api:80": true, "api.shop": true, "web.billing": true, "invoices.billing.svc": true,
		"invoices.billing.svc.cluster.local": true, "web.billing.svc.cluster.local:443": true,
		"web-0.api.shop.svc.cluster.local": true,
		// The resolver pod's own address: a scan, not a Service's client.
		"10.244.0.7": true, "10.244.0.7:20001": true,
	} {
		if got := NewHosts("cluster.local", known).Misdirected(host, target); got != want {
			t.Errorf("Misdirected(%q) = %v, want %v", host, got, want)
		}
	}
	// Another cluster domain: the cluster.local forms are not this
	// cluster's, so they name no Service here.
	if NewHosts("corp.internal", known).Misdirected("web.shop.svc.corp.internal", target) {
		t.Error("own name under a custom cluster domain refused")
	}
	if !NewHosts("corp.internal", known).Misdirected("api.shop.svc.corp.internal", target) {
		t.Error("another Service under a custom cluster domain let through")
	}
	// Loopback is the pod's (and tests') own: left alone.
	loopback := target
	loopback.Local = netip.MustParseAddr("127.0.0.1")
	if NewHosts("cluster.local", known).Misdirected("127.0.0.1:20001", loopback) || addressedToResolver("127.0.0.1", loopback.Local) {
		t.Error("a request to the loopback address taken for a scan")
	}
	if !addressedToResolver("[::ffff:10.244.0.7]:80", target.Local) || addressedToResolver("10.96.0.1", target.Local) || addressedToResolver("web", target.Local) {
		t.Error("ToResolver tells the resolver's own address wrongly")
	}
}
