package main

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// EchoMethod is the full name of the echo RPC. It takes and returns a
// google.protobuf.StringValue, so clients need no generated code:
//
//	conn.Invoke(ctx, EchoMethod, wrapperspb.String("hi"), &out)
const EchoMethod = "/elasti.demo.Echo/Echo"

// echoService describes elasti.demo.Echo by hand: one unary method whose
// messages are a well-known protobuf type.
var echoService = grpc.ServiceDesc{
	ServiceName: "elasti.demo.Echo",
	HandlerType: (*any)(nil),
	Methods: []grpc.MethodDesc{{
		MethodName: "Echo",
		Handler: func(_ any, ctx context.Context, dec func(any) error, intercept grpc.UnaryServerInterceptor) (any, error) {
			in := new(wrapperspb.StringValue)
			if err := dec(in); err != nil {
				return nil, err
			}
			echo := func(context.Context, any) (any, error) { return in, nil }
			if intercept == nil {
				return echo(ctx, in)
			}
			return intercept(ctx, in, &grpc.UnaryServerInfo{FullMethod: EchoMethod}, echo)
		},
	}},
}

// newGRPCServer serves the health service (SERVING) and the echo. A gRPC
// server on a plain listener speaks HTTP/2 without TLS: h2c.
func newGRPCServer() *grpc.Server {
	s := grpc.NewServer()
	hs := health.NewServer()
	hs.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	healthpb.RegisterHealthServer(s, hs)
	s.RegisterService(&echoService, struct{}{})
	return s
}
