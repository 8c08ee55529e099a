package handler

import (
	"testing"

	"k8s.io/apimachinery/pkg/types"

	"elasti.dev/elasti/internal/resolver/route"
)

type knownNamespaces map[string]bool

func (k knownNamespaces) Known(ns string) bool { return k[ns] }

func TestMisdirected(t *testing.T) {
	target := route.Target{Service: types.NamespacedName{Namespace: "shop", Name: "web"}}
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
	} {
		if got := Misdirected(host, target, "cluster.local", known); got != want {
			t.Errorf("Misdirected(%q) = %v, want %v", host, got, want)
		}
	}
	// Another cluster domain: the cluster.local forms are not this
	// cluster's, so they name no Service here.
	if Misdirected("web.shop.svc.corp.internal", target, "corp.internal", known) {
		t.Error("own name under a custom cluster domain refused")
	}
	if !Misdirected("api.shop.svc.corp.internal", target, "corp.internal", known) {
		t.Error("another Service under a custom cluster domain let through")
	}
}
