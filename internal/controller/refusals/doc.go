// Package refusals decides when Elasti will not take a Service into the
// data path, and says why in a Refusal: the Ready reason and message the
// status carries and the Warning Event repeats. The checks are pure and run
// in the order observe reaches them: Service on the Service's shape alone
// (before a resolver port is allocated to it), Family against the IP
// families of the ready resolvers, Selector against the labels of the
// target's pod template. Is tells a refusal's reason from the others.
//
// Two ElastiServices that name one Service or one scale target would
// fight; Rival picks, from the ElastiServices the caller listed as naming
// either, the older one that keeps this one from acting, and
// StandDownStatus builds the status of the one that stands down. It writes
// nothing and never imports internal/controller: the reconciler lists the
// claimants, takes the ElastiService that stands down out of the data path
// and writes its status.
package refusals
