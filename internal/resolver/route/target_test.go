package route

import (
	"testing"
)

func TestTargetLayer(t *testing.T) {
	tests := []struct {
		portName, appProtocol string
		want                  Layer
		h2c                   bool
	}{
		{"http", "", LayerHTTP, false},
		{"http-web", "", LayerHTTP, false},
		{"grpc-api", "", LayerHTTP, true},
		{"h2c", "", LayerHTTP, true},
		{"ws", "", LayerHTTP, false},
		{"https", "", LayerTCP, false},
		{"wss", "", LayerTCP, false},
		{"postgres", "", LayerTCP, false},
		{"", "", LayerTCP, false},
		{"web", "http", LayerHTTP, false},
		{"web", "kubernetes.io/h2c", LayerHTTP, true},
		{"web", "kubernetes.io/ws", LayerHTTP, false},
		{"web", "kubernetes.io/wss", LayerTCP, false},
		{"web", "grpc", LayerHTTP, true},
		{"http", "mysql", LayerTCP, false},
	}
	for _, tt := range tests {
		target := Target{PortName: tt.portName, AppProtocol: tt.appProtocol}
		if got := target.Layer(); got != tt.want {
			t.Errorf("Layer(name %q, appProtocol %q) = %v, want %v", tt.portName, tt.appProtocol, got, tt.want)
		}
		if got := target.H2C(); got != tt.h2c {
			t.Errorf("H2C(name %q, appProtocol %q) = %v, want %v", tt.portName, tt.appProtocol, got, tt.h2c)
		}
	}
}
