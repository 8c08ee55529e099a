// Package resolvertest builds the objects the resolver's tests feed it in
// place of the informers: EndpointSlices and ElastiServices in proxy mode.
// Only tests import it.
package resolvertest
