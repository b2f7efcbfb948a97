// Package metricdeps is the metrics half of package deps: the default
// Prometheus registerer of a component built without one. It is a package of
// its own so that libraries which take a logger and a clock from deps
// (client, for one) do not pull in Prometheus.
//
// # Invariants
//
//   - A nil registerer becomes a private registry that nothing gathers,
//     never prometheus.DefaultRegisterer, so two components, or two tests,
//     never share one by accident.
//   - A registerer given is returned as it is.
package metricdeps
