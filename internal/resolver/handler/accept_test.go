package handler

import (
	"net/http"
	"strings"
	"testing"

	"elasti.dev/elasti/internal/resolver/resolvertest"
)

const browserAccept = resolvertest.BrowserAccept

func TestPrefersHTML(t *testing.T) {
	tests := []struct {
		name   string
		accept []string
		want   bool
	}{
		{"Firefox and Safari page load", []string{browserAccept}, true},
		{"Chrome page load, images at q=1 after text/html", []string{"text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,image/apng,*/*;q=0.8,application/signed-exchange;v=b3;q=0.7"}, true},
		{"XHTML alone", []string{"application/xhtml+xml"}, true},
		{"XHTML first, HTML lower", []string{"application/xhtml+xml, text/html;q=0.5"}, true},
		{"case and spaces do not matter", []string{" TEXT/HTML ; Q=1 , */*;q=0.1"}, true},
		{"HTML raised above an earlier type by its q", []string{"application/json;q=0.5, text/html"}, true},
		{"HTML ranked first across two Accept headers", []string{"application/json;q=0.4", "text/html;q=0.6"}, true},
		{"a quoted comma inside a parameter", []string{`text/html;profile="a,b";q=0.9, application/json;q=0.8`}, true},
		{"parameters after q are ignored", []string{"text/html;q=0.9;ext=1, */*;q=0.8"}, true},
		{"no Accept header", nil, false},
		{"empty Accept header", []string{""}, false},
		{"curl's */*", []string{"*/*"}, false},
		{"text/* is a wildcard, not HTML", []string{"text/*"}, false},
		{"API client", []string{"application/json"}, false},
		{"API client that also takes HTML, listed second", []string{"application/json, text/html"}, false},
		{"HTML below JSON", []string{"text/html;q=0.5, application/json;q=0.9"}, false},
		{"HTML refused with q=0", []string{"text/html;q=0"}, false},
		{"HTML refused, anything else welcome", []string{"text/html;q=0, */*"}, false},
		{"image request from a browser", []string{"image/avif,image/webp,image/apng,image/svg+xml,image/*,*/*;q=0.8"}, false},
		{"a q that is not a number skips the range", []string{"text/html;q=high, application/json;q=0.1"}, false},
		{"a q above 1 skips the range", []string{"text/html;q=2"}, false},
		{"a range without a subtype is skipped", []string{"html, application/json;q=0.1"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := prefersHTML(tt.accept); got != tt.want {
				t.Errorf("prefersHTML(%q) = %v, want %v", tt.accept, got, tt.want)
			}
		})
	}
}

func TestWantsWakingPage(t *testing.T) {
	tests := []struct {
		name   string
		method string
		body   string
		header map[string]string
		want   bool
	}{
		{"browser GET", http.MethodGet, "", map[string]string{"Accept": browserAccept}, true},
		{"browser HEAD", http.MethodHead, "", map[string]string{"Accept": browserAccept}, true},
		{"curl GET", http.MethodGet, "", map[string]string{"Accept": "*/*"}, false},
		{"GET without Accept", http.MethodGet, "", nil, false},
		{"form POST from a browser", http.MethodPost, "a=1", map[string]string{"Accept": browserAccept}, false},
		{"DELETE from a browser", http.MethodDelete, "", map[string]string{"Accept": browserAccept}, false},
		{"GET with a body", http.MethodGet, "q=1", map[string]string{"Accept": browserAccept}, false},
		{"WebSocket upgrade", http.MethodGet, "", map[string]string{"Accept": browserAccept, "Connection": "Upgrade", "Upgrade": "websocket"}, false},
		{"gRPC", http.MethodGet, "", map[string]string{"Accept": browserAccept, "Content-Type": "application/grpc+proto"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequest(tt.method, "http://web/", strings.NewReader(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			if tt.body == "" {
				req.Body, req.ContentLength = http.NoBody, 0
			}
			for k, v := range tt.header {
				req.Header.Set(k, v)
			}
			if got := wantsWakingPage(req); got != tt.want {
				t.Errorf("wantsWakingPage = %v, want %v", got, tt.want)
			}
		})
	}
}
